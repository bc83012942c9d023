// Package supervision is how Switchboard builds, supervises, measures and
// stops its actors. It is generic: it knows protoactor, Prometheus and slog,
// and none of Switchboard's actor packages.
//
// # Building actors
//
// Every actor is built by Props(kind, producer, Options). kind is the
// concept ("peer", "forward"), never an instance name: it is the label of the
// actor metrics. Props installs an unbounded mailbox, a receiver middleware
// that times, counts and reports panics, and Strategy(budget) as the
// supervisor of the actor's children.
//
// # The supervision model
//
//	node guardian            root actor, spawned with actor.WithGuardian
//	├── intake               one for one, restart on panic, within the Budget
//	├── peers/<peer>#<n>     (each of these supervises its own children the
//	│   └── forward           same way, through Props)
//	└── ...
//
// A panic in Receive drops the message being handled (protoactor does not
// redeliver it; retries must be explicit messages), and the parent's
// strategy restarts the actor: a NEW actor struct from the producer, the same
// mailbox, so every message queued behind the panicking one is still
// delivered. Note that a protoactor restart first stops all the children of
// the restarting actor; the new incarnation must spawn them again in Started.
//
// The Budget bounds restarts per actor: MaxRestarts within a sliding window
// Within (DefaultBudget: 10 per minute; see its comment for why). The failure
// that exceeds the budget stops the actor instead of restarting it, and its
// parent receives *actor.Terminated. Under the node guardian that is
// escalation: a child that terminates while the guardian is not stopping
// means part of the node is gone, so the guardian calls OnFatal once for that
// child, and the node shuts down and exits non-zero, to be restarted from
// durable state by its process supervisor. A crash loop thus ends the process
// within milliseconds instead of burning CPU and logs forever, while isolated
// poison messages cost one restart each. The guardian's own panic cannot be
// cured by a restart (a restart stops all its children), so it stops and
// calls OnFatal(GuardianName, ...).
//
// # Calls off the actor's goroutine
//
// An actor that must not wait on a call in Receive (a store round, a group
// commit) runs it on a goroutine and gets its result back as a message. A
// panic there would end the process, not restart the actor: such a
// goroutine defers CarryPanic, which sends the panic back as a *Panicked,
// and the actor's Receive calls its Rethrow, so the panic restarts the
// actor within its Budget like one in Receive.
//
// # Stopping, leaves first
//
// ActorSystem.Shutdown does not stop actors; Guardian.StopAll does. It stops
// the children in reverse spawn order, one at a time, so that an actor spawned
// later (which may send to the earlier ones while it drains) is gone before
// the actors it depends on. Each child gets Poison, not Stop: Stop drops the
// queued messages, Poison lets the child handle them first. protoactor
// itself stops a child's own children before the child finishes, so the tree
// goes down leaves first. If the caller's context ends, the rest is stopped
// hard (queues dropped).
//
// # Why the workarounds
//
//   - Panic logging: protoactor logs a recovered panic without its stack. The
//     receiver middleware recovers, logs once with debug.Stack (the deferred
//     call runs before the stack unwinds, so the stack shows the panic site),
//     and re-panics so that the mailbox escalates to the supervisor as usual.
//   - Restart metrics: supervisors publish *actor.SupervisorEvent on the
//     EventStream, synchronously, before the directive reaches the child.
//     WatchRestarts counts RestartDirective there. The event carries only a
//     PID, so the middleware keeps a PID -> kind registry (added on Started,
//     before the actor's code runs; removed on Stopped), keyed by actor system
//     too, since every local system has the address "nonhost".
//   - Mailbox depth: a MailboxMiddleware does not see MessageReceived for a
//     message that panicked, and a stopped actor's queue is dropped, so
//     counting posts and receives drifts. Instead Metrics keeps the set of live
//     mailboxes per kind (entered when the mailbox starts, which the spawner
//     does only once the PID is registered; left when the actor receives
//     *actor.Stop) and sums Mailbox.UserMessageCount at scrape time.
//   - Root actors ignore WithSupervisor for their own failures (it governs
//     their children); protoactor's default root handling would restart the
//     guardian, stopping the whole tree. Hence actor.WithGuardian.
//   - The guardian does not Watch its children: a parent already receives
//     *actor.Terminated for each child, and Watch-ing too delivers it twice.
//   - Request/reply with the guardian goes through buffered channels carried
//     in the messages, never futures waited on inside an actor (deadlock and
//     the Future data race). OnFatal runs on its own goroutine because it
//     usually calls StopAll, which waits for the guardian.
//   - protoactor's RestartStatistics keeps every failure time forever; Strategy
//     forgets the history after a quiet window.
package supervision
