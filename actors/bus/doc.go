// Package bus is the optional delivery bus of a multi-instance site
// (--nats-url, docs/nats.md): a NATS JetStream work-queue stream that
// carries delivery work between the site's instances. The outbox stays the
// durable record of the work and the idempotency ledger its exactly-once
// barrier; the bus only tells an instance which row to claim, and when.
//
// The pure core (core.go) decides; the shells (conn.go, relay.go, and the
// delivery workers of package delivery) do the I/O:
//
//   - Relay: when the relay takes the next batch of unrelayed rows that
//     are due from the store (kicked by commits of unrelayed work, a sweep
//     every second, the time the earliest work waiting for its time falls
//     due, a jittered backoff after a failure). The bus carries only work
//     that is due: work early in a consumer would be naked until its time,
//     holding one of the consumer's MaxAckPending. While the bus is up the
//     intake writes its new work that is due marked relayed and hands the
//     rows to the relay after the commit (Relayer.Publish): the hot path
//     needs no take.
//   - Claimed: what a bus message becomes once its row was claimed by id:
//     delivered here (Keep), claimable within a second (Nak until then),
//     or not (Ack: its work is recorded, or was never there; or its row is
//     leased by another claim, or due later, for longer, and the row in
//     the store is the record: a naked copy held one of the consumer's
//     MaxAckPending until then).
//   - Settled: what it becomes once the outcome of its work is committed:
//     delivered or already recorded (Ack), a retry (Ack: its commit wrote
//     the row back unrelayed, and the relay publishes it when due), the
//     dead letter (Term). Never before the commit.
//   - Holds: the messages a worker holds while their work is under way,
//     touched (InProgress) well within the ack wait, and handed back when a
//     pull frontend's lease ends here without an outcome.
//
// A message's life:
//
//	outbox row ──relay (a take, or the intake's commit)──► stream
//	                       │ (Nats-Msg-Id = <id>/<row>/<due>: a publish
//	                       │  repeated after a crash is dropped)
//	                       ▼ fetch (one durable consumer per frontend, shared)
//	                    held ──claim by id──► not claimable ──► Nak(until claimable)
//	                       │                  no row ─────────► Ack
//	                       ▼ claimed
//	              delivered / retry / failed, committed
//	                       ▼          (the row back to the outbox,
//	                 Ack / Ack / Term  relayed again when due)
//
// Failure: the bus's connection reconnects for good; while it is down Up is
// false, the relay waits (the rows wait in the outbox) and the workers
// claim from the store. Connected, publishes that keep failing (the stream
// takes none of DegradeAfter in a row) make it degraded: Up is false as
// well, and the relay's rounds go on until a publish succeeds. A process
// that dies holding messages leaves them to come back after the consumer's
// ack wait; their rows' leases decide who may claim them, and the ledger
// whether anything is left to do. A worker that stops or restarts does not
// leave them to the ack wait: it naks what no outcome will settle (Back),
// and a restarted one holds on to, and settles, those whose outcome may
// still be committed (package delivery, busLink.handOn).
package bus
