package smppout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

func opts(t *testing.T, u string) messages.SMPPOptions {
	t.Helper()
	o, err := messages.ParseSMPPURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// noRef is a reference counter that a message sent whole must not take
// from.
func noRef(t *testing.T) func() byte {
	return func() byte {
		t.Helper()
		t.Error("a reference taken for a message that goes whole")
		return 0
	}
}

func TestSubmits(t *testing.T) {
	o := opts(t, "smpp://me@h:1")
	until := time.Date(2026, 12, 2, 13, 4, 5, 0, time.FixedZone("X", 3600))
	out := func(body string, c messages.DataCoding, bin []byte) messages.Outgoing {
		return messages.Outgoing{ID: "m-1", SourceMSISDN: "+33600000001", DestinationMSISDN: "+447700900123", Body: body,
			Options: messages.Options{DataCoding: c, Binary: bin}}
	}
	// One SMS of each coding.
	for _, c := range []struct {
		out  messages.Outgoing
		dc   byte
		want string
	}{
		{out("Hi @£€", "", nil), smpp.DCDefault, "48692000011b65"},
		{out("Hi", messages.CodingUCS2, nil), smpp.DCUCS2, "00480069"},
		{out("Привет", "", nil), smpp.DCUCS2, "041f04400438043204350442"},
		{out("", messages.CodingBinary, []byte{0xDE, 0xAD}), smpp.DCBinary, "dead"},
	} {
		sms, err := Submits(c.out, o, noRef(t))
		if err != nil || len(sms) != 1 {
			t.Fatalf("%q: %d submits, %v", c.out.Body, len(sms), err)
		}
		sm := sms[0]
		if sm.DataCoding != c.dc || fmt.Sprintf("%x", sm.ShortMessage) != c.want || sm.ESMClass != 0 ||
			sm.RegisteredDelivery != smpp.RegisteredFinal || sm.Source != (smpp.Address{TON: 1, NPI: 1, Addr: "33600000001"}) ||
			sm.Dest != (smpp.Address{TON: 1, NPI: 1, Addr: "447700900123"}) {
			t.Errorf("%q: %+v", c.out.Body, sm)
		}
	}
	// A long text: parts behind a header with the reference it was given.
	long := out(strings.Repeat("a", 200), "", nil)
	long.ValidityUntil = &until
	sms, err := Submits(long, o, func() byte { return 0xA7 })
	if err != nil || len(sms) != 2 {
		t.Fatalf("long: %d, %v", len(sms), err)
	}
	ref := byte(0xA7)
	for i, sm := range sms {
		p, ok, err := smpp.PartOf(sm)
		if err != nil || !ok || p.Ref != uint16(ref) || p.Total != 2 || int(p.Seq) != i+1 || sm.ESMClass != smpp.ESMClassUDHI ||
			sm.ValidityPeriod != "261202120405000+" {
			t.Errorf("part %d: %+v %v %v", i+1, sm, ok, err)
		}
	}
	// long=payload: one submit with message_payload; an alphanumeric
	// source; receipts off; TON/NPI overridden.
	o2 := opts(t, "smpp://me@h:1?long=payload&receipts=false&dest_ton=0&dest_npi=9")
	long.SourceMSISDN = "Switchboard"
	sms, err = Submits(long, o2, noRef(t))
	if err != nil || len(sms) != 1 {
		t.Fatalf("payload: %d, %v", len(sms), err)
	}
	if v, _ := sms[0].TLVs.Get(smpp.TagMessagePayload); len(v) != 200 || len(sms[0].ShortMessage) != 0 ||
		sms[0].RegisteredDelivery != 0 || sms[0].Source != (smpp.Address{TON: 5, Addr: "Switchboard"}) ||
		sms[0].Dest != (smpp.Address{TON: 0, NPI: 9, Addr: "447700900123"}) {
		t.Errorf("payload: %+v", sms[0])
	}
	// What can never be sent.
	for _, bad := range []messages.Outgoing{
		out("emoji 😀", messages.CodingGSM7, nil),
		out("", messages.CodingBinary, nil),
		{ID: "x", SourceMSISDN: "a very long sender name", DestinationMSISDN: "1", Body: "x"},
		{ID: "x", SourceMSISDN: "Café", DestinationMSISDN: "1", Body: "x"},
	} {
		if _, err := Submits(bad, o, func() byte { return 0 }); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestSubmitsCarryTheMessageClass: a message's class is in the data_coding
// of every submit_sm it becomes (each part of a long text, a whole text in
// message_payload), by its coding: GSM 7-bit 0xF0|class, UCS-2
// 0x18|class, binary 0xF4|class; its content is encoded as without one.
func TestSubmitsCarryTheMessageClass(t *testing.T) {
	for _, c := range []struct {
		url   string
		out   messages.Outgoing
		dc    byte
		parts int
	}{
		{"smpp://me@h:1", messages.Outgoing{Body: strings.Repeat("a", 200), Options: messages.Options{MessageClass: messages.Class(0)}}, 0xF0, 2},
		{"smpp://me@h:1?long=payload", messages.Outgoing{Body: strings.Repeat("a", 200), Options: messages.Options{MessageClass: messages.Class(0)}}, 0xF0, 1},
		{"smpp://me@h:1", messages.Outgoing{Body: strings.Repeat("☎", 80), Options: messages.Options{MessageClass: messages.Class(1)}}, 0x19, 2},
		{"smpp://me@h:1", messages.Outgoing{Body: "Hi", Options: messages.Options{DataCoding: messages.CodingUCS2, MessageClass: messages.Class(3)}}, 0x1B, 1},
		{"smpp://me@h:1", messages.Outgoing{Options: messages.Options{DataCoding: messages.CodingBinary, Binary: []byte{1}, MessageClass: messages.Class(2)}}, 0xF6, 1},
	} {
		c.out.ID, c.out.SourceMSISDN, c.out.DestinationMSISDN = "m-1", "15550001", "447700900123"
		sms, err := Submits(c.out, opts(t, c.url), func() byte { return 1 })
		if err != nil || len(sms) != c.parts {
			t.Fatalf("%s class %d: %d submits, %v; want %d", c.url, *c.out.MessageClass, len(sms), err, c.parts)
		}
		plain := c.out
		plain.MessageClass = nil
		without, _ := Submits(plain, opts(t, c.url), func() byte { return 1 })
		for i, sm := range sms {
			if sm.DataCoding != c.dc || string(sm.ShortMessage) != string(without[i].ShortMessage) {
				t.Errorf("%s class %d: part %d data_coding 0x%02X (want 0x%02X), content % X (want % X)",
					c.url, *c.out.MessageClass, i+1, sm.DataCoding, c.dc, sm.ShortMessage, without[i].ShortMessage)
			}
		}
	}
}

// With long=payload a long text goes whole in one message_payload (up to
// 65,535 octets), whatever number of parts it would take: 40,000 GSM
// septets would be 262 parts, more than a concatenation header counts.
// A text that fits one SMS still goes in short_message.
func TestSubmitsPayloadIsNotLimitedByParts(t *testing.T) {
	o := opts(t, "smpp://me@h:1?long=payload")
	out := func(body string) messages.Outgoing {
		return messages.Outgoing{ID: "m-1", SourceMSISDN: "+33600000001", DestinationMSISDN: "+447700900123", Body: body}
	}
	sms, err := Submits(out(strings.Repeat("a", 40000)), o, noRef(t))
	if err != nil || len(sms) != 1 {
		t.Fatalf("40,000 septets: %d submits, %v; want one message_payload", len(sms), err)
	}
	if v, _ := sms[0].TLVs.Get(smpp.TagMessagePayload); len(v) != 40000 || len(sms[0].ShortMessage) != 0 || sms[0].ESMClass != 0 {
		t.Errorf("40,000 septets: payload of %d octets, short_message of %d, esm_class 0x%02X", len(v), len(sms[0].ShortMessage), sms[0].ESMClass)
	}
	sms, err = Submits(out(strings.Repeat("a", 160)), o, noRef(t))
	if err != nil || len(sms) != 1 || len(sms[0].ShortMessage) != 160 || len(sms[0].TLVs) != 0 {
		t.Fatalf("160 septets: %+v, %v; want one short_message", sms, err)
	}
	if _, err := Submits(out(strings.Repeat("a", 0x10000)), o, noRef(t)); err == nil {
		t.Error("65,536 octets went in one message_payload")
	}
}

// docs/smpp.md: with long=udh the longest text is 255 parts of 153 GSM
// septets or 67 UCS-2 units (255 of 134 octets for a binary body); one
// longer, which the API accepts, fails with the number of its parts.
func TestSubmitsLongestUDHMessage(t *testing.T) {
	o := opts(t, "smpp://me@h:1")
	for _, c := range []struct {
		name string
		out  func(n int) messages.Outgoing
		max  int
	}{
		{"gsm7", func(n int) messages.Outgoing {
			return messages.Outgoing{ID: "m-1", SourceMSISDN: "S", DestinationMSISDN: "4477", Body: strings.Repeat("a", n)}
		}, 255 * 153},
		{"ucs2", func(n int) messages.Outgoing {
			return messages.Outgoing{ID: "m-1", SourceMSISDN: "S", DestinationMSISDN: "4477", Body: strings.Repeat("ж", n)}
		}, 255 * 67},
		{"binary", func(n int) messages.Outgoing {
			return messages.Outgoing{ID: "m-1", SourceMSISDN: "S", DestinationMSISDN: "4477",
				Options: messages.Options{DataCoding: messages.CodingBinary, Binary: make([]byte, n)}}
		}, 255 * 134},
	} {
		longest := c.out(c.max)
		if sms, err := Submits(longest, o, func() byte { return 0 }); err != nil || len(sms) != 255 {
			t.Errorf("%s, %d: %d submits, %v; want 255 parts", c.name, c.max, len(sms), err)
		}
		over := c.out(c.max + 1)
		if err := (messages.Submission{SourceMSISDN: over.SourceMSISDN, DestinationMSISDN: over.DestinationMSISDN,
			Body: over.Body, Options: over.Options}).Validate(); err != nil {
			t.Errorf("%s, %d: the API refuses it: %v", c.name, c.max+1, err)
		}
		if _, err := Submits(over, o, func() byte { return 0 }); err == nil || err.Error() != "256 parts, at most 255" {
			t.Errorf("%s, %d: %v; want 256 parts refused", c.name, c.max+1, err)
		}
	}
}

func TestVerdict(t *testing.T) {
	ok := func(id string) Part {
		return Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp, Body: &smpp.SMResp{MessageID: id}}}
	}
	st := func(s smpp.Status) Part { return Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp, Status: s}} }
	cases := []struct {
		name   string
		parts  []Part
		status messages.DeliveryStatus
		reason string
		ids    string
	}{
		{"accepted", []Part{ok("a")}, messages.Delivered, "", "[a]"},
		{"every part accepted", []Part{ok("a"), ok("b")}, messages.Delivered, "", "[a b]"},
		{"throttled", []Part{st(smpp.StatusThrottled)}, messages.Retry, "ESME_RTHROTTLED (0x00000058)", "[]"},
		{"queue full", []Part{st(smpp.StatusMsgQueueFull)}, messages.Retry, "ESME_RMSGQFUL (0x00000014)", "[]"},
		{"system error", []Part{st(smpp.StatusSystemError)}, messages.Retry, "ESME_RSYSERR (0x00000008)", "[]"},
		{"bad destination", []Part{st(smpp.StatusInvalidDstAddr)}, messages.Failed, "ESME_RINVDSTADR (0x0000000B)", "[]"},
		{"submit failed", []Part{st(smpp.StatusSubmitFailed)}, messages.Failed, "ESME_RSUBMITFAIL (0x00000045)", "[]"},
		{"nacked", []Part{{Resp: smpp.PDU{Command: smpp.GenericNack, Status: smpp.StatusInvalidCmdLen}}}, messages.Failed,
			"generic_nack ESME_RINVCMDLEN (0x00000002)", "[]"},
		{"no response", []Part{{Err: smpp.ErrTimeout}}, messages.Retry, "no submit_sm_resp: smpp: no response in time", "[]"},
		{"a permanent part wins", []Part{ok("a"), st(smpp.StatusThrottled), st(smpp.StatusInvalidDstAddr)}, messages.Failed,
			"part 3 of 3: ESME_RINVDSTADR (0x0000000B)", "[]"},
		{"a part lost", []Part{ok("a"), {Err: errors.New("smpp: session closed")}}, messages.Retry,
			"part 2 of 2: no submit_sm_resp: smpp: session closed", "[]"},
		{"accepted without an id", []Part{ok("")}, messages.Delivered, "", "[]"},
	}
	for _, c := range cases {
		v := Verdict("m", c.parts)
		if v.ID != "m" || v.Status != c.status || v.Reason != c.reason || fmt.Sprint(v.SMSCMessageIDs) != c.ids && !(c.ids == "[]" && v.SMSCMessageIDs == nil) {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

// TestVerdictNotesPartsWithoutAnID: a part accepted without a message id
// (an empty message_id, or no body: it could not be read) leaves the
// message delivered, its note naming the parts whose receipts cannot be
// matched.
func TestVerdictNotesPartsWithoutAnID(t *testing.T) {
	ok := func(id string) Part {
		return Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp, Body: &smpp.SMResp{MessageID: id}}}
	}
	unread := Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp}}
	const tail = ": its receipts cannot be matched to the message (they count as unknown)"
	for _, c := range []struct {
		name  string
		parts []Part
		note  string
	}{
		{"with its id", []Part{ok("a")}, ""},
		{"an empty id", []Part{ok("")}, "the SMSC gave no message id" + tail},
		{"a body not read", []Part{unread}, "the SMSC gave no message id" + tail},
		{"a part of three", []Part{ok("a"), ok(""), ok("c")}, "the SMSC gave no message id for part 2 of 3" + tail},
		{"two parts of three", []Part{unread, ok("b"), ok("")}, "the SMSC gave no message id for parts 1, 3 of 3" + tail},
		{"runs", []Part{unread, ok(""), ok(""), ok("d"), ok(""), ok(""), ok("g"), ok("")}, "the SMSC gave no message id for parts 1 to 3, 5, 6, 8 of 8" + tail},
		{"all of 255", slices.Repeat([]Part{ok("")}, 255), "the SMSC gave no message id for parts 1 to 255 of 255" + tail},
	} {
		if v := Verdict("m", c.parts); v.Status != messages.Delivered || v.Note != c.note {
			t.Errorf("%s: %+v; want delivered, note %q", c.name, v, c.note)
		}
	}
}

// TestVerdictDefersAThrottledText: a message the SMSC throttled and has
// nothing of (every part throttled or not sent) is deferred, not
// attempted; one with a part the SMSC took, may have taken (no response)
// or refused otherwise is an ordinary retry, its attempt used.
func TestVerdictDefersAThrottledText(t *testing.T) {
	ok := Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp, Body: &smpp.SMResp{MessageID: "a"}}}
	st := func(s smpp.Status) Part { return Part{Resp: smpp.PDU{Command: smpp.SubmitSMResp, Status: s}} }
	notSent := Part{NotSent: true, Err: errors.New("not sent: an earlier part was throttled")}
	for _, c := range []struct {
		name     string
		parts    []Part
		reason   string
		deferred bool
	}{
		{"throttled", []Part{st(smpp.StatusThrottled)}, "ESME_RTHROTTLED (0x00000058)", true},
		{"first part throttled, the rest not sent", []Part{st(smpp.StatusThrottled), notSent, notSent},
			"part 1 of 3: ESME_RTHROTTLED (0x00000058)", true},
		{"every part throttled", []Part{st(smpp.StatusThrottled), st(smpp.StatusThrottled)},
			"part 1 of 2: ESME_RTHROTTLED (0x00000058)", true},
		{"a part accepted before", []Part{ok, st(smpp.StatusThrottled), notSent},
			"part 2 of 3: ESME_RTHROTTLED (0x00000058)", false},
		{"a part accepted after", []Part{st(smpp.StatusThrottled), ok}, "part 1 of 2: ESME_RTHROTTLED (0x00000058)", false},
		{"a part without its response", []Part{st(smpp.StatusThrottled), {Err: smpp.ErrTimeout}},
			"part 1 of 2: ESME_RTHROTTLED (0x00000058)", false},
		{"queue full", []Part{st(smpp.StatusMsgQueueFull)}, "ESME_RMSGQFUL (0x00000014)", false},
		{"throttled and queue full", []Part{st(smpp.StatusThrottled), st(smpp.StatusMsgQueueFull)},
			"part 1 of 2: ESME_RTHROTTLED (0x00000058)", false},
	} {
		v := Verdict("m", c.parts)
		if v.Status != messages.Retry || v.Reason != c.reason || v.Deferred != c.deferred {
			t.Errorf("%s: %+v; want a retry (%q), deferred %v", c.name, v, c.reason, c.deferred)
		}
	}
}

func TestPartOf(t *testing.T) {
	undecodable := &smpp.DecodeError{Status: smpp.StatusInvalidCmdLen, Command: smpp.SubmitSMResp, Seq: 2, HeaderRead: true}
	cases := []struct {
		name string
		resp smpp.PDU
		err  error
		want messages.DeliveryStatus
	}{
		{"accepted, its body unreadable", smpp.PDU{Command: smpp.SubmitSMResp, Seq: 2}, undecodable, messages.Delivered},
		{"refused, its body unreadable", smpp.PDU{Command: smpp.SubmitSMResp, Status: smpp.StatusInvalidDstAddr, Seq: 2}, undecodable, messages.Failed},
		{"throttled, its body unreadable", smpp.PDU{Command: smpp.SubmitSMResp, Status: smpp.StatusThrottled, Seq: 2}, undecodable, messages.Retry},
		{"another command's response", smpp.PDU{Command: smpp.DeliverSMResp, Seq: 2}, undecodable, messages.Retry},
		{"no response", smpp.PDU{}, smpp.ErrTimeout, messages.Retry},
	}
	for _, c := range cases {
		if v := Verdict("m", []Part{PartOf(c.resp, c.err)}); v.Status != c.want || len(v.SMSCMessageIDs) != 0 {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	far := t0.Add(time.Hour)
	var l Limiter
	const tenth = 100 * time.Millisecond
	steps := []struct {
		now   time.Time
		rate  float64
		n     int
		dl    time.Time
		want  time.Time
		every time.Duration
		taken bool
	}{
		{t0, 10, 1, far, t0, tenth, true},
		{t0, 10, 1, far, t0.Add(tenth), tenth, true},
		{t0, 10, 3, far, t0.Add(2 * tenth), tenth, true},      // slots 200, 300, 400 ms, each its part's
		{t0, 10, 2, t0.Add(5 * tenth), time.Time{}, 0, false}, // 500 and 600 ms: the last past the deadline
		{t0, 10, 1, t0.Add(5 * tenth), t0.Add(5 * tenth), tenth, true},
		{t0.Add(10 * time.Second), 10, 1, far, t0.Add(10 * time.Second), tenth, true}, // idle time is no credit
		{t0.Add(10 * time.Second), 0, 5, t0, t0.Add(10 * time.Second), 0, true},       // unlimited
	}
	for i, s := range steps {
		at, every, ok := l.Reserve(s.now, s.rate, s.n, s.dl)
		if ok != s.taken || !at.Equal(s.want) || every != s.every {
			t.Fatalf("step %d: Reserve = %v every %v %v, want %v every %v %v", i, at.Sub(t0), every, ok, s.want.Sub(t0), s.every, s.taken)
		}
	}
}

// The pacing within a delivery timeout: the slots come in its first
// half; no more messages under way than the rate sends in it (the window
// at most, one at least); a submit reserved now waits past it while the
// slots reserved reach beyond.
func TestPacingWithinTheTimeout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := SlotDeadline(t0, t0.Add(10*time.Second)); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("SlotDeadline = +%v, want +5s", got.Sub(t0))
	}
	for _, c := range []struct {
		window  int
		rate    float64
		timeout time.Duration
		want    int
	}{
		{10, 0, 2 * time.Second, 10},      // unlimited: the window
		{10, 2, 2 * time.Second, 2},       // 2/s for 1 s
		{10, 100, 10 * time.Second, 10},   // the window
		{10, 0.1, 2 * time.Second, 1},     // one at least
		{10, 2.5, 3 * time.Second, 3},     // 3.75: whole messages
		{1000, 50, 10 * time.Second, 250}, // 50/s for 5 s
	} {
		if got := InFlight(c.window, c.rate, c.timeout); got != c.want {
			t.Errorf("InFlight(%d, %g, %v) = %d, want %d", c.window, c.rate, c.timeout, got, c.want)
		}
	}
	var l Limiter
	if !l.Paced(t0, time.Second).IsZero() {
		t.Fatal("paced with nothing reserved")
	}
	l.Reserve(t0, 2, 3, t0.Add(time.Hour)) // slots at 0, 0.5, 1 s: the next at 1.5 s
	if got := l.Paced(t0, time.Second); !got.Equal(t0.Add(500 * time.Millisecond)) {
		t.Errorf("Paced = +%v, want +500ms (the next slot, at 1.5 s, within 1 s from then)", got.Sub(t0))
	}
	if got := l.Paced(t0.Add(500*time.Millisecond), time.Second); !got.IsZero() {
		t.Errorf("Paced at +500ms = %v, want none", got)
	}
	// Fits: from when n slots reserved then would come within `within`.
	for _, c := range []struct {
		rate   float64
		n      int
		within time.Duration
		from   time.Duration // from t0
		ever   bool
	}{
		{2, 1, time.Second, 500 * time.Millisecond, true},       // the next slot at 1.5 s
		{2, 3, time.Second, 1500 * time.Millisecond, true},      // 1.5, 2, 2.5 s
		{2, 3, 2 * time.Second, 500 * time.Millisecond, true},   // the same, 2 s to go
		{2, 1, 5 * time.Second, -3500 * time.Millisecond, true}, // past: it fits now
		{2, 4, time.Second, 0, false},                           // 1.5 s of slots: never within 1 s
		{0, 40, time.Millisecond, 0, true},                      // unlimited: no time to wait for
	} {
		from, ever := l.Fits(c.rate, c.n, c.within)
		want := t0.Add(c.from)
		if !c.ever || c.rate <= 0 {
			want = time.Time{}
		}
		if ever != c.ever || !from.Equal(want) {
			t.Errorf("Fits(%g, %d, %v) = %v, %v; want %v, %v", c.rate, c.n, c.within, from, ever, want, c.ever)
		}
	}
}

func TestShare(t *testing.T) {
	const max = ^uint64(0)
	cases := []struct {
		ranges []messages.TokenRange
		want   float64
	}{
		{nil, 0},
		{[]messages.TokenRange{{Lo: 0, Hi: max}}, 1},
		{[]messages.TokenRange{{Lo: 0, Hi: max / 2}}, 0.5},
		{[]messages.TokenRange{{Lo: 0, Hi: max / 4}, {Lo: max / 2, Hi: max/2 + max/4}}, 0.5},
	}
	for _, c := range cases {
		if got := Share(c.ranges); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("Share(%v) = %v, want %v", c.ranges, got, c.want)
		}
	}
}

func TestReceiptOf(t *testing.T) {
	text := "id:p-1 sub:001 dlvrd:001 submit date:2612021200 done date:2612021203 stat:DELIVRD err:000 text:Hi"
	cases := []struct {
		name string
		sm   smpp.SM
		want Receipt
		ok   bool
		err  bool
	}{
		{"text only", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte(text)},
			Receipt{ID: "p-1", Stat: "DELIVRD", Err: "000", Dated: true, Took: 3 * time.Minute}, true, false},
		{"TLVs win", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte(text), TLVs: smpp.TLVs{
			{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue("P1")}, {Tag: smpp.TagMessageState, Value: []byte{byte(smpp.StateUndeliverable)}}}},
			Receipt{ID: "P1", Stat: "UNDELIV", Err: "000", Dated: true, Took: 3 * time.Minute}, true, false},
		{"dated within the minute", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte(strings.Replace(text, "2612021203", "2612021200", 1))},
			Receipt{ID: "p-1", Stat: "DELIVRD", Err: "000", Dated: true}, true, false},
		{"TLVs without text", smpp.SM{ESMClass: smpp.ESMClassReceipt, TLVs: smpp.TLVs{
			{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue("Q")}, {Tag: smpp.TagMessageState, Value: []byte{byte(smpp.StateExpired)}}}},
			Receipt{ID: "Q", Stat: "EXPIRED", Err: "000"}, true, false},
		// Texts from SMSCs that send no TLVs (SMPP v3.3 style) and write
		// Appendix B their own way: only id and stat are needed.
		{"text only, without err:", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("id:0123456789 sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 stat:DELIVRD")},
			Receipt{ID: "0123456789", Stat: "DELIVRD", Err: "000", Dated: true, Took: time.Minute}, true, false},
		{"text only, without sub: and dlvrd:", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("id:0123456789 submit date:2612021120 done date:2612021121 stat:UNDELIV err:001 text:hello")},
			Receipt{ID: "0123456789", Stat: "UNDELIV", Err: "001", Dated: true, Took: time.Minute}, true, false},
		{"text only, err: before stat:", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("id:0123456789 sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 err:000 stat:DELIVRD text:")},
			Receipt{ID: "0123456789", Stat: "DELIVRD", Err: "000", Dated: true, Took: time.Minute}, true, false},
		{"text only, 4-digit years", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("id:7 submit date:20261202112000 done date:20261202112200 stat:DELIVRD err:000")},
			Receipt{ID: "7", Stat: "DELIVRD", Err: "000", Dated: true, Took: 2 * time.Minute}, true, false},
		{"text only, a date that cannot be read", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("id:7 submit date:26120 done date:2612021122 stat:DELIVRD err:000")},
			Receipt{ID: "7", Stat: "DELIVRD", Err: "000"}, true, false},
		{"receipted_message_id alone, a text without err:", smpp.SM{ESMClass: smpp.ESMClassReceipt,
			ShortMessage: []byte("id:77 sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 stat:DELIVRD"),
			TLVs:         smpp.TLVs{{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue("4D")}}},
			Receipt{ID: "4D", Stat: "DELIVRD", Err: "000", Dated: true, Took: time.Minute}, true, false},
		{"a mobile-originated message", smpp.SM{ShortMessage: []byte("hello")}, Receipt{}, false, false},
		{"a receipt without its id", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("garbage")}, Receipt{}, true, true},
		// An SMSC's Latin-1 before the text (invalid UTF-8): read, not a
		// panic on the session's reading goroutine.
		{"a text that is not UTF-8", smpp.SM{ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte(strings.Repeat("\xe9", 40) + text)},
			Receipt{ID: "p-1", Stat: "DELIVRD", Err: "000", Dated: true, Took: 3 * time.Minute}, true, false},
	}
	for _, c := range cases {
		r, ok, err := ReceiptOf(&c.sm)
		if ok != c.ok || (err != nil) != c.err || (!c.err && r != c.want) {
			t.Errorf("%s: %+v %v %v", c.name, r, ok, err)
		}
	}
	if d := (Receipt{ID: "p-1", Stat: "DELIVRD", Err: "000"}).Detail(); d != "dlr: DELIVRD err:000 (SMSC message id p-1)" {
		t.Errorf("detail %q", d)
	}
}

func TestResendNote(t *testing.T) {
	retryOf := func(n int) *messages.HistoryEntry {
		return &messages.HistoryEntry{State: messages.StateRetry, Detail: fmt.Sprintf("attempt %d failed: ESME_RTHROTTLED (0x00000058); retry in 1s", n)}
	}
	// deferral is the entry of attempt n's deferral (the delivery
	// policy's), with the note Submit kept.
	deferral := func(n int, note string) *messages.HistoryEntry {
		d := fmt.Sprintf("not attempted (attempt %d given back): smsc busy: ESME_RTHROTTLED (0x00000058); retry in 1s", n)
		if note != "" {
			d += "; " + note
		}
		return &messages.HistoryEntry{State: messages.StateRetry, Detail: d}
	}
	cases := []struct {
		name    string
		attempt int
		state   messages.State
		last    *messages.HistoryEntry
		resent  bool
	}{
		{"first attempt", 1, messages.StatePending, nil, false},
		{"claimed again while pending", 2, messages.StatePending, nil, true},
		{"after the recorded failure of the attempt before", 3, messages.StateRetry, retryOf(2), false},
		{"after an attempt that left no verdict", 4, messages.StateRetry, retryOf(2), true},
		{"history not read", 3, messages.StateRetry, nil, true},
		// A deferral gives its attempt back: the same attempt is claimed
		// again, and was a resend only if the deferred claim was one.
		{"after a deferral of this attempt", 3, messages.StateRetry, deferral(3, ""), false},
		{"after a deferral of a resend", 3, messages.StateRetry, deferral(3, noVerdict(2)), true},
		// A deferral of another attempt: the claim after it, that attempt
		// again, left no verdict.
		{"after a deferral of the attempt before", 3, messages.StateRetry, deferral(2, ""), true},
		{"after a deferral of a resend of lost attempt 1", 3, messages.StateRetry, deferral(2, noVerdict(1)), true},
		{"after a deferral that names no attempt", 3, messages.StateRetry, &messages.HistoryEntry{State: messages.StateRetry,
			Detail: "not attempted: smsc busy: ESME_RTHROTTLED (0x00000058); retry in 1s"}, true},
		// Entries that carry their attempt (HistoryEntry.Attempt,
		// Deferrals) are read by it, whatever their detail says.
		{"after the failure of the attempt before, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "HTTP 503", Attempt: 2}, false},
		{"after the failure of an earlier attempt, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: retryOf(2).Detail, Attempt: 1}, true},
		{"after a deferral of this attempt, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "smsc busy", Attempt: 3, Deferrals: 1}, false},
		{"after a deferral of this attempt folded with others, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "smsc busy", Attempt: 3, Deferrals: 40}, false},
		{"after a deferral of the attempt before, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: deferral(3, "").Detail, Attempt: 2, Deferrals: 1}, true},
		{"after a deferral of a resend, by its fields", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "smsc busy; " + noVerdict(2), Attempt: 3, Deferrals: 1}, true},
		// Whether the deferred claim was a resend is its entry's Resend;
		// one written before that was kept has it in its detail only.
		{"after a deferral of a resend, by its resend mark", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "smsc busy", Attempt: 3, Deferrals: 1, Resend: true}, true},
		{"after a deferral of a resend folded with others, by its resend mark", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: "smsc busy; deferred 3 times", Attempt: 3, Deferrals: 3, Resend: true}, true},
		{"after a deferral of a resend of an older version, by its text", 3, messages.StateRetry,
			&messages.HistoryEntry{State: messages.StateRetry, Detail: deferral(3, noVerdict(2)).Detail}, true},
	}
	for _, c := range cases {
		note := ResendNote(c.attempt, c.state, c.last)
		if (note != "") != c.resent || (c.resent && !strings.HasPrefix(note, fmt.Sprintf("resent: attempt %d left no recorded verdict", c.attempt-1))) {
			t.Errorf("%s: %q", c.name, note)
		}
	}
}

// Throttle: ESME_RTHROTTLED pauses new submits 1 s, doubling on each
// further throttle to 30 s; an ESME_ROK ends the doubling, not the pause
// in force; answers to submits sent before the pause in force began
// (in flight when it was decided) change nothing.
func TestThrottle(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type answer struct {
		now, sent int // ms after t0
		st        smpp.Status
		paused    bool // a pause began
		until     int  // ms after t0 that Until(now) says; -1: zero
	}
	thr, ok := smpp.StatusThrottled, smpp.StatusOK
	cases := []struct {
		name    string
		answers []answer
	}{
		{"none", []answer{{10, 0, ok, false, -1}, {20, 0, smpp.StatusMsgQueueFull, false, -1}}},
		{"first throttle: 1 s", []answer{{10, 0, thr, true, 1010}}},
		{"doubling up to 30 s", []answer{
			{0, 0, thr, true, 1000}, {1100, 1000, thr, true, 3100}, {3200, 3100, thr, true, 7200},
			{7200, 7200, thr, true, 15200}, {15200, 15200, thr, true, 31200}, {31200, 31200, thr, true, 61200},
			{61200, 61200, thr, true, 91200}}},
		{"the window in flight at the first throttle does not double it", []answer{
			{10, 0, thr, true, 1010}, {11, 1, thr, false, 1010}, {12, 2, thr, false, 1010}, {13, 3, ok, false, 1010},
			{1500, 1010, thr, true, 3500}}},
		{"an ESME_ROK ends the doubling, not the pause", []answer{
			{10, 0, thr, true, 1010}, {1100, 1010, thr, true, 3100}, {3200, 3100, ok, false, -1},
			{3300, 3200, thr, true, 4300}}},
		{"an ESME_ROK sent before the pause leaves the doubling", []answer{
			{10, 0, thr, true, 1010}, {20, 5, ok, false, 1010}, {1100, 1010, thr, true, 3100}}},
		{"a pause ends", []answer{{10, 0, thr, true, 1010}, {1010, 5, ok, false, -1}}},
	}
	for _, c := range cases {
		var th Throttle
		for i, a := range c.answers {
			paused := th.Answered(at(a.now), at(a.sent), a.st)
			until := th.Until(at(a.now))
			want := time.Time{}
			if a.until >= 0 {
				want = at(a.until)
			}
			if paused != a.paused || !until.Equal(want) {
				t.Errorf("%s, answer %d (%s at %d ms, sent at %d ms): paused %v until %v, want %v until %v",
					c.name, i+1, a.st, a.now, a.sent, paused, until, a.paused, want)
			}
		}
	}
}
