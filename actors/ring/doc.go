// Package ring splits the token space of a multi-instance site among its
// instances so that each due message is worked by exactly one of them.
//
// A token is the 64-bit hash of a message id; the ring is every token,
// [0, MaxUint64] (Whole). The files without an actor in them are the pure
// core: range arithmetic (ranges.go), the balanced minimal-movement split
// (Assign), what a member works under an assignment (Owners, Grant), the
// join check (Admit), the master's membership state machine (Master), the
// role and slave state machine of every instance (Member: which role it
// takes, when a slave calls its master, what a failed call means, when it
// stands for master or gives up), the slaves' reconnect backoff
// (Reconnect) and StatefulSet ordinals (Ordinal). They take the time and
// randomness as arguments and do no I/O. The Coordinator actor is their
// shell: it feeds Member its events (a wake-up, a call's end, a lock lost)
// and carries out the effects Member returns (take the lock, read the
// store, call the master, schedule the next wake-up), and runs Master's
// admission, publication and subscriptions. Its store and transport calls
// run off its mailbox and come back as messages, each fenced: of this
// incarnation, of the generation Member awaits (or of the Master core that
// publishes), else dropped.
//
// # Roles
//
//   - master: keeps the membership, computes assignments, stores them and
//     publishes them to the slaves; it is itself a member and works its
//     own ranges, plus the ranges of members for the services they lack.
//   - slave: joins the master, subscribes to its assignments and works
//     the ranges granted to it.
//   - index: the role is derived from the StatefulSet ordinal (Ordinal of
//     the instance id, POD_NAME or HOSTNAME): ordinal 0 is the master, the
//     others are slaves.
//   - auto: every instance tries the store's leader lock (Postgres advisory
//     lock); the holder is the master, the others are slaves. An instance
//     that lacks one of messages.AllServices never tries it and follows
//     as a slave: a master must have every service a slave may have.
//
// # Protocol
//
// A slave joins (RingJoin). Admit checks the document: complete, known
// services, same node (site), cluster and region as the master, and
// services a subset of the master's (the master stands in for what a
// member lacks); zone is informational. Refused joins carry a Refusal code.
// The slave then keeps one subscription call (RingPoll) open, naming the
// epoch it has applied; the call is answered when a newer assignment is
// published, or after the publish interval with the current one. Every
// poll is also the slave's heartbeat and its confirmation of the epoch it
// holds. On a graceful stop the slave says goodbye (RingLeave). A slave
// that cannot reach the master retries with Reconnect's backoff and gives
// up after MaxAttempts failures in a row.
//
// A member document also carries the capabilities of the instance's
// version (an earlier version sends none). Master keeps them per member
// and puts them in every RingMember; a member that comes back with others
// is a changed document, so a new epoch. A Roster learns the members of
// every assignment the instance applies, and of the one stored when it
// started, and names those that lack a capability, keeping a member
// missing from the assignment for a while (it may be alive and come
// back, to a new master, say): the node takes a message that needs a
// capability (messages.Options.Needs) only while none lacks it.
//
// # Epochs and fencing
//
// Master.Next returns a new assignment whenever the member set or a
// member's document changed: Assign from the previous ranges (a member
// coming back first gets the ranges it last had, also across a master
// fail-over, from the stored members), with the epoch one above the
// current (or stored) one. The shell stores it with a compare-and-set on
// the previous epoch (persistence.RingStore.PublishRing), so an old master
// cannot overwrite a newer assignment, then calls Published. With an
// elector it publishes under its master lock, which the store confirms in
// the same transaction: a master that lost its lock stores nothing, and
// one whose compare-and-set fails with its lock confirmed (an old master's
// publication, which confirmed its own lock before this one was taken,
// committed after this master read the store) still leads: it reads the
// stored epoch (Master.Rebase) and publishes over it. Without an elector
// a failed compare-and-set (not its own earlier try's) makes the master
// stand down. Claims name the epoch and the ranges they work
// (persistence.RingClaim): the store refuses a claim under a stale epoch
// or outside its owner's stored ranges, and outcomes are fenced by the
// lease epoch the claim recorded. So no token is worked by two owners,
// even while slaves still hold an older assignment.
//
// # Coverage
//
// Master.Coverage is the share of the ring whose owner under the current
// assignment has confirmed its epoch (a poll naming it, or Applied for the
// master's own partitions): 1 when every member holds it, lower while a
// change propagates, 0 before the first publish.
//
// # Failures
//
//   - The master dies: its slaves' polls fail; at each failed call an
//     auto instance tries the Postgres advisory lock (free once the dead
//     master's session ended) and the one that takes it becomes master. It starts from the stored assignment: the next
//     epoch, with only itself as member, owning the whole ring; members
//     that rejoin get their stored ranges back first. Index slaves keep
//     retrying the ordinal-0 master.
//   - A slave dies: it has no open subscription call; Grace after its last
//     call ended (default min(publish interval, 5s)) it is dropped and the
//     next assignment gives its ranges to the others, the master included.
//     Until then its ranges wait: claims by others are fenced off.
//   - A silent member (it polls but does not confirm the current epoch,
//     e.g. stuck applying it): dropped two publish intervals after the
//     epoch's publication (or its join, when later); its ranges go to the
//     others, the master included.
//   - A member that restarts joins again under its id: it holds no epoch
//     until it polls; an identical document does not bump the epoch.
//
// Master is not safe for concurrent use; its shell serializes the calls.
package ring
