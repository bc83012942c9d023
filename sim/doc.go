// Package sim runs many real Switchboard nodes in one process — the same
// actors and embedded stores as production, built through the embedding
// API — over an in-memory network that injects faults from a seeded
// schedule, and checks the delivery invariants after every run.
//
//	rep, err := sim.Run(42, sim.RandomOptions(42, 5, 3*time.Second))
//	fmt.Print(rep) // schedule, peers, queues, violations, then the sim: line
//
// The pieces:
//
//   - Network and Endpoint: each node's Config.Transport. A call goes
//     straight to the callee's *switchboard.Node federation methods, with
//     the gateway's validation and error statuses; per direction it can be
//     cut, delayed, dropped, duplicated (sequentially or racing the
//     original) or lose its answer after the callee ran it.
//   - Cluster: N nodes in a full static mesh, each with its own store in a
//     temporary directory and its pull frontends; Crash stops a node
//     abruptly (nothing drained) and Restart starts a new Node on the same
//     store.
//   - Schedule, Action and RandomSchedule: the fault story, as events at
//     times after the load starts; a random one is drawn from the seed
//     alone, so a seed replays its schedule.
//   - Check: the pure checker of a History (submits, deliveries, final
//     origin states): lost, duplicated, unexpected, misrouted,
//     disagreeing.
//   - Scenarios: the named stories (partition, asymmetric, answer-lost,
//     duplicate, crash-receiver, crash-origin, peer-removed,
//     peer-removed-forwarded, ring-failover).
//   - Multi-instance sites (Options.Instances): instances of one name on
//     one shared store, electing their ring master by an in-memory lock;
//     the ring's calls go over the Network, and the ring invariants (no
//     token in two partitions under the store's epoch, checked every few
//     ms; no row claimed under another owner's live lease) are checked.
//
// No production package imports sim. See docs/sim.md.
package sim
