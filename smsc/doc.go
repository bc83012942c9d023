// Package smsc is Switchboard as an SMSC: the --smpp-listen listener that
// ESMEs bind to, submit messages through and receive their delivery
// receipts from (docs/smpp.md, "Inbound").
//
// Its cores are pure: Authenticate decides a bind with the credentials in
// force (an SMPP account: a client credential flagged smpp), Short reads
// a submit_sm or data_sm into the fields of POST /api/messages, Reassembly
// holds the parts of concatenated messages (keyed by account, source,
// destination, reference and count; bounded in time, in parts and in
// octets), and
// ReceiptOf makes the deliver_sm of a final message. Server is the shell:
// it accepts connections, runs an smpp.Session (RoleSMSC) on each, and
//
//	bind ──Authenticate──► refused: the status, then the connection closes
//	   └──────────────────► bound_tx | bound_rx | bound_trx
//	submit_sm / data_sm ──Check──► a part? ──Reassembly──► whole ──► intake (Backend.Submit)
//	                                                                   │
//	                          every request of the message answered ◄──┘ after the commit
//
// A receiver or transceiver session starts its account's receipt sender,
// which claims the account's receipt rows of the outbox (written in the
// transaction that made a message final), sends each as a deliver_sm,
// and records its answer; it ends when the account's last receiver
// unbinds, leaving the rest due for the next bind.
//
// On failure: a refused submit stores nothing, and one refused for what it
// carries (Refusal.Malformed) gives back the submit it took of its
// account's rate, as the API does for a 400; a submit whose commit came
// but whose answer was lost is stored (SMPP has no client id: each submit
// is a new message); a part whose message gets no next part for the
// reassembly wait (from its latest part, plus the account's submit
// interval) is refused (no part is answered before its message is
// stored, so an ESME whose window is smaller than a message's parts can
// never send it: the refusal says so when the session shows it); a
// receipt not answered is sent again.
package smsc
