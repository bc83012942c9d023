package smppout

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// statusSeries are the status label values (sorted) of c's series that have
// command (pdus_total) or of all its series (submits_total: command "").
func statusSeries(t *testing.T, c prometheus.Collector, command string) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	go func() { c.Collect(ch); close(ch) }()
	var out []string
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if command == "" || labels["command"] == command {
			out = append(out, labels["status"])
		}
	}
	slices.Sort(out)
	return out
}

// An SMSC answers with whatever command_status it likes: the statuses
// SMPP v3.4 does not name (vendor-specific ones, garbage) count under one
// status label, other, in switchboard_smpp_frontend_pdus_total and
// _submits_total, so that such an SMSC cannot make series without bound;
// the verdict (the history detail) keeps the number.
func TestUnnamedStatusesShareOneSeries(t *testing.T) {
	unnamed := []smpp.Status{0x400, 0x4FF, 0x12345678}
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
		if s.N <= len(unnamed) {
			return unnamed[s.N-1], false
		}
		return smpp.StatusInvalidDstAddr, false
	})
	m := newMetrics(t)
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Metrics: m})
	for i, st := range append(unnamed, smpp.StatusInvalidDstAddr) {
		v := submitHi(c)
		want := fmt.Sprintf("%s (0x%08X)", st, uint32(st))
		if v.Status != messages.Failed || v.Reason != want {
			t.Fatalf("submit %d: %+v, want failed, reason %q", i+1, v, want)
		}
	}
	if got := strings.Join(statusSeries(t, m.commands, "submit_sm_resp"), " "); got != "ESME_RINVDSTADR other" {
		t.Errorf("pdus_total{command=submit_sm_resp} has series of statuses %q, want \"ESME_RINVDSTADR other\"", got)
	}
	if got := strings.Join(statusSeries(t, m.submits, ""), " "); got != "ESME_RINVDSTADR other" {
		t.Errorf("submits_total has series of statuses %q, want \"ESME_RINVDSTADR other\"", got)
	}
}
