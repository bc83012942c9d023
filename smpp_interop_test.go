package switchboard_test

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/gsm7"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp/smpptest"
)

// The smpp frontend against Perl's Net::SMPP as the SMSC (a peer written
// by others): Net::SMPP decodes our bind and our submit_sm — text in GSM
// 7-bit and in UCS-2, a binary payload, a long text in two parts behind
// a concatenation header — and sends a receipt right after each
// submit_sm_resp (before our commit of the verdict, as fast SMSCs do);
// each lands in its message's history and in its smsc ids; a receipt for
// an id it never gave is answered too. The node's stop unbinds.
func TestSMPPFrontendNetSMPPInterop(t *testing.T) {
	smpptest.NeedNetSMPP(t)
	sc, wait := smpptest.Script(t, filepath.Join("smpp", "testdata", "frontend_smsc.pl"))
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "port=") {
		t.Fatalf("frontend_smsc.pl did not print its port: %q", sc.Text())
	}
	cfg := testConfig(t)
	cfg.SMPPReceiptWait = 2 * time.Second // the unknown receipt's wait
	h := startNode(t, cfg)
	h.smppFrontend("perl", "smpp://switchbd:pw123456@127.0.0.1:"+strings.TrimPrefix(sc.Text(), "port=")+"?window=1&system_type=SB", "33")
	smpptest.Expect(t, sc, "bind_transceiver system_id=switchbd password=pw123456 system_type=SB")

	long := strings.Repeat("0123456789", 20) // 200 characters: two parts
	longSeptets, err := gsm7.Encode(long)
	if err != nil {
		t.Fatal(err)
	}
	bin := []byte{0x0B, 0x05, 0x04, 0x0B, 0x84, 0x23, 0xF0}
	cases := []struct {
		id    string
		sub   map[string]any
		lines []string
		stats []string
	}{
		{"i-gsm", map[string]any{"message_body": "Hi @£€"},
			[]string{"esm_class=0 registered_delivery=1 data_coding=0 sm=48692000011b65"}, []string{"DELIVRD"}},
		{"i-ucs2", map[string]any{"message_body": "Привет 😀", "data_coding": "ucs2"},
			[]string{"esm_class=0 registered_delivery=1 data_coding=8 sm=041f044004380432043504420020d83dde00"}, []string{"UNDELIV"}},
		{"i-bin", map[string]any{"message_body_base64": "CwUEC4Qj8A==", "data_coding": "binary"},
			[]string{"esm_class=0 registered_delivery=1 data_coding=4 sm=" + hex.EncodeToString(bin)}, []string{"DELIVRD"}},
		{"i-long", map[string]any{"message_body": long},
			[]string{"esm_class=64 registered_delivery=1 data_coding=0 sm=050003REF0201" + hex.EncodeToString(longSeptets[:153]),
				"esm_class=64 registered_delivery=1 data_coding=0 sm=050003REF0202" + hex.EncodeToString(longSeptets[153:])},
			[]string{"DELIVRD", "DELIVRD"}},
	}
	n := 0
	for _, c := range cases {
		c.sub["id"], c.sub["source_msisdn"], c.sub["destination_msisdn"] = c.id, "Switchboard", "+33612345678"
		h.must(202, "POST", "/api/messages", c.sub, nil)
		var ids []string
		ref := "" // a long text's parts share the reference its first part has (REF)
		for _, line := range c.lines {
			n++
			ids = append(ids, fmt.Sprintf("p-%d", n))
			want := "submit_sm source=5/0/Switchboard dest=1/1/33612345678 " + line
			if strings.Contains(want, "REF") && ref == "" {
				re := regexp.MustCompile("^" + strings.Replace(regexp.QuoteMeta(want), "REF", "([0-9a-f]{2})", 1) + "$")
				ref = smpptest.ExpectMatch(t, sc, re)[1]
				continue
			}
			smpptest.Expect(t, sc, strings.ReplaceAll(want, "REF", ref))
		}
		for _, id := range ids {
			smpptest.Expect(t, sc, "deliver_sm_resp id="+id+" status=0")
		}
		m := h.waitState(c.id, messages.StateDelivered)
		polltest.Eventually(t, 20*time.Second, func() error {
			m = h.message(c.id)
			if len(m.SMSC) != len(ids) {
				return fmt.Errorf("%s: smsc %v, want ids %v", c.id, m.SMSC, ids)
			}
			for i, r := range m.SMSC {
				if r.MessageID != ids[i] || r.Receipt != c.stats[i] ||
					!historyHas(m, fmt.Sprintf("dlr: %s err:000 (SMSC message id %s)", c.stats[i], ids[i])) {
					return fmt.Errorf("%s: smsc %v, history %+v", c.id, m.SMSC, m.History)
				}
			}
			return nil
		})
	}
	smpptest.Expect(t, sc, "deliver_sm_resp id=p-999 status=0")
	polltest.Eventually(t, 20*time.Second, func() error {
		text := scrape(t, h)
		if !strings.Contains(text, `switchboard_smpp_frontend_receipts_total{frontend="perl",result="unknown"} 1`) ||
			!strings.Contains(text, `switchboard_smpp_frontend_receipts_total{frontend="perl",result="recorded"} 5`) {
			return fmt.Errorf("receipt counts (the unknown one counted after its wait):\n%s", grepLines(text, "switchboard_smpp_frontend_receipts_total"))
		}
		return nil
	})
	h.stop()
	smpptest.Expect(t, sc, "unbind")
	wait()
}

// grepLines are the lines of text that hold s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
