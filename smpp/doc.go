// Package smpp is the SMPP v3.4 codec a gateway needs: the PDUs of binding,
// keepalive and message exchange (bind_transmitter/receiver/transceiver and
// their responses, unbind, enquire_link, generic_nack, submit_sm,
// deliver_sm, data_sm, query_sm), the TLVs in use (message_payload,
// receipted_message_id, message_state, sar_*), the data codings of
// messages.DataCoding, the concatenation of long messages (UDH and sar_*),
// and the text of a delivery receipt.
//
// Decoding never panics and bounds every length: a PDU's command_length by
// the reader's limit, every C-Octet string by its field's maximum, every
// short_message and TLV by what is left of the PDU. A PDU that cannot be
// decoded is a *DecodeError carrying the command_status to answer it with
// (ESME_RINVCMDLEN, ESME_RINVCMDID, ESME_RINVPARLEN, ...), and the header
// when it could be read, so the answer can carry its sequence number.
//
// Session is one connection of either role, ESME or SMSC, shared by the
// outbound frontend and the listener:
//
//	open ──bind (ESME sends, SMSC answers OK)──► bound_tx | bound_rx | bound_trx
//	  │                                                 │
//	  └──────── unbind / link broken / Close ───────────┴──► closed
//
// It numbers requests, keeps at most Window of them outstanding and
// matches each response (or generic_nack) to its request, fails a request
// without a response after ResponseTimeout, answers enquire_link and
// unbind itself (the peer's unbind once the requests it sent before it
// are answered, within ResponseTimeout; closed meanwhile to new requests),
// refuses what the bind state does not allow (Allowed: a
// pure table), throttles the peer's requests beyond InWindow, sends an
// enquire_link after EnquireLink of silence and ends the session when it
// is not answered. On failure every pending request fails with ErrClosed
// and Done is closed; what a request that was written but not answered
// means (sent, perhaps accepted) is the caller's to decide.
//
// Receipts and the store belong to the frontends that use it.
// Interoperability is tested against Perl's Net::SMPP in both directions
// (interop_test.go).
package smpp
