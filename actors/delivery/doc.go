// Package delivery moves messages from the outbox to local frontends.
//
// One worker actor per frontend works only from the outbox. Policy, the pure
// core, decides per claimed message whether it may be attempted (validity,
// attempts) and what a frontend's verdict becomes (delivered, retry with
// capped, jittered exponential backoff, or failed = dead-lettered). A
// frontend too busy to take the message (an SMSC's ESME_RTHROTTLED, a
// webhook's 429) defers it: a retry that uses no attempt (the store gives
// back the one its claim counted), bounded by the message's validity only.
// Deferrals of an attempt in a row back off further each time, as
// retries do (the Dispatcher counts them, Policy.AfterDeferrals).
//
//	claim (lease) ──Before──► attempt ──verdict──After──► outcome ──► group commit
//	      ▲                                                              │
//	      └──────────── wake-up at the next due time (retry or lease end)┘
//
// The worker (worker.go) is an actor shell around pure state machines,
// each with table tests: the Dispatcher (dispatch.go: what to claim, whom
// to answer, which verdicts to record), pace (pace.go: whether claims are
// held, the idle poll, the next wake-up, the offer on the handover board),
// busLink (buslink.go: the bus messages held, their settlement, the
// fetch) and spanBook (spans.go: the open delivery spans). The shell runs
// the store rounds and the fetches off the actor, and carries out what
// they decide (effects.go).
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
// A frontend whose settings change (mode, URL, secret) gets a new worker
// at once; the old one retires (planUp, Dispatcher.Retire): it takes no
// new work, records the verdicts of what it has in flight, and stops,
// within the push lease whatever it still has. So does the worker of a
// frontend that is deleted (planDown), one of the same name created
// meanwhile getting a new worker beside it. Stopped at once, it would
// lose those verdicts, and each message would be delivered again when its
// lease ran out.
//
// Failure: a panicking worker restarts and reclaims; work it had leased
// stays leased until the lease ends (a restart of the whole node takes it
// back at once). So does the work a store round of the earlier incarnation
// claims after the restart: its result comes to the new incarnation, which
// takes from it only the verdicts it recorded (Dispatcher.Earlier), and
// keeps to one round of its own at a time, and to one fetch from the bus:
// the messages of the earlier one's fetch go back to the bus
// (busLink.earlier). What an incarnation hands the next is one value
// (carry.go: the dispatcher's Carry, the bus link's held messages and its
// fetch out), which the next takes whole. The push deliveries it had under
// way go on: the next incarnation inherits them (Dispatcher.Inherit),
// records their verdicts, and counts them against MaxInFlight until each
// verdict comes or its deadline passes, as it counts the rows the handover
// board granted its predecessor that have not come yet (they come to its
// mailbox, which it kept: seat.started). So do the push verdicts it had
// not recorded (in its Carry: those waiting for the next round, and the
// final ones of the round out, which may have recorded them; the ledger
// makes a second record AlreadyRecorded): the next incarnation's first
// round records them, so that a webhook that answered 2xx is not called
// again. A verdict that panics the round again loops until the restart
// budget is used up; the supervisor's new worker (lost) starts without it.
// A store error leaves verdicts uncommitted: the work is claimed again
// when its lease ends and redelivered with the same id.
//
// The Janitor fails messages whose validity passed while nobody claimed
// them (a pull frontend nobody polls, a frontend that was deleted).
//
// # The frontends
//
// The adapters between a worker and the three kinds of frontend (besides
// the smpp frontend, actors/smppout):
//
//   - webhook (webhook.go): the node POSTs messages.Outgoing as JSON with
//     headers Idempotency-Key (the message id) and X-Switchboard-Attempt,
//     signed (signature.go: Sign, Verify). 2xx is delivered; 408, 429, 5xx,
//     timeouts and connection errors are retries; any other status (a 3xx
//     included: redirects are not followed) is a permanent failure.
//     Classify is that table.
//   - pull (pull.go): frontends long-poll; Waiters is the pure queue of
//     waiting polls (FIFO, each with a deadline).
//   - actor (inprocess.go): an in-process actor registered through the
//     embedding API receives messages.Delivery and responds with
//     messages.DeliveryResult. Actors keeps the PIDs, which live only as
//     long as the process; the Watcher unregisters one whose actor ends,
//     so that its messages wait instead of being sent to a dead PID.
package delivery
