// Package delivery moves messages from the outbox to local frontends.
//
// One worker actor per frontend works only from the outbox. Policy, the pure
// core, decides per claimed message whether it may be attempted (validity,
// attempts) and what a frontend's verdict becomes (delivered, retry with
// capped, jittered exponential backoff, or failed = dead-lettered).
//
//	claim (lease) ──Before──► attempt ──verdict──After──► outcome ──► group commit
//	      ▲                                                              │
//	      └──────────── wake-up at the next due time (retry or lease end)┘
//
// Push frontends (webhook, in-process actor) are fed by the worker, at most
// MaxInFlight at a time. A pull frontend's long-polls wait in the worker and
// are answered as soon as work is committed (the intake kicks the worker);
// its acks are group-committed like push verdicts.
//
// Exactly-once as seen by a frontend rests on three things: the idempotency
// ledger (the store never hands out work whose outcome is recorded, so a
// message recorded delivered is never delivered again); the message id,
// which is the same on every attempt (webhooks get it as Idempotency-Key),
// so a frontend can drop the redelivery that follows a crash between its
// side effect and our commit; and leases, which a restart of the same
// instance takes back at once.
//
// Failure: a panicking worker restarts and reclaims; work it had leased
// stays leased until the lease ends (a restart of the whole node takes it
// back at once). A store error leaves verdicts uncommitted: the work is
// claimed again when its lease ends and redelivered with the same id.
//
// The Janitor fails messages whose validity passed while nobody claimed
// them (a pull frontend nobody polls, a frontend that was deleted).
package delivery
