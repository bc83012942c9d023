package smppout

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// The pure core of the frontend: what a message becomes on the wire
// (Submits), what the SMSC's responses make of it (Verdict), the pace of
// the submits (Limiter, Share, and Throttle after ESME_RTHROTTLED) and
// what a deliver_sm says (ReceiptOf).

// maxAddr is the longest source_addr and destination_addr of submit_sm
// (SMPP v3.4 5.2.8: 21 octets with the NUL).
const maxAddr = 20

// Submits are the submit_sm bodies of one message under the frontend's
// options: its content in its data coding (GSM 7-bit, UCS-2, binary; a
// message without one as GSM 7-bit when its text fits, else UCS-2), one
// submit_sm when it fits an SMS, else parts behind a concatenation header
// or, with long=payload, one submit_sm carrying message_payload. The
// parts' reference is ref's (the frontend's Refs.Next), called once and
// only for a text that goes in parts: each attempt of a long text takes a
// new one. An error is the message's own fault: it can never be sent.
func Submits(out messages.Outgoing, o messages.SMPPOptions, ref func() byte) ([]*smpp.SM, error) {
	content, used, err := smpp.EncodeContent(out.DataCoding, out.Body, out.Binary)
	if err != nil {
		return nil, err
	}
	src, err := address("source_msisdn", out.SourceMSISDN, o.SourceTON, o.SourceNPI)
	if err != nil {
		return nil, err
	}
	dst, err := address("destination_msisdn", out.DestinationMSISDN, o.DestTON, o.DestNPI)
	if err != nil {
		return nil, err
	}
	base := smpp.SM{Source: src, Dest: dst, DataCoding: smpp.DataCodingOf(used, out.MessageClass)}
	if o.Receipts {
		base.RegisteredDelivery = smpp.RegisteredFinal
	}
	if out.ValidityUntil != nil {
		base.ValidityPeriod = AbsoluteTime(*out.ValidityUntil)
	}
	if o.Long == messages.LongPayload && !smpp.FitsOne(used, content) {
		// Whole, in one TLV: no parts, so no limit on their number.
		if len(content) > 0xFFFF {
			return nil, fmt.Errorf("%d octets, more than message_payload carries (65535)", len(content))
		}
		sm := base
		sm.TLVs = smpp.TLVs{{Tag: smpp.TagMessagePayload, Value: content}}
		return []*smpp.SM{&sm}, nil
	}
	var r byte
	if !smpp.FitsOne(used, content) {
		r = ref()
	}
	parts, err := smpp.Split(used, content, r)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 {
		sm := base
		sm.ShortMessage = parts[0]
		return []*smpp.SM{&sm}, nil
	}
	out2 := make([]*smpp.SM, len(parts))
	for i, p := range parts {
		sm := base
		sm.ESMClass |= smpp.ESMClassUDHI
		sm.ShortMessage = p
		out2[i] = &sm
	}
	return out2, nil
}

// address is a number as SMPP carries it: digits (a leading '+' dropped)
// as international E.164 (TON 1, NPI 1), anything else as alphanumeric
// (TON 5, NPI 0); ton and npi, when set (>= 0), win.
func address(field, v string, ton, npi int) (smpp.Address, error) {
	digits := strings.TrimPrefix(v, "+")
	a := smpp.Address{TON: 1, NPI: 1, Addr: digits}
	if digits == "" || strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		a = smpp.Address{TON: 5, NPI: 0, Addr: v}
	}
	for i := 0; i < len(a.Addr); i++ {
		if a.Addr[i] < ' ' || a.Addr[i] > '~' {
			return a, fmt.Errorf("%s %q: SMPP carries printable ASCII addresses only", field, v)
		}
	}
	if len(a.Addr) > maxAddr {
		return a, fmt.Errorf("%s %q: longer than SMPP's %d characters", field, v, maxAddr)
	}
	if ton >= 0 {
		a.TON = byte(ton)
	}
	if npi >= 0 {
		a.NPI = byte(npi)
	}
	return a, nil
}

// AbsoluteTime is t in SMPP's absolute time format (SMPP v3.4 7.1.1:
// YYMMDDhhmmsstnnp, here in UTC).
func AbsoluteTime(t time.Time) string {
	return t.UTC().Format("060102150405") + "000+"
}

// Part is the outcome of one submit_sm: its response, or why there is
// none.
type Part struct {
	Resp smpp.PDU
	Err  error
	// NotSent marks a part never sent (Err says why): an earlier part of
	// its text was throttled, or could not be sent. The SMSC has nothing
	// of it.
	NotSent bool
}

// PartOf is the outcome of a submit_sm from its call's result
// (smpp.Call.Result). A submit_sm_resp (or generic_nack) whose body could
// not be decoded is the SMSC's answer all the same: its header's
// command_status stands (an ESME_ROK is an acceptance, without the
// message id the body was to carry), for sending the message again would
// duplicate what the SMSC took.
func PartOf(resp smpp.PDU, err error) Part {
	var de *smpp.DecodeError
	if errors.As(err, &de) && (resp.Command == smpp.SubmitSMResp || resp.Command == smpp.GenericNack) {
		return Part{Resp: resp}
	}
	return Part{Resp: resp, Err: err}
}

// Verdict is the delivery verdict on a message from its parts' outcomes:
// delivered when the SMSC accepted every part (with the ids it gave
// them; a part accepted without one, an empty message_id or a body that
// could not be read, is named in the verdict's Note: the receipts for it
// cannot be matched to the message); failed when it refused one with a permanent status (the message
// can never go whole); else retry — a temporary status (throttled, queue
// full, system error, ...) or a part without its response (the link broke
// or the response timed out: the SMSC may have accepted it, so the retry
// may send it twice). A message is retried whole. The retry is deferred
// (not attempted: DeliveryResult.Deferred, it uses no attempt) when the
// SMSC throttled the message and has nothing of it: each part throttled
// or not sent. A text with a part the SMSC took (or may have: no
// response) was attempted; its retry uses an attempt, as that part may
// reach the handset and the retry sends it again.
func Verdict(id string, parts []Part) messages.DeliveryResult {
	var ids []string
	var retry string
	var noID []int // the parts accepted without a message id
	// attempted: a part the SMSC took, may have taken (no response), or
	// refused for another reason than being busy.
	throttled, attempted := false, false
	for i, p := range parts {
		what := ""
		if len(parts) > 1 {
			what = fmt.Sprintf("part %d of %d: ", i+1, len(parts))
		}
		switch st := p.Resp.Status; {
		case p.NotSent:
			if retry == "" {
				retry = what + p.Err.Error()
			}
		case p.Err != nil:
			attempted = true
			if retry == "" {
				retry = what + "no submit_sm_resp: " + p.Err.Error()
			}
		case st != smpp.StatusOK && !st.Temporary():
			return messages.DeliveryResult{ID: id, Status: messages.Failed, Reason: what + statusText(p.Resp)}
		case st != smpp.StatusOK:
			if st == smpp.StatusThrottled {
				throttled = true
			} else {
				attempted = true
			}
			if retry == "" {
				retry = what + statusText(p.Resp)
			}
		default:
			attempted = true
			if r, ok := p.Resp.Body.(*smpp.SMResp); ok && r.MessageID != "" {
				ids = append(ids, r.MessageID)
			} else {
				noID = append(noID, i+1)
			}
		}
	}
	if retry != "" {
		return messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: retry, Deferred: throttled && !attempted}
	}
	return messages.DeliveryResult{ID: id, Status: messages.Delivered, SMSCMessageIDs: ids, Note: noIDNote(noID, len(parts))}
}

// noIDNote is the history note of a message delivered with parts (their
// numbers, of n, ascending) that the SMSC accepted without a message id
// ("" for none). Runs of parts are written as ranges, so that the note of
// a long text stays short beside the resend mark after it (a history
// detail keeps persistence.MaxTextBytes).
func noIDNote(parts []int, n int) string {
	if len(parts) == 0 {
		return ""
	}
	which := ""
	switch {
	case n == 1:
	case len(parts) == 1:
		which = fmt.Sprintf(" for part %d of %d", parts[0], n)
	default:
		which = fmt.Sprintf(" for parts %s of %d", partRuns(parts), n)
	}
	return "the SMSC gave no message id" + which + ": its receipts cannot be matched to the message (they count as unknown)"
}

// statusText names a refusal: "ESME_RINVDSTADR (0x0000000B)", and
// "generic_nack" before it when the SMSC could not read the submit_sm.
func statusText(p smpp.PDU) string {
	s := fmt.Sprintf("%s (0x%08X)", p.Status, uint32(p.Status))
	if p.Command == smpp.GenericNack {
		s = "generic_nack " + s
	}
	return s
}

// Limiter paces submits to a rate: each submit_sm takes the next slot,
// 1/rate apart (no burst beyond one). It is pure: the caller passes the
// time.
type Limiter struct {
	next time.Time
}

// Reserve takes n slots at rate (per second; 0 or less: unlimited): the
// i-th submit (from 0) goes at at + i*every, each at its own slot (the
// parts of a long text too: no burst). When the last slot would come
// after deadline, nothing is taken and ok is false.
func (l *Limiter) Reserve(now time.Time, rate float64, n int, deadline time.Time) (at time.Time, every time.Duration, ok bool) {
	if rate <= 0 || n <= 0 {
		return now, 0, true
	}
	every = time.Duration(float64(time.Second) / rate)
	at = l.next
	if at.Before(now) {
		at = now
	}
	last := at.Add(time.Duration(n-1) * every)
	if last.After(deadline) {
		return time.Time{}, 0, false
	}
	l.next = last.Add(every)
	return at, every, true
}

// Fits reports from when a submit of n slots at rate (per second; 0 or
// less: unlimited) reserved then, its deadline within after that, would
// find its slots in time, the slots reserved so far going first: from may
// be in the past (it would now). ever is false when the n slots span more
// than within: they never fit, however free the rate (a long text at a low
// rate, or a short delivery timeout).
func (l *Limiter) Fits(rate float64, n int, within time.Duration) (from time.Time, ever bool) {
	if rate <= 0 || n <= 0 {
		return time.Time{}, true
	}
	span := time.Duration(n-1) * time.Duration(float64(time.Second)/rate)
	if span > within {
		return time.Time{}, false
	}
	return l.next.Add(span - within), true
}

// Paced reports until when a submit reserved at now would find its
// first slot later than within from now (zero: it finds one within).
func (l *Limiter) Paced(now time.Time, within time.Duration) time.Time {
	if until := l.next.Add(-within); until.After(now) {
		return until
	}
	return time.Time{}
}

// ThrottleMin and ThrottleMax bound the pause of a frontend's submits
// after ESME_RTHROTTLED (Throttle): 1 s first, an SMSC's TPS limit counting
// per second; doubling on each further throttle up to 30 s, so that an
// SMSC refusing for long is still tried twice a minute, and a pause stays
// well short of the reconnect backoff's minute.
const (
	ThrottleMin = time.Second
	ThrottleMax = 30 * time.Second
)

// Throttle is a frontend's back-off from an SMSC that answers
// ESME_RTHROTTLED (at its TPS limit): its new submits wait ThrottleMin,
// then twice as long on each further throttle up to ThrottleMax; an
// ESME_ROK ends the doubling (the next throttle waits ThrottleMin again),
// not the pause in force. A response to a submit sent before the pause
// in force began says nothing new (the window's submits in flight at the
// first throttle are answered alike): it neither doubles the pause nor
// ends the doubling. It is pure: the caller passes the times. The zero
// value is ready: no pause.
type Throttle struct {
	pause       time.Duration // the last pause (0: none since an ESME_ROK)
	from, until time.Time     // when it began and ends
}

// Answered takes the SMSC's answer st, at now, to a submit_sm sent at
// sent, and reports whether it began a pause (then Until says its end).
func (t *Throttle) Answered(now, sent time.Time, st smpp.Status) bool {
	stale := !t.from.IsZero() && sent.Before(t.from)
	switch {
	case stale: // in flight when the pause in force was decided
	case st == smpp.StatusThrottled:
		t.pause = min(max(2*t.pause, ThrottleMin), ThrottleMax)
		t.from, t.until = now, now.Add(t.pause)
		return true
	case st == smpp.StatusOK:
		t.pause = 0
	}
	return false
}

// Until is when new submits may go at now: the end of the pause in force,
// or zero when none is.
func (t *Throttle) Until(now time.Time) time.Time {
	if t.until.After(now) {
		return t.until
	}
	return time.Time{}
}

// SlotDeadline is the latest a submit's slots (its last part's) may come
// when its delivery times out at deadline: half-way from now, the other
// half left for the submit_sm_resp (a submit sent at its deadline could
// not be answered in time, and would be a retry that the SMSC may have
// taken).
func SlotDeadline(now, deadline time.Time) time.Time {
	return now.Add(deadline.Sub(now) / 2)
}

// InFlight is how many messages may be under way at once on a frontend
// of window paced at rate (per second, this instance's; 0 or less:
// unlimited) whose delivery timeout is timeout: the window, or fewer when
// the rate sends fewer before their SlotDeadline, but at least one. A
// message claimed beyond that would find no slot in time: a deferred
// retry (no attempt used), not sent.
func InFlight(window int, rate float64, timeout time.Duration) int {
	if rate <= 0 {
		return window
	}
	n := rate * timeout.Seconds() / 2
	if n >= float64(window) {
		return window
	}
	return max(1, int(n))
}

// Share is the part of the ring that ranges cover, in [0, 1]: this
// instance's part of a site's delivery work, and so of each frontend's
// submit rate.
func Share(ranges []messages.TokenRange) float64 {
	var sum float64
	for _, r := range ranges {
		if r.Hi >= r.Lo {
			sum += float64(r.Hi-r.Lo) + 1
		}
	}
	return math.Min(1, sum/math.Exp2(64))
}

// Receipt is what a deliver_sm that is a delivery receipt says.
type Receipt struct {
	// ID is the SMSC's message id it is about.
	ID string
	// Stat is its stat ("DELIVRD", ...), Err its error code.
	Stat, Err string
	// Dated is whether the receipt dates the message (its submit date and
	// done date, the done date not before the other); Took is then how long
	// the message took at the SMSC by those dates (whole minutes: 0 within
	// one), else 0.
	Dated bool
	Took  time.Duration
}

// ReceiptOf reads a deliver_sm (or a data_sm made into one: smsc.ShortOf)
// as a delivery receipt: ok is false for one that is not (a
// mobile-originated message). The receipted_message_id and
// message_state TLVs win over the text (SMPP v3.4 Appendix B), which
// gives the rest; a receipt that names no id or no state is an error.
func ReceiptOf(sm *smpp.SM) (r Receipt, ok bool, err error) {
	tlvID, hasID := sm.TLVs.CString(smpp.TagReceiptedMessageID)
	if sm.ESMClass&smpp.ESMClassTypeMask != smpp.ESMClassReceipt && !hasID {
		return Receipt{}, false, nil
	}
	text, textErr := smpp.ParseReceipt(string(sm.Payload()))
	if textErr == nil {
		r = Receipt{ID: text.ID, Stat: text.Stat, Err: text.Err}
		if !text.SubmitDate.IsZero() && !text.DoneDate.IsZero() && !text.DoneDate.Before(text.SubmitDate) {
			r.Dated, r.Took = true, text.DoneDate.Sub(text.SubmitDate)
		}
	}
	if hasID {
		r.ID = tlvID
	}
	if st, ok := sm.TLVs.Uint(smpp.TagMessageState); ok {
		r.Stat = smpp.MessageState(st).Stat()
	}
	if r.ID == "" || r.Stat == "" {
		if textErr == nil {
			textErr = fmt.Errorf("no id or no state")
		}
		return r, true, fmt.Errorf("a receipt without its id or state: %w", textErr)
	}
	if r.Err == "" {
		r.Err = "000"
	}
	return r, true, nil
}

// Detail is the history detail of a receipt.
func (r Receipt) Detail() string {
	return fmt.Sprintf("dlr: %s err:%s (SMSC message id %s)", r.Stat, r.Err, r.ID)
}

// partRuns writes part numbers (ascending) as their runs: "1 to 3, 5".
func partRuns(parts []int) string {
	var b strings.Builder
	for i := 0; i < len(parts); {
		j := i
		for j+1 < len(parts) && parts[j+1] == parts[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		switch {
		case j == i:
			fmt.Fprint(&b, parts[i])
		case j == i+1:
			fmt.Fprintf(&b, "%d, %d", parts[i], parts[j])
		default:
			fmt.Fprintf(&b, "%d to %d", parts[i], parts[j])
		}
		i = j + 1
	}
	return b.String()
}
