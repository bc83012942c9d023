// Package peer is the federation's view of the other nodes: the book of
// peers (Book, read by routing, /api/peers and the metrics), the health
// state machine of one peer (Health), and the actors around them.
//
// The peers actor (Supervisor) spawns one peer actor (Actor) per peer
// discovery lists, and one in gone mode (Config.Gone) for a peer gone from
// discovery that calls us; each peer actor spawns the peer's forward queue
// as its child "forward".
//
// # Names
//
// A peer actor is named "<peer>#<n>", n counting the peer actors the node
// has spawned, so that no actor ever has the name, hence the PID, of one
// before it. Its health checks and registry exchanges run on goroutines
// that send their results to its PID: one that ends after the actor
// stopped (the peer left discovery while an exchange was out) finds no
// actor there, and its result goes to the dead letters. Under a reused
// name it reached the peer's next actor, which took an answer it had not
// asked for, and protoactor makes a name reachable before the actor's
// mailbox is ready, so such a send could panic the sending goroutine and
// end the process. The actors of one peer run one at a time: the next is
// spawned once the last has stopped. Nothing finds a peer's actor by its
// name: the peers actor routes by peer (Supervisor.route), and the
// handover board holds the forward queue's PID.
package peer
