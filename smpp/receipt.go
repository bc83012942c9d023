package smpp

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MessageState is the message_state of a receipt or a query_sm_resp.
type MessageState byte

// The message states of SMPP v3.4 section 5.2.28.
const (
	StateEnroute       MessageState = 1
	StateDelivered     MessageState = 2
	StateExpired       MessageState = 3
	StateDeleted       MessageState = 4
	StateUndeliverable MessageState = 5
	StateAccepted      MessageState = 6
	StateUnknown       MessageState = 7
	StateRejected      MessageState = 8
)

// stats are the receipt text's stat values of the states (Appendix B).
var stats = map[MessageState]string{
	StateEnroute: "ENROUTE", StateDelivered: "DELIVRD", StateExpired: "EXPIRED", StateDeleted: "DELETED",
	StateUndeliverable: "UNDELIV", StateAccepted: "ACCEPTD", StateUnknown: "UNKNOWN", StateRejected: "REJECTD",
}

// Stat is the state's stat value in a receipt's text ("DELIVRD", ...).
func (s MessageState) Stat() string {
	if v, ok := stats[s]; ok {
		return v
	}
	return "UNKNOWN"
}

// Final reports whether the state ends the message's life at the SMSC.
func (s MessageState) Final() bool {
	return s != StateEnroute && s != StateAccepted && s != StateUnknown && stats[s] != ""
}

// StateOfStat is the state of a receipt's stat value.
func StateOfStat(stat string) (MessageState, bool) {
	for st, v := range stats {
		if v == stat {
			return st, true
		}
	}
	return 0, false
}

// Receipt is the text of an SMSC delivery receipt (SMPP v3.4 Appendix B,
// the format most SMSCs send in a deliver_sm's short_message):
//
//	id:IIIIIIIIII sub:SSS dlvrd:DDD submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DDDDDDD err:E text:...
type Receipt struct {
	ID         string
	Submitted  int
	Delivered  int
	SubmitDate time.Time
	DoneDate   time.Time
	Stat       string
	Err        string
	Text       string
}

// receiptTime is the layout of a receipt's dates (minutes; UTC here).
const receiptTime = "0601021504"

// String is the receipt's text.
func (r Receipt) String() string {
	errCode := r.Err
	if errCode == "" {
		errCode = "000"
	}
	return fmt.Sprintf("id:%s sub:%03d dlvrd:%03d submit date:%s done date:%s stat:%s err:%s text:%s",
		r.ID, r.Submitted, r.Delivered, r.SubmitDate.UTC().Format(receiptTime), r.DoneDate.UTC().Format(receiptTime),
		r.Stat, errCode, r.Text)
}

// receiptKeys are the keys of a receipt's text, in order.
var receiptKeys = []string{"id:", "sub:", "dlvrd:", "submit date:", "done date:", "stat:", "err:", "text:"}

// ParseReceipt reads a receipt's text. The keys are matched without
// regard to ASCII case, "text:" and what follows it may be missing, and a
// date of 12 digits (with seconds) is read too; id and stat are required.
// Any bytes may come (an SMSC's Latin-1, binary junk): the text is read
// as bytes, not as UTF-8.
func ParseReceipt(s string) (Receipt, error) {
	lower := asciiLower(s)
	vals := make(map[string]string, len(receiptKeys))
	at := 0
	for i, k := range receiptKeys {
		j := strings.Index(lower[at:], k)
		if j < 0 {
			if k == "text:" {
				break
			}
			return Receipt{}, fmt.Errorf("smpp: receipt %q has no %q", s, k)
		}
		start := at + j + len(k)
		end := len(s)
		if i+1 < len(receiptKeys) && k != "text:" {
			if n := strings.Index(lower[start:], " "+receiptKeys[i+1]); n >= 0 {
				end = start + n
			}
		}
		vals[k] = strings.TrimSpace(s[start:end])
		at = end
	}
	r := Receipt{ID: vals["id:"], Stat: strings.ToUpper(vals["stat:"]), Err: vals["err:"], Text: vals["text:"]}
	if r.ID == "" || r.Stat == "" {
		return Receipt{}, fmt.Errorf("smpp: receipt %q has no id or no stat", s)
	}
	var err error
	if r.Submitted, err = receiptInt(vals["sub:"]); err != nil {
		return Receipt{}, fmt.Errorf("smpp: receipt sub: %w", err)
	}
	if r.Delivered, err = receiptInt(vals["dlvrd:"]); err != nil {
		return Receipt{}, fmt.Errorf("smpp: receipt dlvrd: %w", err)
	}
	if r.SubmitDate, err = receiptDate(vals["submit date:"]); err != nil {
		return Receipt{}, fmt.Errorf("smpp: receipt submit date: %w", err)
	}
	if r.DoneDate, err = receiptDate(vals["done date:"]); err != nil {
		return Receipt{}, fmt.Errorf("smpp: receipt done date: %w", err)
	}
	return r, nil
}

// asciiLower is s with A-Z lowered, byte for byte: its offsets are s's.
// (strings.ToLower is not: it turns each invalid UTF-8 byte into the
// 3-byte U+FFFD and changes the width of some runes, such as U+212A
// KELVIN SIGN, so a key found in it would be cut out of s at the wrong
// offset.)
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func receiptInt(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

func receiptDate(s string) (time.Time, error) {
	switch len(s) {
	case 0:
		return time.Time{}, nil
	case 10:
		return time.Parse(receiptTime, s)
	case 12:
		return time.Parse(receiptTime+"05", s)
	}
	return time.Time{}, fmt.Errorf("%q is not YYMMDDhhmm[ss]", s)
}
