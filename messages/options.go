package messages

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/gsm7"
)

// DataCoding is how a message centre encodes a message's body for the air
// interface (SMPP data_coding). Empty means unspecified: text that the
// frontend encodes as it sees fit.
type DataCoding string

// Data codings (docs/api.md, "Data coding").
const (
	// CodingGSM7 is the GSM 03.38 default alphabet (SMPP data_coding 0x00,
	// "SMSC default alphabet"): the text must hold only characters of the
	// alphabet and its extension table.
	CodingGSM7 DataCoding = "gsm7"
	// CodingUCS2 is UCS-2 (SMPP data_coding 0x08): any text.
	CodingUCS2 DataCoding = "ucs2"
	// CodingBinary is 8-bit binary (SMPP data_coding 0x04): the body is
	// bytes (message_body_base64), not text, sent without a user data
	// header of its own (esm_class 0; over 140 octets in parts, each
	// behind a concatenation header only), so not a WAP push or SIM OTA
	// message, which needs one.
	CodingBinary DataCoding = "binary"
)

// AllCodings lists the data codings in a fixed order.
var AllCodings = []DataCoding{CodingGSM7, CodingUCS2, CodingBinary}

// Valid reports whether c is a data coding ("" is, meaning unspecified).
func (c DataCoding) Valid() bool {
	return c == "" || c == CodingGSM7 || c == CodingUCS2 || c == CodingBinary
}

// Options are a message's optional fields: what a message centre carries
// besides text (a data coding, a binary body) and its per-message times (a
// validity shorter than the node's, a scheduled delivery). They are
// embedded in every document that carries a message (submission, stored
// message, forward, frontend delivery), so they travel unchanged from the
// client to the frontend, across federation too.
type Options struct {
	DataCoding DataCoding `json:"data_coding,omitempty"`
	// Binary is the body of a binary message (data_coding binary), in JSON
	// standard base64 with padding.
	Binary []byte `json:"message_body_base64,omitempty"`
	// ValidityUntil: undelivered at this time, the message ends failed
	// (reason expired). It can only shorten the node's --message-validity.
	ValidityUntil *time.Time `json:"validity_until,omitempty"`
	// DeliverAfter: the first delivery attempt is not made before it
	// (scheduled delivery).
	DeliverAfter *time.Time `json:"deliver_after,omitempty"`
	// MessageClass is the SMS message class (GSM 03.38), 0 to 3; nil is
	// none. Class 0 is a "flash SMS": the handset shows it at once and
	// does not store it. It goes only to peers announcing CapMessageClass.
	MessageClass *int `json:"message_class,omitempty"`
}

// MaxMessageClass is the highest SMS message class (GSM 03.38: 0 flash,
// 1 mobile equipment, 2 SIM, 3 terminal equipment).
const MaxMessageClass = 3

// Class returns a pointer to message class c, for Options.MessageClass.
func Class(c int) *int { return &c }

// Used reports whether any optional field is set: a message that uses them
// goes only to peers announcing CapMessageFields.
func (o Options) Used() bool {
	return o.DataCoding != "" || o.Binary != nil || o.ValidityUntil != nil || o.DeliverAfter != nil || o.MessageClass != nil
}

// Needs are the capabilities (CapMessageClass, ...) that every instance of
// a site must announce to its ring before it accepts a message with o: an
// instance that lacks one reads the store without the field and, claiming
// the message, would deliver it otherwise than asked. A field gated so is
// one line here.
func (o Options) Needs() []string {
	var caps []string
	if o.MessageClass != nil {
		caps = append(caps, CapMessageClass)
	}
	return caps
}

// validateClass checks the message class: absent, or 0 to MaxMessageClass.
func (o Options) validateClass() error {
	if c := o.MessageClass; c != nil && (*c < 0 || *c > MaxMessageClass) {
		return Errorf(CodeInvalidRequest, "message_class %d: must be 0, 1, 2 or 3 (or absent)", *c)
	}
	return nil
}

// GSM7Offending returns the first character of s outside the GSM 7-bit
// alphabet (with its extension table) and its byte offset, or ok true
// when there is none.
func GSM7Offending(s string) (r rune, at int, ok bool) { return gsm7.Offending(s) }

// TextError reports why s cannot be text of field: invalid UTF-8, or a
// control character other than line feed, carriage return and form feed
// (the controls an SMS alphabet carries). A JSON decoder replaces invalid
// UTF-8 with U+FFFD, so an HTTP body is checked before decoding too; this
// check is for what reaches a node by other ways (the embedding API).
func TextError(field, s string) error {
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalidRequest, "%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\f' {
			return Errorf(CodeInvalidRequest, "%s holds the control character %U at byte %d (only line feed, carriage return and form feed are allowed)", field, r, i)
		}
	}
	return nil
}

// validateBody checks a message's body and data coding: exactly one of the
// text (message_body) and the bytes (message_body_base64), the bytes for
// data_coding binary only, text within the coding's alphabet.
func (o Options) validateBody(text string) error {
	switch {
	case !o.DataCoding.Valid():
		return Errorf(CodeInvalidRequest, "data_coding %q: must be gsm7, ucs2 or binary (or absent)", o.DataCoding)
	case text != "" && o.Binary != nil:
		return Errorf(CodeInvalidRequest, "give message_body (text) or message_body_base64 (binary), not both")
	case o.DataCoding == CodingBinary && o.Binary == nil:
		return Errorf(CodeInvalidRequest, "data_coding binary needs message_body_base64 (the bytes, base64)")
	case o.Binary != nil && o.DataCoding != CodingBinary:
		return Errorf(CodeInvalidRequest, "message_body_base64 is for data_coding binary; send text as message_body")
	case o.Binary != nil && len(o.Binary) == 0:
		return Errorf(CodeInvalidRequest, "message_body_base64 is empty")
	case o.Binary != nil && len(o.Binary) > MaxBodyLen:
		return Errorf(CodeInvalidRequest, "message_body_base64 holds more than %d bytes", MaxBodyLen)
	case o.Binary != nil:
		return nil
	case text == "":
		return Errorf(CodeInvalidRequest, "message_body is required")
	case len(text) > MaxBodyLen:
		return Errorf(CodeInvalidRequest, "message_body is longer than %d bytes", MaxBodyLen)
	}
	if err := TextError("message_body", text); err != nil {
		return err
	}
	if o.DataCoding == CodingGSM7 {
		if r, at, ok := GSM7Offending(text); !ok {
			return Errorf(CodeInvalidRequest, "message_body holds %q (%U) at byte %d, which is not in the GSM 7-bit alphabet: use data_coding ucs2", r, r, at)
		}
	}
	return nil
}

// validateTimes checks the times against each other (not against a
// clock: see CheckTimes).
func (o Options) validateTimes() error {
	if o.ValidityUntil != nil && o.DeliverAfter != nil && !o.DeliverAfter.Before(*o.ValidityUntil) {
		return timeError(FieldDeliverAfter, "deliver_after (%s) must be before validity_until (%s)",
			o.DeliverAfter.UTC().Format(time.RFC3339), o.ValidityUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckTimes checks a client's times at acceptance (now) against the
// node's validity: validity_until must be in the future and no later than
// the validity would end anyway (it can only shorten it), deliver_after
// before the message would expire. A forwarded message is not checked
// again: its origin accepted it.
func (o Options) CheckTimes(now time.Time, validity time.Duration) error {
	end := now.Add(validity)
	if v := o.ValidityUntil; v != nil {
		switch {
		case !v.After(now):
			return timeError(FieldValidityUntil, "validity_until %s has passed", v.UTC().Format(time.RFC3339))
		case v.After(end):
			return timeError(FieldValidityUntil, "validity_until %s is later than this node's validity allows (%s, --message-validity %v): it can only shorten it",
				v.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), validity)
		}
		end = *v
	}
	if d := o.DeliverAfter; d != nil && !d.Before(end) {
		return timeError(FieldDeliverAfter, "deliver_after %s is not before the message would expire (%s)",
			d.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	return nil
}

// ExpiresAt is when a message accepted (or resubmitted) at submitted
// expires with validity: the earlier of submitted+validity and
// ValidityUntil.
func (o Options) ExpiresAt(submitted time.Time, validity time.Duration) time.Time {
	end := submitted.Add(validity)
	if o.ValidityUntil != nil && o.ValidityUntil.Before(end) {
		end = *o.ValidityUntil
	}
	return end
}

// ContentDiff names the first field of content (the source, the
// destination, the body, its data coding and message class: what the
// client said, not what routing did with it) in which a and b differ; ""
// when they do not.
func ContentDiff(a, b Message) string {
	switch {
	case a.SourceMSISDN != b.SourceMSISDN:
		return "source_msisdn"
	case a.DestinationMSISDN != b.DestinationMSISDN:
		return "destination_msisdn"
	case a.DataCoding != b.DataCoding:
		return "data_coding"
	case !sameClass(a.MessageClass, b.MessageClass):
		return "message_class"
	case a.Body != b.Body:
		return "message_body"
	case string(a.Binary) != string(b.Binary):
		return "message_body_base64"
	}
	return ""
}

// sameClass reports whether two message classes are the same (both none,
// or the same class).
func sameClass(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// NumberKey is the form in which searches compare numbers: without blanks
// around it and without leading '+' (a '+' in a URL query that was not
// escaped arrives as a space). "+44 7700" is not a number key; "447700" is.
func NumberKey(s string) string {
	return strings.TrimLeft(strings.TrimSpace(s), "+")
}
