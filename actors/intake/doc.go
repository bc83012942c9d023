// Package intake is the node's intake: the routing directory (routes and
// local frontends) and the actor that durably accepts messages.
//
// The cores are pure: Table, longest-prefix routing over a map, so a lookup
// costs at most 20 map probes whatever the number of routes; the Pipeline
// (pipeline.go), which queues the work, asks for the flushes, bounds the
// commits in flight and forms each batch (route.go: what the store keeps
// for each message); the Batch (batch.go), which turns the store's answer
// into replies; the kicks after a commit (kick.go); the queue of resubmits
// (resubmitqueue.go); and what a failure is answered (errors.go). The actor
// (intake.go) is their shell: it feeds them its messages and the time,
// runs each commit and each resubmit's store calls on a goroutine of its
// own, and turns what they decide into sends.
//
// The intake actor owns the directory and the write path of submissions.
// Submits that arrive while a commit is running queue in its mailbox; each
// mailbox drain becomes ONE transaction (group commit), and every submitter is
// answered only after that commit. A submission that cannot be routed is
// answered 422 at once and never stored. After a commit the intake kicks the
// delivery workers of the frontends that got work and publishes a
// messages.StateChanged per new message.
//
// Resubmits (resubmit.go) never hold up submits: a resubmit's read (the
// message, or a bulk's page of 256) and its write run on a goroutine and
// come back as messages; in between, the intake re-routes on its own table,
// and after the write it publishes, kicks and answers. One resubmit is out
// at a time, the others queue in order (a bulk's next page behind those
// asked for meanwhile), so two never race and a bulk keeps its cursor.
//
// Failure: a store error fails the whole batch (each submitter gets
// unavailable and may retry with the same id: submits with an id are
// idempotent). A panic restarts the actor, which reloads the directory from
// the store; the submitters of the batch being built and the callers of the
// resubmits queued are answered unavailable and retry, commits out answer
// their own, and the resubmit whose store call is out comes back to the new
// incarnation, which goes on with it. A resubmit whose own store call panicked
// is answered unavailable, unless its write was made and only the read back
// panicked: then it is answered as made but not read back
// (messages.ErrNotReadBack) before the restart. At a stop, once the resubmit's
// call out has ended, a write it made is answered as made (a bulk with pages
// left with what it resubmitted, and unavailable), the other resubmits
// unavailable. Nothing is acknowledged that was not committed.
package intake
