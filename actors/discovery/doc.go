// Package discovery finds the peers of a node: it lists addresses from a
// static list and DNS SRV, asks each address who it is, and tells the peers
// supervisor which peers exist (*PeerUp) and which are gone (*PeerGone).
//
// # Sources
//
// Static (--peers): "host:port" entries, port 8443 when omitted
// (ParsePeers). Host names are passed to the transport as given.
//
// DNS SRV (--dns-srv): the SRV name is resolved with miekg/dns against
// --dns-server, or when none is given against the nameservers of
// /etc/resolv.conf in turn (within a lookup, the one that answered
// first). A name without a final dot goes through the
// search list and ndots of /etc/resolv.conf, as the system resolver takes
// it (a form whose query fails moves on to the next). Each target's addresses come from the answer's
// additional section when it holds A/AAAA records for the target, else from
// A and AAAA queries. A target port of 0 means --api-port. A truncated UDP
// answer is asked again over TCP. Addresses are "ip:port" ("[v6]:port").
// Both sources may be given; their addresses are merged.
//
// # A poll
//
// Every PollInterval (--dns-poll-interval) the actor lists the addresses and
// calls GET /api/federation/identity on each, concurrently, off the actor's
// goroutine (one goroutine per round sends the round's results back as a
// message). Addresses that never answered are asked again every
// min(PollInterval, 2s), so a peer that was down at our start is found
// within seconds of coming up. Rediscover (sent by the node when an unknown
// node calls, and by the peers actor when another node answers at a peer's
// address) starts a poll at once, at most one a second. Ticks come from
// the Clock through one clock.Wakeup; a restart cancels it, cancels and
// waits for the calls under way, and ignores messages of the instance
// before it, so polls never double.
//
// # Identity rules
//
// PeerSet, the pure core, turns "addresses listed now" and "what each
// address last said" into the peer set (docs/federation.md, the identity rules):
//   - several addresses reporting one node are ONE peer, the instances of
//     one site, sorted by address;
//   - an address reporting our own node is refused (logged at info: with
//     SRV every node lists itself);
//   - of two addresses reporting the same node and instance_id, one is
//     refused as a duplicate (a dual-stack host listed with its IPv4 and
//     IPv6 address is such a pair: it is used through one): an address that
//     answered the last poll that asked it is kept before one that only
//     remembers its identity, then the first in address order;
//   - an address whose identity document is invalid is refused;
//   - an address whose identity call fails keeps the identity it reported
//     last: a peer that is down stays a peer, so that its messages keep
//     queueing for it (its peer actor reports it unhealthy);
//   - an address no longer listed is forgotten, and a node with no listed
//     address left is gone (*PeerGone).
//
// Refusals are logged once per change, not every poll. The changes are sent
// to the sink in node order: *PeerUp for a new peer or changed instances,
// *PeerGone for a peer no longer listed.
//
// # Failures
//
// A DNS failure (timeout, SERVFAIL, NXDOMAIN for the SRV name, an answer
// that yields no address) keeps the last good address list, and the
// identity calls go to it: a DNS hiccup never drops a peer. A failed A or
// AAAA query of one target keeps that target's last addresses of that
// family (none if it never had one) while what its other query answered
// and the other targets' changes count: one broken target, or a server
// that fails every AAAA query, does not freeze discovery. Either is logged at warn once per
// distinct error, and at info when lookups succeed again; GetSnapshot
// shows the last error. An unreachable
// address is logged once when it has never answered. A restart of the actor
// keeps the peer set the sink was told (the memory lives in the producer),
// so that the first poll after it reports only changes; Resync re-sends
// every peer to a sink that restarted.
package discovery
