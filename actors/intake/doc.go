// Package intake is the node's intake: the routing directory (routes and
// local frontends) and the actor that durably accepts messages.
//
// The cores are pure: Table, longest-prefix routing over a map, so a lookup
// costs at most 20 map probes whatever the number of routes; the Pipeline
// (pipeline.go), which queues the work, asks for the flushes, bounds the
// commits in flight and forms each batch (route.go: what the store keeps
// for each message); the Batch (batch.go), which turns the store's answer
// into replies; the kicks after a commit (kick.go); and what a failure is
// answered (errors.go). The actor (intake.go) is their shell: it feeds them
// its messages and the time, runs each commit on a goroutine of its own,
// and turns what they decide into sends.
//
// The intake actor owns the directory and the write path of submissions.
// Submits that arrive while a commit is running queue in its mailbox; each
// mailbox drain becomes ONE transaction (group commit), and every submitter is
// answered only after that commit. A submission that cannot be routed is
// answered 422 at once and never stored. After a commit the intake kicks the
// delivery workers of the frontends that got work and publishes a
// messages.StateChanged per new message.
//
// Failure: a store error fails the whole batch (each submitter gets
// unavailable and may retry with the same id: submits with an id are
// idempotent). A panic restarts the actor, which reloads the directory from
// the store; submitters of the batch being built time out at the gateway and
// retry. Nothing is acknowledged that was not committed.
package intake
