package smsc

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// StateOf is the message_state and receipt stat a final message is
// reported with: delivered is DELIVRD (a frontend accepted it: see
// docs/smpp.md, "Receipts"), expired EXPIRED, refused by its frontend or a
// peer REJECTD (reason rejected, with or without the frontend's words), any other failure (attempts used up, a peer never
// reached) UNDELIV.
func StateOf(m messages.Message) smpp.MessageState {
	switch {
	case m.State == messages.StateDelivered:
		return smpp.StateDelivered
	case m.Reason == messages.ReasonExpired:
		return smpp.StateExpired
	case strings.HasPrefix(m.Reason, messages.ReasonRejected) || m.Reason == messages.ReasonPeerRejected:
		return smpp.StateRejected
	}
	return smpp.StateUndeliverable
}

// receiptTextLen is how much of the message's text a receipt quotes
// (Appendix B: the first 20 characters).
const receiptTextLen = 20

// maxAddr is the longest address of a deliver_sm (21 octets with the NUL).
const maxAddr = 20

// ReceiptOf is the deliver_sm that reports final message m to the ESME
// that submitted it: from the message's destination to its source,
// esm_class "SMSC delivery receipt", the Appendix B text in
// short_message (ASCII, data_coding 0), the message's id in
// receipted_message_id and its state in message_state. Its submit date
// is the message's acceptance (created_at), its done date done: when the
// message became final, which the receipt's outbox row was made at
// (persistence.Work.CreatedAt). Not updated_at: that moves on after, an
// SMSC's receipt for the message added to its history touches it.
func ReceiptOf(m messages.Message, done time.Time) smpp.PDU {
	st := StateOf(m)
	r := smpp.Receipt{ID: m.ID, Submitted: 1, SubmitDate: m.CreatedAt, DoneDate: done, Stat: st.Stat(), Err: "000",
		Text: asciiPrefix(m.Body, receiptTextLen)}
	if st == smpp.StateDelivered {
		r.Delivered = 1
	}
	text := r.String()
	if len(text) > smpp.MaxShortMessage {
		text = text[:smpp.MaxShortMessage]
	}
	return smpp.PDU{Command: smpp.DeliverSM, Body: &smpp.SM{
		Source:       smpp.Address{TON: 1, NPI: 1, Addr: clip(strings.TrimPrefix(m.DestinationMSISDN, "+"), maxAddr)},
		Dest:         smpp.Address{Addr: clip(m.SourceMSISDN, maxAddr)},
		ESMClass:     smpp.ESMClassReceipt,
		DataCoding:   smpp.DCDefault,
		ShortMessage: []byte(text),
		TLVs: smpp.TLVs{
			{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue(m.ID)},
			{Tag: smpp.TagMessageState, Value: []byte{byte(st)}},
		},
	}}
}

// asciiPrefix is the first n characters of s, each outside printable
// ASCII (or a GSM 7-bit difference: '@', '$', '_', '`' and the brackets)
// replaced by '.', so that the receipt reads the same in IA5 and GSM 7.
func asciiPrefix(s string, n int) string {
	var b strings.Builder
	for i := 0; i < n && s != ""; i++ {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if r < ' ' || r > '~' || strings.ContainsRune("@$_`[]{}\\^~|", r) {
			r = '.'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
