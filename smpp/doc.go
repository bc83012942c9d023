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
// The package holds no connection state: binding, windows and receipts
// belong to the frontend that uses it. Interoperability is tested against
// Perl's Net::SMPP in both directions (interop_test.go).
package smpp
