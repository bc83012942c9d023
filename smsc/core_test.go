package smsc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

func TestAuthenticate(t *testing.T) {
	pw, h := auth.NewSMPPPassword()
	creds := auth.NewSet([]messages.Credential{
		{Name: "esme1", Role: messages.RoleClient, TokenHash: h, SMPP: true},
		{Name: "shop", Role: messages.RoleClient, TokenHash: auth.Hash("tok-shop-0123456789")},
	}, true)
	for _, c := range []struct {
		id, pw string
		want   smpp.Status
	}{
		{"esme1", pw, smpp.StatusOK},
		{"esme1", pw + "x", smpp.StatusInvalidPassword},
		{"esme1", "", smpp.StatusInvalidPassword},
		{"nobody", pw, smpp.StatusInvalidSystemID},
		{"shop", "tok-shop-0123456789", smpp.StatusInvalidSystemID}, // an API credential is no SMPP account
	} {
		p, st := Authenticate(creds, c.id, c.pw)
		if st != c.want || (st == smpp.StatusOK) != (p.Name == c.id) {
			t.Errorf("Authenticate(%s, %q) = %+v, %s; want %s", c.id, c.pw, p, st, c.want)
		}
	}
	if p, st := Authenticate(auth.NewSet(nil, false), "anyone", "x"); st != smpp.StatusOK || p.Name != "anyone" {
		t.Errorf("an open node: %+v, %s", p, st)
	}
}

// TestStillBound: a session stays bound while its account is the SMPP
// account of the password it bound with, or the node is open; one bound
// to an open node ends once the node has credentials.
func TestStillBound(t *testing.T) {
	_, h := auth.NewSMPPPassword()
	_, other := auth.NewSMPPPassword()
	esme := messages.Credential{Name: "esme1", Role: messages.RoleClient, TokenHash: h, SMPP: true, SubmitRate: 5}
	api := esme
	api.SMPP = false
	for _, c := range []struct {
		name  string
		creds *auth.Set
		hash  string
		want  bool
	}{
		{"the same account", auth.NewSet([]messages.Credential{esme}, true), h, true},
		{"revoked", auth.NewSet(nil, true), h, false},
		{"a new password", auth.NewSet([]messages.Credential{esme}, true), other, false},
		{"no longer an smpp account", auth.NewSet([]messages.Credential{api}, true), h, false},
		{"bound open, now closed", auth.NewSet([]messages.Credential{esme}, true), "", false},
		{"open", auth.NewSet(nil, false), "", true},
	} {
		p, ok := StillBound(c.creds, "esme1", c.hash)
		if ok != c.want || ok && p.Name != "esme1" {
			t.Errorf("%s: %+v, %v; want %v", c.name, p, ok, c.want)
		}
		if ok && !c.creds.Open() && (p.SubmitRate != 5 || !p.SMPP) {
			t.Errorf("%s: %+v, want the account's rate and smpp", c.name, p)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"261201120000000+", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), false},
		{"261201120000504+", time.Date(2026, 12, 1, 11, 0, 0, 500_000_000, time.UTC), false}, // UTC+1h
		{"261201120000008-", time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), false},           // UTC-2h
		{"000001023000000R", now.Add(24*time.Hour + 2*time.Hour + 30*time.Minute), false},
		{"260230120000000+", time.Time{}, true}, // 30 February
		{"261201120000000", time.Time{}, true},
		{"26120112000000Z+", time.Time{}, true},
		{"2612011200000099", time.Time{}, true},
		{"261201120000049+", time.Time{}, true},
	} {
		got, err := ParseTime(c.in, now)
		if (err != nil) != c.bad || (!c.bad && !got.Equal(c.want)) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

// TestParseTimeOnlyDigits: every position of an SMPP time but the last
// is a decimal digit, and a relative time's "tnn" is "000" (SMPP v3.4
// 7.1.1.2). Before, a field was read with strconv.Atoi, which takes a
// sign: "26120112-000000+" (a minute of "-0") was read as 12:00 and
// "+1120112..." as the year 2001; and a relative time's tenths and
// offset were not read at all. Each is refused (ESME_RINVEXPIRY,
// ESME_RINVSCHED), not read as another time.
func TestParseTimeOnlyDigits(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, in := range []string{
		"26120112-000000+", // minute "-0"
		"+11201120000000+", // year "+1"
		"2612011200000+4+", // offset "+4"
		"000001+10000000R", // relative hours "+1"
		"000001000000123R", // relative tenths and offset not 000
		"000001000000004R",
	} {
		if got, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) = %v; want it refused", in, got)
		}
	}
}

func TestShortToSubmission(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ok := Short{Source: "Shop", Dest: "+447700900001", RegisteredDelivery: 1, Validity: "000000010000000R"}
	if r := ok.Check(); r != nil {
		t.Fatal(r)
	}
	sub, r := ok.Submission([]byte{0x48, 0x69, 0x1B, 0x65}, smpp.DCDefault, "esme1", now)
	if r != nil || sub.Body != "Hi€" || sub.DataCoding != messages.CodingGSM7 || sub.ReceiptTo != "esme1" ||
		sub.ValidityUntil == nil || !sub.ValidityUntil.Equal(now.Add(time.Hour)) || sub.MessageClass != nil || sub.Validate() != nil {
		t.Errorf("submission %+v, %v", sub, r)
	}
	// A data_coding with a message class keeps it (0xF1: GSM 7-bit, class
	// 1; 0x18: UCS-2, class 0).
	for dc, want := range map[byte]int{0xF1: 1, 0x18: 0} {
		sub, r := ok.Submission([]byte{0x00, 0x48}, dc, "esme1", now)
		if r != nil || sub.MessageClass == nil || *sub.MessageClass != want || sub.Validate() != nil {
			t.Errorf("data_coding 0x%02X: submission %+v, %v; want message class %d", dc, sub, r, want)
		}
	}
	// dest_addr_subunit asks for a class too (1-4: class 0-3): alone, or
	// with a data_coding of the same class.
	for _, c := range []struct {
		subunit, dc byte
		want        int
	}{{1, smpp.DCDefault, 0}, {4, smpp.DCUCS2, 3}, {2, 0xF1, 1}, {3, 0x1A, 2}} {
		sh := ok
		sh.Subunit = c.subunit
		sub, r := sh.Submission([]byte{0x00, 0x48}, c.dc, "esme1", now)
		if r != nil || sub.MessageClass == nil || *sub.MessageClass != c.want || sub.Validate() != nil {
			t.Errorf("dest_addr_subunit %d, data_coding 0x%02X: submission %+v, %v; want message class %d", c.subunit, c.dc, sub, r, c.want)
		}
	}
	for rd, want := range map[byte][2]any{0: {"", false}, smpp.RegisteredFinal: {"esme1", false}, smpp.RegisteredFailure: {"esme1", true}, 0x13: {"esme1", false}} {
		sub, _ := Short{Source: "1", Dest: "1", RegisteredDelivery: rd}.Submission([]byte("x"), 0, "esme1", now)
		if sub.ReceiptTo != want[0] || sub.ReceiptFailedOnly != want[1] {
			t.Errorf("registered_delivery 0x%02X: receipt to %q, failed only %v", rd, sub.ReceiptTo, sub.ReceiptFailedOnly)
		}
	}
	sub, r = Short{Source: "1", Dest: "1"}.Submission([]byte{0xDE, 0xAD}, smpp.DCBinary, "esme1", now)
	if r != nil || string(sub.Binary) != "\xDE\xAD" || sub.DataCoding != messages.CodingBinary || sub.ReceiptTo != "" {
		t.Errorf("binary %+v, %v", sub, r)
	}
	for _, c := range []struct {
		s       Short
		content []byte
		dc      byte
		want    smpp.Status
	}{
		{Short{Source: "S", Dest: "abc"}, nil, 0, smpp.StatusInvalidDstAddr},
		{Short{Source: "", Dest: "1"}, nil, 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: strings.Repeat("s", 33), Dest: "1"}, nil, 0, smpp.StatusInvalidSrcAddr},
		// Blanks a search of the source would drop: stored, never found.
		{Short{Source: "ACME ", Dest: "1"}, nil, 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: " Bank", Dest: "1"}, nil, 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: "+ 5", Dest: "1"}, nil, 0, smpp.StatusInvalidSrcAddr},
		// What the node refuses in a source_msisdn: not UTF-8, a control
		// character. It was let through to the node, which refused it as a
		// bad request: ESME_RSUBMITFAIL, not the source's status.
		{Short{Source: "\xFF\xFEbank", Dest: "1"}, []byte("x"), 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: "Ba\x01nk", Dest: "1"}, []byte("x"), 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: "Bank\x7F", Dest: "1"}, []byte("x"), 0, smpp.StatusInvalidSrcAddr},
		{Short{Source: "Café", Dest: "1"}, []byte("x"), 0, smpp.StatusOK},
		{Short{Source: "ACME Bank", Dest: "1"}, []byte("x"), 0, smpp.StatusOK},
		{Short{Source: "S", Dest: "1", ESMClass: smpp.ESMClassReceipt}, nil, 0, smpp.StatusInvalidESMClass},
		{Short{Source: "S", Dest: "1"}, []byte("x"), 0x09, smpp.StatusSubmitFailed},
		{Short{Source: "S", Dest: "1"}, []byte("x"), 0xF8, smpp.StatusSubmitFailed}, // a message class with the reserved bit
		{Short{Source: "S", Dest: "1"}, []byte{0x04, 0x1F}, smpp.DCUCS2, smpp.StatusOK},
		{Short{Source: "S", Dest: "1"}, []byte{0xD8, 0x00}, smpp.DCUCS2, smpp.StatusSubmitFailed}, // a lone surrogate
		{Short{Source: "S", Dest: "1"}, nil, 0, smpp.StatusInvalidMsgLen},
		{Short{Source: "S", Dest: "1", Validity: "bad"}, []byte("x"), 0, smpp.StatusInvalidExpiry},
		{Short{Source: "S", Dest: "1", Schedule: "bad"}, []byte("x"), 0, smpp.StatusInvalidSched},
		{Short{Source: "S", Dest: "1", Subunit: 5}, []byte("x"), 0, smpp.StatusInvalidTLVValue},    // reserved
		{Short{Source: "S", Dest: "1", Subunit: 1}, []byte("x"), 0xF1, smpp.StatusInvalidTLVValue}, // class 0 against class 1
		{Short{Source: "S", Dest: "1", Subunit: 0}, []byte("x"), 0xF1, smpp.StatusOK},              // unknown: the data_coding's
	} {
		st := smpp.StatusOK
		if r := c.s.Check(); r != nil {
			st = r.Status
		} else if _, r := c.s.Submission(c.content, c.dc, "a", now); r != nil {
			st = r.Status
		}
		if st != c.want {
			t.Errorf("%+v %x: %s, want %s", c.s, c.content, st, c.want)
		}
	}
	for err, want := range map[error]smpp.Status{
		messages.Errorf(messages.CodeNoRoute, "x"):        smpp.StatusInvalidDstAddr,
		messages.Errorf(messages.CodeOverloaded, "x"):     smpp.StatusThrottled,
		messages.Errorf(messages.CodeStorageFull, "x"):    smpp.StatusMsgQueueFull,
		messages.Errorf(messages.CodeUnavailable, "x"):    smpp.StatusSystemError,
		messages.Errorf(messages.CodeSiteCapability, "x"): smpp.StatusSystemError,
		messages.Errorf(messages.CodeInvalidRequest, "x"): smpp.StatusSubmitFailed,
		errors.New("other"):                               smpp.StatusSystemError,
	} {
		if got := StatusOf(err); got != want {
			t.Errorf("StatusOf(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestReceiptOf(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	m := messages.Message{ID: "01a2367c-689b-7720-9a6a-69d4a7304aba", SourceMSISDN: "PerlTest", DestinationMSISDN: "+33600000001",
		Body: "Prix: 5€ $ {ok} and more", State: messages.StateDelivered, CreatedAt: at, UpdatedAt: at.Add(time.Hour)}
	for _, c := range []struct {
		state  messages.State
		reason string
		want   smpp.MessageState
	}{
		{messages.StateDelivered, "", smpp.StateDelivered},
		{messages.StateFailed, messages.ReasonExpired, smpp.StateExpired},
		{messages.StateFailed, "rejected: HTTP 400", smpp.StateRejected},
		{messages.StateFailed, messages.ReasonPeerRejected, smpp.StateRejected},
		{messages.StateFailed, messages.ReasonMaxAttempts, smpp.StateUndeliverable},
		{messages.StateForwardFailed, messages.ReasonForwardTimeout, smpp.StateUndeliverable},
	} {
		m.State, m.Reason = c.state, c.reason
		p := ReceiptOf(m, at.Add(time.Minute))
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := smpp.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		sm := back.Body.(*smpp.SM)
		r, err := smpp.ParseReceipt(string(sm.ShortMessage))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := sm.TLVs.Uint(smpp.TagMessageState)
		id, _ := sm.TLVs.CString(smpp.TagReceiptedMessageID)
		if r.ID != m.ID || id != m.ID || r.Stat != c.want.Stat() || smpp.MessageState(st) != c.want || sm.ESMClass != smpp.ESMClassReceipt ||
			sm.Source.Addr != "33600000001" || sm.Dest.Addr != "PerlTest" || r.Text != "Prix: 5. . .ok. and" ||
			!r.DoneDate.Equal(at.Add(time.Minute)) || (r.Delivered == 1) != (c.want == smpp.StateDelivered) {
			t.Errorf("%s/%s: receipt %+v (state %d, id %s, from %s to %s)", c.state, c.reason, r, st, id, sm.Source.Addr, sm.Dest.Addr)
		}
	}
}

// The listener's metrics pass client_golang's linter (promtool's rules).
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.binds.WithLabelValues("esme1", "bound_trx").Inc()
	m.bindRefused.WithLabelValues("ESME_RINVPASWD").Inc()
	m.observe(true, smpp.PDU{Command: smpp.SubmitSMResp})
	m.submits.WithLabelValues("esme1").Inc()
	m.submitTime.Observe(0.01)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// The wait a rate adds for a message's next part is its interval, at
// most a minute, whatever the rate (one of 1e-12/s would overflow a
// time.Duration).
func TestPace(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{{0, 0}, {1, time.Second}, {4, 250 * time.Millisecond}, {1.0 / 60, time.Minute}, {0.001, time.Minute}, {1e-12, time.Minute}} {
		if got := pace(c.rate); got != c.want {
			t.Errorf("pace(%g) = %v, want %v", c.rate, got, c.want)
		}
	}
}
