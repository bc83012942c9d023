package smsc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Short is what a submit_sm or a data_sm carries that the node reads,
// whichever of the two it came in.
type Short struct {
	Source, Dest       string
	ESMClass           byte
	RegisteredDelivery byte
	DataCoding         byte
	// Subunit is the dest_addr_subunit TLV (0 when absent): a message
	// class asked for beside data_coding (class).
	Subunit            byte
	Schedule, Validity string // SMPP times (submit_sm only)
	// SM is the submit_sm (or a data_sm made into one) whose
	// concatenation PartOf reads.
	SM *smpp.SM
}

// ShortOf reads a submit_sm's or a data_sm's body.
func ShortOf(p smpp.PDU) (Short, bool) {
	switch b := p.Body.(type) {
	case *smpp.SM:
		return Short{Source: b.Source.Addr, Dest: b.Dest.Addr, ESMClass: b.ESMClass, RegisteredDelivery: b.RegisteredDelivery,
			DataCoding: b.DataCoding, Subunit: subunitOf(b.TLVs), Schedule: b.ScheduleDeliveryTime, Validity: b.ValidityPeriod, SM: b}, true
	case *smpp.DataSMBody:
		sm := &smpp.SM{Source: b.Source, Dest: b.Dest, ESMClass: b.ESMClass, RegisteredDelivery: b.RegisteredDelivery,
			DataCoding: b.DataCoding, TLVs: b.TLVs}
		return Short{Source: b.Source.Addr, Dest: b.Dest.Addr, ESMClass: b.ESMClass, RegisteredDelivery: b.RegisteredDelivery,
			DataCoding: b.DataCoding, Subunit: subunitOf(b.TLVs), SM: sm}, true
	}
	return Short{}, false
}

// subunitOf is the dest_addr_subunit of ts, 0 when it has none (its
// length, one octet, is checked as the PDU is read).
func subunitOf(ts smpp.TLVs) byte {
	v, _ := ts.Uint(smpp.TagDestAddrSubunit)
	return byte(v)
}

// Refusal is a submit the node answers with a command_status other than
// ESME_ROK, and why.
type Refusal struct {
	Status smpp.Status
	Why    string
	// Malformed is a refusal of what the submit carries (a bad value, as
	// the API's 400), not of the node's state or of where it goes: such a
	// submit uses none of its account's submit rate.
	Malformed bool
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s: %s", r.Status, r.Why) }

func refuse(st smpp.Status, format string, args ...any) *Refusal {
	return &Refusal{Status: st, Why: fmt.Sprintf(format, args...)}
}

// malformed is a refusal of what a submit carries.
func malformed(st smpp.Status, format string, args ...any) *Refusal {
	r := refuse(st, format, args...)
	r.Malformed = true
	return r
}

// Check refuses what the node does not take before any content is read:
// a message type other than a plain one (esm_class bits 2-5), a missing
// source or one the API would refuse (too long, not printable UTF-8, its
// blanks), a destination that is not a number.
func (s Short) Check() *Refusal {
	switch {
	case s.ESMClass&smpp.ESMClassTypeMask != 0:
		return malformed(smpp.StatusInvalidESMClass, "esm_class 0x%02X: only plain messages are submitted (no receipt or acknowledgement types)", s.ESMClass)
	case s.Source == "":
		return malformed(smpp.StatusInvalidSrcAddr, "source_addr is empty")
	case len(s.Source) > messages.MaxSourceLen:
		return malformed(smpp.StatusInvalidSrcAddr, "source_addr is longer than %d characters", messages.MaxSourceLen)
	case !utf8.ValidString(s.Source) || strings.ContainsFunc(s.Source, unicode.IsControl):
		// The node's rule for source_msisdn (Submission.Validate), which
		// refused it as a bad request (ESME_RSUBMITFAIL).
		return malformed(smpp.StatusInvalidSrcAddr, "source_addr %q is not printable UTF-8 text", s.Source)
	case !messages.SearchableSource(s.Source):
		return malformed(smpp.StatusInvalidSrcAddr, "source_addr %q has a blank at either end or after its leading '+'", s.Source)
	}
	if _, ok := messages.RoutingDigits(s.Dest); !ok {
		return malformed(smpp.StatusInvalidDstAddr, "destination_addr %q is not 1-20 digits (with an optional leading '+')", s.Dest)
	}
	return nil
}

// Submission is the submission of a whole message: its content (the
// octets of data_coding dc, a user data header already taken off), read
// as the API's fields. now is the acceptance time the SMPP times count
// from; account, when the ESME asked for a receipt, is who gets it.
func (s Short) Submission(content []byte, dc byte, account string, now time.Time) (messages.Submission, *Refusal) {
	text, bin, coding, err := smpp.DecodeContent(dc, content)
	if err != nil {
		return messages.Submission{}, malformed(smpp.StatusSubmitFailed, "short_message: %v", err)
	}
	if text == "" && bin == nil {
		return messages.Submission{}, malformed(smpp.StatusInvalidMsgLen, "the message is empty")
	}
	class, r := s.class(dc)
	if r != nil {
		return messages.Submission{}, r
	}
	sub := messages.Submission{SourceMSISDN: s.Source, DestinationMSISDN: s.Dest, Body: text,
		Options: messages.Options{DataCoding: coding, Binary: bin, MessageClass: class}}
	if s.Validity != "" {
		t, err := ParseTime(s.Validity, now)
		if err != nil {
			return messages.Submission{}, malformed(smpp.StatusInvalidExpiry, "validity_period: %v", err)
		}
		sub.ValidityUntil = &t
	}
	if s.Schedule != "" {
		t, err := ParseTime(s.Schedule, now)
		if err != nil {
			return messages.Submission{}, malformed(smpp.StatusInvalidSched, "schedule_delivery_time: %v", err)
		}
		sub.DeliverAfter = &t
	}
	switch receiptAsked(s.RegisteredDelivery) {
	case receiptFinal:
		sub.ReceiptTo = account
	case receiptFailure:
		sub.ReceiptTo, sub.ReceiptFailedOnly = account, true
	}
	return sub, nil
}

// The receipts a registered_delivery asks for, weakest first.
const (
	receiptNone    = iota
	receiptFailure // 0x02: a receipt of a failure only
	receiptFinal   // 0x01: a receipt of the final outcome, success or failure
)

// receiptAsked is the receipt registered_delivery rd asks for, by its
// SMSC receipt bits (the intermediate-notification and SME-acknowledgement
// bits are not read): 0x01 the final outcome, 0x02 a failure only, 0x03
// (reserved) read as 0x01, the stronger of the two.
func receiptAsked(rd byte) int {
	switch rd & smpp.RegisteredMask {
	case smpp.RegisteredFinal, smpp.RegisteredMask:
		return receiptFinal
	case smpp.RegisteredFailure:
		return receiptFailure
	}
	return receiptNone
}

// class is the message class the submit asks for: by its data_coding
// (0xF0-0xF7, 0x10-0x1B), by its dest_addr_subunit (1-4), or by both
// when they agree. A reserved subunit, or one that asks for another
// class than the data_coding, is refused (ESME_RINVOPTPARAMVAL) rather
// than one of them dropped: a flash SMS must not arrive as an ordinary
// one, nor the other way round.
func (s Short) class(dc byte) (*int, *Refusal) {
	byCoding := smpp.ClassOf(dc)
	bySubunit, ok := smpp.ClassOfSubunit(s.Subunit)
	switch {
	case !ok:
		return nil, malformed(smpp.StatusInvalidTLVValue, "dest_addr_subunit 0x%02X is reserved (0 to 4 are defined)", s.Subunit)
	case bySubunit == nil:
		return byCoding, nil
	case byCoding != nil && *byCoding != *bySubunit:
		return nil, malformed(smpp.StatusInvalidTLVValue, "dest_addr_subunit 0x%02X asks for message class %d, data_coding 0x%02X for class %d",
			s.Subunit, *bySubunit, dc, *byCoding)
	}
	return bySubunit, nil
}

// refusalOf is the node's refusal of a submission (an error of
// Backend.Submit).
func refusalOf(err error) *Refusal {
	return &Refusal{Status: StatusOf(err), Why: err.Error(), Malformed: messages.Malformed(err)}
}

// StatusOf is the command_status of the node's refusal of a submission
// (an error of Backend.Submit): a full or busy node is a temporary
// refusal, a bad message a permanent one; a validity or schedule the
// node refuses against its clock and --message-validity is
// ESME_RINVEXPIRY or ESME_RINVSCHED, as one the listener cannot read.
func StatusOf(err error) smpp.Status {
	var me *messages.Error
	if !errors.As(err, &me) {
		return smpp.StatusSystemError
	}
	switch {
	case me.Field == messages.FieldValidityUntil:
		// A validity that has passed or is past --message-validity.
		return smpp.StatusInvalidExpiry
	case me.Field == messages.FieldDeliverAfter:
		// A schedule not before the message would expire.
		return smpp.StatusInvalidSched
	}
	switch me.Code {
	case messages.CodeNoRoute, messages.CodeUnknownFrontend:
		return smpp.StatusInvalidDstAddr
	case messages.CodeOverloaded, messages.CodeRateLimited:
		return smpp.StatusThrottled
	case messages.CodeStorageFull:
		return smpp.StatusMsgQueueFull
	case messages.CodeUnavailable, messages.CodeInternal, messages.CodeSiteCapability:
		// site_capability_missing lasts as long as a rolling upgrade:
		// a temporary refusal, which the ESME retries.
		return smpp.StatusSystemError
	}
	return smpp.StatusSubmitFailed
}

// ParseTime reads an SMPP v3.4 time (section 7.1.1): absolute
// "YYMMDDhhmmsstnnp" (tenths t, nn quarter hours from UTC, p '+' or '-')
// or relative "YYMMDDhhmmss000R" from now (years of 365 days, months of
// 30, as SMSCs count them). Every position but the last is a decimal
// digit (strconv.Atoi alone would take a sign: "-0" a minute).
func ParseTime(s string, now time.Time) (time.Time, error) {
	if len(s) != 16 {
		return time.Time{}, fmt.Errorf("%q is not 16 characters", s)
	}
	if i := strings.IndexFunc(s[:15], func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		return time.Time{}, fmt.Errorf("%q: character %d is not a digit", s, i+1)
	}
	var f [7]int
	for i := range 6 {
		v, err := strconv.Atoi(s[2*i : 2*i+2])
		if err != nil || v < 0 {
			return time.Time{}, fmt.Errorf("%q: field %d is not a number", s, i+1)
		}
		f[i] = v
	}
	switch p := s[15]; p {
	case 'R':
		if s[12:15] != "000" {
			return time.Time{}, fmt.Errorf("%q: a relative time's tenths and offset (tnn) are 000", s)
		}
		d := time.Duration(f[0])*365*24*time.Hour + time.Duration(f[1])*30*24*time.Hour + time.Duration(f[2])*24*time.Hour +
			time.Duration(f[3])*time.Hour + time.Duration(f[4])*time.Minute + time.Duration(f[5])*time.Second
		return now.Add(d), nil
	case '+', '-':
		tenths, err1 := strconv.Atoi(s[12:13])
		q, err2 := strconv.Atoi(s[13:15])
		if err1 != nil || err2 != nil || q > 48 {
			return time.Time{}, fmt.Errorf("%q: tenths or offset is not a number (offset at most 48 quarter hours)", s)
		}
		off := time.Duration(q) * 15 * time.Minute
		if p == '-' {
			off = -off
		}
		local := time.Date(2000+f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], tenths*100_000_000, time.UTC)
		if f[1] < 1 || f[1] > 12 || local.Day() != f[2] || f[3] > 23 || f[4] > 59 || f[5] > 59 {
			return time.Time{}, fmt.Errorf("%q is not a date and time", s)
		}
		return local.Add(-off), nil
	}
	return time.Time{}, fmt.Errorf("%q ends in %q, not '+', '-' or 'R'", s, s[15])
}
