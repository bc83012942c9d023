// Package sim runs many real Switchboard nodes in one process — the same
// actors, embedded stores, HTTPS gateway and peer client as production,
// built through the embedding API — over an in-memory network that
// injects faults from a seeded schedule, on virtual time (a
// testing/synctest bubble), and checks the delivery invariants after
// every run.
//
//	rep, err, ok := sim.RunIn(t, "seed=42", 42, sim.RandomOptions(42, 5, 5*time.Minute))
//	fmt.Print(rep) // schedule, peers, queues, violations, then the sim: line
//
// The pieces:
//
//   - RunIn and Main: a run inside a synctest bubble (from a test, or
//     from a program through testing.MainStart); the nodes keep their
//     production intervals.
//   - Network and Endpoint: each incarnation's listener, dialer and
//     request interceptor (Config.Listener, Config.Dial,
//     Config.Intercept): calls between nodes are HTTPS requests over
//     in-memory pipes; per direction they can be cut, delayed, dropped,
//     duplicated (sequentially or racing the original) or lose their
//     answer after the callee ran them.
//   - Cluster: N nodes in a full static mesh, each on a store the sim
//     opens (through the store fault wrapper: I/O errors, full disk, slow
//     fsync) and on a clock of its own (Config.Clock: skewed from the
//     run's time, stepped forward or back), with pull, webhook and
//     in-process actor frontends (the push frontends with faults of their
//     own); Crash stops a node abruptly (nothing drained), Restart starts
//     a new Node on the same store, RemovePeers and AddPeers restart it
//     with another --peers, DrainRestart restarts it during the first
//     forward of a drain, and CrashAfterCommit crashes it right after its
//     next commit of a CommitPoint (a hand-over's claim, a push delivery,
//     a pull ack, a status report applied), before it acts on it.
//   - Schedule, Action and RandomSchedule: the fault story, as events at
//     times after the load starts; a random one is drawn from the seed
//     alone, so a seed replays its schedule.
//   - Check: the pure checker of a History (submits, deliveries, the
//     messages at their origins and destinations after the run): lost,
//     duplicated, unexpected, misrouted, disagreeing, redelivered,
//     failed_early, stuck. A run that did not quiesce fails too.
//   - Scenarios: the named stories (partition, asymmetric, answer-lost,
//     duplicate, crash-receiver, crash-origin, peer-removed,
//     peer-removed-forwarded, ring-failover, clock-skew, peer-flap,
//     drain-restart).
//   - Multi-instance sites (Options.Instances): instances of one name on
//     one shared store, electing their ring master by an in-memory lock;
//     the ring's calls go over the Network, and the ring invariants (no
//     token in two partitions under the store's epoch; no row claimed
//     under another owner's live lease) are checked. PauseMaster pauses
//     a site's master while its lock lapses: another instance may lead
//     before it learns it lost the lock.
//
// No production package imports sim. See docs/sim.md.
package sim
