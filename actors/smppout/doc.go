// Package smppout is frontend mode smpp: the node as an ESME, delivering
// each message to an SMSC as submit_sm (docs/smpp.md).
//
// One Client per smpp frontend and instance holds the connection, as an
// smpp.Session of role ESME:
//
//	dialing ──connected──► binding ──bind_resp OK──► bound ──link lost──┐
//	   ▲                      │ refused / error                         │
//	   └──── wait (backoff with jitter) ◄───────────────────────────────┘
//
// The delivery worker hands it each claimed message (Submit): the message
// becomes its submit_sm (Submits: one, or one per part of a long text),
// paced by the frontend's rate (Limiter; this instance's part of it is its
// share of the ring: Share) and paused after ESME_RTHROTTLED (Throttle:
// 1 s doubling to 30 s, its worker claiming nothing meanwhile), sent
// within the session's window; the SMSC's
// responses become the verdict (Verdict: accepted is delivered, with the
// SMSC's message ids; a temporary status or a lost response is a retry,
// deferred — no attempt used — when the SMSC throttled the message and has
// nothing of it; a permanent status fails the message). A message that the
// pacing (the pause, the rate, this instance's share of it) keeps from
// being sent in its time is deferred too: our own pacing never uses up an
// attempt. A throttled part stops its text's later parts. While the client is not bound the
// worker claims nothing: messages wait in the outbox, not burning their
// attempts.
//
// With a transceiver bind the SMSC's delivery receipts (deliver_sm, or
// data_sm, which SMPP v3.4 allows too) come back on the same connection:
// each is recorded in its message's history (found by the SMSC's message
// id) before its response, so a
// receipt the node could not record is sent again by the SMSC. One whose
// id names no stored message yet (it came before the verdict's commit,
// here or on another instance of the site) is answered and held in memory
// for its message (Config.ReceiptWait).
//
// Failure: a submit_sm written but not answered (the link broke, the node
// was killed) may have been accepted by the SMSC; SMPP has no idempotency
// key, so the message's next attempt sends it again. At most the window's
// worth of messages can be in that state; the resend is marked in the
// message's history.
package smppout
