package smpp

import (
	"fmt"
	"slices"
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

// receiptTime is the layout of a receipt's dates (minutes; UTC here);
// receiptTimeCentury is the same with a 4-digit year, as some SMSCs
// write it.
const (
	receiptTime        = "0601021504"
	receiptTimeCentury = "200601021504"
)

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

// receiptKeys are the keys of a receipt's text; text: is the last,
// free-form (it holds the start of the message, which may read like a
// key).
var receiptKeys = []string{"id:", "sub:", "dlvrd:", "submit date:", "done date:", "stat:", "err:", "text:"}

// ParseReceipt reads a receipt's text as SMSCs write it, not only as
// Appendix B lays it out: each key is found on its own, in any order and
// without regard to ASCII case, at the start of the text or after a byte
// that is not a letter, a digit or '_' (so "receipted_id:" is not "id:"),
// and its value runs to the next key found. "text:", when there, is last:
// all that follows it is its value, keys or not. Only id and stat are
// required: a key that is missing, or a sub, dlvrd or date that cannot be
// read, leaves its field unset (0, the zero time) rather than losing the
// receipt. Dates are YYMMDDhhmm, with or without seconds, or YYYYMMDDhhmm
// (some SMSCs write the century), also with seconds; 12 digits are read
// as YYMMDDhhmmss when they can be, else as YYYYMMDDhhmm. Any bytes may
// come (an SMSC's Latin-1, binary junk): the text is read as bytes, not
// as UTF-8.
func ParseReceipt(s string) (Receipt, error) {
	lower := asciiLower(s)
	type found struct{ key, at int } // receiptKeys[key] starts at s[at]
	var fs []found
	end := len(s)
	if at := keyAt(lower, "text:", len(s)); at >= 0 {
		end = at
		fs = append(fs, found{len(receiptKeys) - 1, at})
	}
	for i, k := range receiptKeys[:len(receiptKeys)-1] {
		if at := keyAt(lower, k, end); at >= 0 {
			fs = append(fs, found{i, at})
		}
	}
	slices.SortFunc(fs, func(a, b found) int { return a.at - b.at })
	vals := make(map[string]string, len(fs))
	for i, f := range fs {
		k := receiptKeys[f.key]
		stop := len(s)
		if i+1 < len(fs) {
			stop = fs[i+1].at
		}
		vals[k] = strings.TrimSpace(s[f.at+len(k) : stop])
	}
	r := Receipt{ID: vals["id:"], Stat: strings.ToUpper(vals["stat:"]), Err: vals["err:"], Text: vals["text:"]}
	if r.ID == "" || r.Stat == "" {
		return Receipt{}, fmt.Errorf("smpp: receipt %q has no id or no stat", s)
	}
	r.Submitted, _ = strconv.Atoi(vals["sub:"])
	r.Delivered, _ = strconv.Atoi(vals["dlvrd:"])
	r.SubmitDate = receiptDate(vals["submit date:"])
	r.DoneDate = receiptDate(vals["done date:"])
	return r, nil
}

// keyAt is where key first starts in lower (an asciiLower'd text) before
// end at a key's boundary: the start, or after a byte that is not an ASCII
// letter, digit or '_'; -1 when it is not there. A key ends before end,
// as its value is what follows it.
func keyAt(lower, key string, end int) int {
	for from := 0; from+len(key) <= end; {
		i := strings.Index(lower[from:end], key)
		if i < 0 {
			return -1
		}
		at := from + i
		if at == 0 || !isWordByte(lower[at-1]) {
			return at
		}
		from = at + 1
	}
	return -1
}

// isWordByte reports whether c is an ASCII letter (lower case: the text
// is lowered), digit or '_'.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
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

// receiptDate reads a receipt's date (see ParseReceipt); the zero time
// when s is none of its forms.
func receiptDate(s string) time.Time {
	var layouts []string
	switch len(s) {
	case 10:
		layouts = []string{receiptTime}
	case 12:
		layouts = []string{receiptTime + "05", receiptTimeCentury}
	case 14:
		layouts = []string{receiptTimeCentury + "05"}
	}
	for _, l := range layouts {
		if t, err := time.Parse(l, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
