package switchboard_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// smppFrontend registers an smpp frontend named name routed from prefix.
func (h *harness) smppFrontend(name, url, prefix string) {
	h.t.Helper()
	h.must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "smpp", "url": url}, nil)
	h.must(200, "PUT", "/api/routes/"+prefix, map[string]string{"frontend": name}, nil)
}

// historyHas reports whether one of m's history entries holds detail.
func historyHas(m messages.Message, detail string) bool {
	for _, e := range m.History {
		if strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

// The smpp frontend against an SMSC of ours: an accepted submit is
// delivered with the SMSC's message id; a temporary status (queue full) is
// retried with the backoff, using an attempt, a permanent one (bad destination) fails the
// message; receipts land in the history, one for an unknown id is
// counted once it waited for its message (SMPPReceiptWait); while the
// SMSC refuses the bind nothing is attempted (the message waits, its
// attempts untouched) and it goes once bound again.
func TestSMPPFrontendStatusesAndReceipts(t *testing.T) {
	throttled := map[string]bool{}
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
		switch dest := s.SM.Dest.Addr; {
		case strings.HasSuffix(dest, "2") && !throttled[dest]:
			throttled[dest] = true
			return smpp.StatusMsgQueueFull, false
		case strings.HasSuffix(dest, "3"):
			return smpp.StatusInvalidDstAddr, false
		}
		return smpp.StatusOK, false
	})
	cfg := testConfig(t)
	cfg.SMPPReceiptWait = time.Second
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?window=4&system_type=SB", "33")

	var fes struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &fes)
	if len(fes.Frontends) != 1 || fes.Frontends[0].URL != "smpp://sb@"+smsc.Addr+"?window=4&system_type=SB" || !fes.Frontends[0].SecretSet {
		t.Fatalf("frontends %+v: the password must not show", fes.Frontends)
	}
	polltest.Eventually(t, 20*time.Second, func() error {
		h.must(200, "GET", "/api/frontends", nil, &fes)
		if st := fes.Frontends[0].BindState; st != "bound_trx" {
			return fmt.Errorf("bind_state %q", st)
		}
		return nil
	})
	h.apiError(400, "invalid_request", "PUT", "/api/frontends/bad", map[string]string{"mode": "smpp", "url": "smpp://sb:pw@" + smsc.Addr + "?window=0"})

	h.submit("m-ok", "33600000001")
	h.submit("m-busy", "33600000002")
	h.submit("m-bad", "33600000003")
	ok := h.waitState("m-ok", messages.StateDelivered)
	if len(ok.SMSC) != 1 || !strings.HasPrefix(ok.SMSC[0].MessageID, "smsc-") || !historyHas(ok, "SMSC message id "+ok.SMSC[0].MessageID) {
		t.Fatalf("m-ok: %+v %+v", ok.SMSC, ok.History)
	}
	busy := h.waitState("m-busy", messages.StateDelivered)
	if busy.Attempts != 2 || !historyHas(busy, "attempt 1 failed: ESME_RMSGQFUL (0x00000014)") || historyHas(busy, "resent") {
		t.Fatalf("m-busy: %d attempts, %+v", busy.Attempts, busy.History)
	}
	bad := h.waitState("m-bad", messages.StateFailed)
	if bad.Attempts != 1 || bad.Reason != "rejected: ESME_RINVDSTADR (0x0000000B)" {
		t.Fatalf("m-bad: %d attempts, reason %q", bad.Attempts, bad.Reason)
	}
	for _, s := range smsc.Submits() {
		if sm := s.SM; sm.Source != (smpp.Address{TON: 1, NPI: 1, Addr: "15550001"}) || sm.RegisteredDelivery != smpp.RegisteredFinal ||
			sm.DataCoding != smpp.DCDefault || !strings.HasPrefix(string(sm.ShortMessage), "hello m-") {
			t.Errorf("submit %d: %+v", s.N, sm)
		}
	}

	// Receipts: one for m-ok lands in its history; one for an id nobody
	// has is answered and counted.
	if st, err := smsc.Receipt(ok.SMSC[0].MessageID, "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt: %s %v", st, err)
	}
	ok = h.message("m-ok")
	if ok.SMSC[0].Receipt != "DELIVRD" || !historyHas(ok, "dlr: DELIVRD err:000 (SMSC message id "+ok.SMSC[0].MessageID+")") ||
		ok.State != messages.StateDelivered {
		t.Fatalf("after the receipt: %+v %+v", ok.SMSC, ok.History)
	}
	if st, err := smsc.Receipt("nosuch", "UNDELIV"); err != nil || st != smpp.StatusOK {
		t.Fatalf("unknown receipt: %s %v", st, err)
	}
	polltest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(scrape(t, h), `switchboard_smpp_frontend_receipts_total{frontend="smsc",result="unknown"} 1`) {
			return fmt.Errorf("the receipt for no message is not counted unknown yet")
		}
		return nil
	})

	// The SMSC refuses the bind from now on: the link drops, the client
	// rebinds in vain, and a new message waits without an attempt.
	smsc.SetPassword("other")
	smsc.DropAll()
	refusals := func(n int) {
		polltest.Eventually(t, 30*time.Second, func() error {
			if _, refused := smsc.Binds(); refused < n {
				return fmt.Errorf("%d binds refused, want %d", refused, n)
			}
			return nil
		})
	}
	refusals(1)
	h.submit("m-wait", "33600000004")
	refusals(3)
	if m := h.message("m-wait"); m.State != messages.StatePending || m.Attempts != 0 {
		t.Fatalf("m-wait while unbound: %s, %d attempts", m.State, m.Attempts)
	}
	smsc.SetPassword("pw")
	if m := h.waitState("m-wait", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("m-wait: %d attempts", m.Attempts)
	}

	text := scrape(t, h)
	for _, want := range []string{
		`switchboard_smpp_frontend_bind_state{frontend="smsc",state="bound_trx"} 1`,
		`switchboard_smpp_frontend_binds_total{frontend="smsc",result="refused"}`,
		`switchboard_smpp_frontend_submits_total{frontend="smsc",status="ESME_RMSGQFUL"} 1`,
		`switchboard_smpp_frontend_submits_total{frontend="smsc",status="ESME_RINVDSTADR"} 1`,
		`switchboard_smpp_frontend_submits_total{frontend="smsc",status="ESME_ROK"} 3`,
		`switchboard_smpp_frontend_receipts_total{frontend="smsc",result="recorded"} 1`,
		`switchboard_smpp_frontend_receipts_total{frontend="smsc",result="unknown"} 1`,
		`switchboard_smpp_frontend_pdus_total{command="deliver_sm",direction="received",frontend="smsc",status="ESME_ROK"} 2`,
		`switchboard_smpp_frontend_submit_seconds_count{frontend="smsc"} 5`,
		`switchboard_smpp_frontend_window_in_use{frontend="smsc"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	problems, err := testutil.GatherAndLint(h.node.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

// A receipt whose submit date and done date are the same minute (a
// message the SMSC delivered at once: the usual case) is observed in
// switchboard_smpp_frontend_receipt_delay_seconds, as 0: the histogram
// counts every recorded receipt that dates itself, not only the slow ones.
func TestSMPPReceiptDelayCountsSameMinuteReceipts(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	h := startNode(t, testConfig(t))
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")
	h.submit("m-ok", "33600000001")
	ok := h.waitState("m-ok", messages.StateDelivered)
	if st, err := smsc.Receipt(ok.SMSC[0].MessageID, "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt: %s %v", st, err)
	}
	text := scrape(t, h)
	for _, want := range []string{
		`switchboard_smpp_frontend_receipts_total{frontend="smsc",result="recorded"} 1`,
		`switchboard_smpp_frontend_receipt_delay_seconds_count{frontend="smsc"} 1`,
		`switchboard_smpp_frontend_receipt_delay_seconds_sum{frontend="smsc"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(text, "switchboard_smpp_frontend_receipt"))
		}
	}
}

// timerLog is the wall clock that counts the timers armed, by duration.
type timerLog struct {
	clock.Real
	mu    sync.Mutex
	armed map[time.Duration]int
}

func (c *timerLog) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.armed[d]++
	c.mu.Unlock()
	return c.Real.AfterFunc(d, f)
}

func (c *timerLog) count(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed[d]
}

// An smpp frontend waits for a submit_sm_resp as long as
// --webhook-timeout says (docs/smpp.md: no response within it is a
// retry), not the session's own 10 s: the session arms the submit_sm's
// response timer (on the node's clock) with it, and the bind's.
func TestSMPPSubmitRespWaitsForWebhookTimeout(t *testing.T) {
	const timeout = 17 * time.Second
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, true })
	clk := &timerLog{armed: map[time.Duration]int{}}
	cfg := testConfig(t)
	cfg.WebhookTimeout, cfg.Clock = timeout, clk
	h := startNode(t, cfg)
	defer smsc.Release() // before the node's stop, which waits for the submit
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	bound := clk.count(timeout)
	h.submit("m-1", "33600000001")
	polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
	// The session armed the submit_sm's timer before it wrote it.
	if n := clk.count(timeout); bound < 1 || n != bound+1 {
		t.Fatalf("timers of --webhook-timeout (%v): %d by the bind, %d by the submit_sm; of the session's default 10s: %d",
			timeout, bound, n-bound, clk.count(10*time.Second))
	}
	smsc.Release()
	if m := h.waitState("m-1", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("m-1: %d attempts", m.Attempts)
	}
}

// An smpps frontend whose tls_ca file is not there yet is taken (the file
// is read by each instance at each connect, not by the PUT): it does not
// bind, and binds once the file is in place, without a change of the
// frontend or a restart; the message waiting meanwhile then goes.
func TestSMPPFrontendTLSCAIsReadAtEachConnect(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"smsc"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := certs.NodeFiles(dir, "smsc")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := certs.CAFiles(dir)
	smsc := smsctest.NewTLS(t, "pw", nil, &tls.Config{Certificates: []tls.Certificate{pair}})
	h := startNode(t, testConfig(t))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	h.smppFrontend("smsc", "smpps://sb:pw@"+smsc.Addr+"?tls_ca="+ca, "33")
	h.submit("m-1", "33600000001")
	polltest.Eventually(t, 20*time.Second, func() error {
		text := scrape(t, h)
		if !strings.Contains(text, `switchboard_smpp_frontend_binds_total{frontend="smsc",result="error"}`) {
			return fmt.Errorf("no failed bind yet")
		}
		return nil
	})
	if m := h.message("m-1"); m.State != messages.StatePending || m.Attempts != 0 || smsc.Bound() {
		t.Fatalf("without its CA: m-1 %s, %d attempts; bound %v", m.State, m.Attempts, smsc.Bound())
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if m := h.waitState("m-1", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("m-1: %d attempts", m.Attempts)
	}
}

// The node's own pacing uses up no attempt: at rate=2 with a 2 s delivery
// timeout, 20 messages claimed as fast as the window allows would find no
// slot in time (each held back, a deferral, tried again and again). The
// worker has no more under way than the rate sends in time, so each
// message goes once, at its first attempt, never held back.
func TestSMPPRatePacingUsesUpNoAttempt(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	cfg := testConfig(t) // --webhook-timeout 2s
	cfg.DeliveryMaxAttempts = 2
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?rate=2", "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	var ids []string
	for i := range 20 {
		ids = append(ids, h.submit(fmt.Sprintf("m-%02d", i), fmt.Sprintf("336000000%02d", i)))
	}
	var bad []string
	for _, id := range ids {
		m := h.final(id, 60*time.Second)
		if m.State != messages.StateDelivered || m.Attempts != 1 || historyHas(m, "not attempted") {
			bad = append(bad, fmt.Sprintf("%s %s after %d attempts: %s (held back: %v)", id, m.State, m.Attempts, m.LastDetail, historyHas(m, "not attempted")))
		}
	}
	if n := len(smsc.Submits()); len(bad) > 0 || n != 20 {
		t.Fatalf("%d submit_sm for 20 messages (the SMSC refused none); %d messages not delivered at their first attempt:\n%s",
			n, len(bad), strings.Join(bad, "\n"))
	}
}

// The frontend's own rate holding a message back more often than
// --delivery-max-attempts does not fail it max_attempts: each time is a
// deferral (our pacing, not the SMSC's failure: not attempted), and it is
// delivered at its first attempt once its slots come. At rate=1 with a
// 10 s delivery timeout (slots within 5 s), two texts of 5 parts cannot
// be paced together: whichever is second finds no slot in time until the
// first's slots are nearly through (4 s on), and asks to be tried then,
// each wait within --delivery-retry-max (1 s here).
func TestSMPPRatePacingDefersWhatItHolds(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	cfg := testConfig(t)
	cfg.WebhookTimeout, cfg.DeliveryRetryMax, cfg.DeliveryMaxAttempts = 10*time.Second, time.Second, 1
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?rate=1", "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	ids := []string{"m-1", "m-2"}
	for i, id := range ids {
		h.must(202, "POST", "/api/messages", map[string]any{"id": id, "source_msisdn": "+15550001",
			"destination_msisdn": fmt.Sprintf("+3360000000%d", i), "message_body": strings.Repeat("0123456789", 70)}, nil) // 5 parts
	}
	var deferrals int
	var bad []string
	for _, id := range ids {
		m := h.final(id, 60*time.Second)
		if m.State != messages.StateDelivered || m.Attempts != 1 {
			bad = append(bad, fmt.Sprintf("%s %s after %d attempts: %s", id, m.State, m.Attempts, m.LastDetail))
		}
		for _, e := range m.History {
			if strings.HasPrefix(e.Detail, "not attempted (attempt 1 given back): smsc busy: the submit rate (1/s, 100% of it this instance's) leaves no slot in time; retry in ") {
				deferrals += e.Deferrals // one after another, they are one entry
			}
		}
	}
	if len(bad) > 0 || deferrals <= cfg.DeliveryMaxAttempts || len(smsc.Submits()) != 10 {
		t.Fatalf("%d deferrals by the rate, %d submit_sm (want 10: 5 parts each); want each delivered at attempt 1, deferred more than %d times in all:\n%s",
			deferrals, len(smsc.Submits()), cfg.DeliveryMaxAttempts, strings.Join(bad, "\n"))
	}
}

// An SMSC at its TPS limit answers ESME_RTHROTTLED more often than
// --delivery-max-attempts: the message was not attempted (deferred), so
// it is not failed max_attempts; it is delivered once the SMSC takes it,
// at its first attempt, its history saying why it waited. (Each throttle
// pauses the frontend's submits, 1 s then 2 s.)
func TestSMPPThrottlingUsesNoAttempt(t *testing.T) {
	const throttles = 2
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
		if s.N <= throttles {
			return smpp.StatusThrottled, false
		}
		return smpp.StatusOK, false
	})
	cfg := testConfig(t)
	cfg.DeliveryMaxAttempts = throttles - 1
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	id := h.submit("m-1", "33600000001")
	m := h.final(id, 30*time.Second)
	var deferrals, entries int
	for _, e := range m.History {
		if strings.HasPrefix(e.Detail, "not attempted (attempt 1 given back): smsc busy: ESME_RTHROTTLED (0x00000058); retry in ") {
			deferrals += e.Deferrals
			entries++
		}
	}
	if m.State != messages.StateDelivered || m.Attempts != 1 || deferrals != throttles || entries != 1 || len(smsc.Submits()) != throttles+1 {
		t.Fatalf("%s after %d attempts (%s), %d deferrals in %d history entries, %d submit_sm; want delivered at attempt 1 after %d deferrals, one entry",
			m.State, m.Attempts, m.LastDetail, deferrals, entries, len(smsc.Submits()), throttles)
	}
	if text := scrape(t, h); !strings.Contains(text, fmt.Sprintf(`switchboard_delivery_dispositions_total{frontend="smsc",outcome="deferred"} %d`, throttles)) {
		t.Errorf("deferrals not counted outcome=\"deferred\"")
	}
}

// An SMSC may send a message's receipt before its submit_sm_resp (its
// delivery and its responses on separate paths: a fast delivery). The
// receipt names an id the node has not seen yet: it is held, and recorded
// once the message's verdict naming that id is committed.
func TestSMPPReceiptBeforeSubmitResp(t *testing.T) {
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, true })
	h := startNode(t, testConfig(t))
	defer smsc.Release()
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	h.submit("m-fast", "33600000001")
	polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
	if st, err := smsc.Receipt("smsc-1", "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt: %s %v", st, err)
	}
	if n := smsc.Release(); n != 1 {
		t.Fatalf("released %d", n)
	}
	h.waitState("m-fast", messages.StateDelivered)
	polltest.Eventually(t, 20*time.Second, func() error {
		if m := h.message("m-fast"); !historyHas(m, "dlr: DELIVRD err:000 (SMSC message id smsc-1)") || m.SMSC[0].Receipt != "DELIVRD" {
			return fmt.Errorf("the receipt sent before the submit_sm_resp is not recorded: smsc %+v, history %+v", m.SMSC, m.History)
		}
		return nil
	})
}

// The instances of a site bind the same account, and an SMSC hands a
// receipt to any bound session of it: one that reaches the other
// instance's session before the verdict is committed (moments after the
// submit_sm_resp) names an id that instance never saw. It is held there
// and looked up in the store again, and recorded once the verdict is
// committed by the instance that submitted.
func TestSMPPReceiptOnAnotherInstancesSession(t *testing.T) {
	dsn := pgtest.DSN(t)
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, true })
	a1 := startNode(t, siteConfig(t, dsn, "a1"))
	a2 := startNode(t, siteConfig(t, dsn, "a2"))
	defer smsc.Release()
	waitRing(t, []*harness{a1, a2}, "a1", "a2")
	a1.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")
	polltest.Until(t, 20*time.Second, "both instances bound", func() bool { return len(smsc.BoundConns()) == 2 })
	a1.submit("m-1", "33600000001")
	polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
	sub := smsc.Submits()[0]
	other := 0
	for _, c := range smsc.BoundConns() {
		if c != sub.Conn {
			other = c
		}
	}
	// The receipt comes on the other session, before the submit_sm_resp
	// (so before the verdict's commit).
	if st, err := smsc.ReceiptOn(other, "smsc-1", "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt on connection %d: %s %v", other, st, err)
	}
	if n := smsc.Release(); n != 1 {
		t.Fatalf("released %d", n)
	}
	a1.waitState("m-1", messages.StateDelivered)
	polltest.Eventually(t, 20*time.Second, func() error {
		if m := a1.message("m-1"); !historyHas(m, "dlr: DELIVRD err:000 (SMSC message id smsc-1)") {
			return fmt.Errorf("the receipt that reached the other instance is not recorded: smsc %+v, history %+v", m.SMSC, m.History)
		}
		return nil
	})
}

// CONTRACT.md's smpp frontend: its URL
// (smpp://system_id:password@host:port?bind=transceiver&window=10&tps=100&tls=false)
// is taken, tps as the rate; the message document names the SMSC's
// message id as smsc_message_id (the latest: a long text's last part's),
// beside smsc, and the receipt's stat in smsc.
func TestSMPPFrontendContractURLAndSMSCMessageID(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	h := startNode(t, testConfig(t))
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?bind=transceiver&window=10&tps=100&tls=false", "33")
	h.submit("m-1", "33600000001")
	h.must(202, "POST", "/api/messages", map[string]any{"id": "m-long", "source_msisdn": "+15550001", "destination_msisdn": "+33600000002",
		"message_body": strings.Repeat("0123456789", 20)}, nil) // two parts
	for _, c := range []struct{ id, smscID string }{{"m-1", "smsc-1"}, {"m-long", "smsc-3"}} {
		m := h.waitState(c.id, messages.StateDelivered)
		var doc map[string]any
		if code, body := h.do("GET", "/api/messages/"+c.id, nil); code != 200 || json.Unmarshal(body, &doc) != nil {
			t.Fatalf("GET %s: %d %s", c.id, code, body)
		}
		if doc["smsc_message_id"] != c.smscID || m.SMSC[len(m.SMSC)-1].MessageID != c.smscID {
			t.Fatalf("%s: smsc_message_id %v, smsc %v; want %s", c.id, doc["smsc_message_id"], doc["smsc"], c.smscID)
		}
	}
	if st, err := smsc.Receipt("smsc-1", "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt: %s %v", st, err)
	}
	if m := h.message("m-1"); m.SMSC[0].Receipt != "DELIVRD" {
		t.Fatalf("m-1 after its receipt: %+v", m.SMSC)
	}
}
