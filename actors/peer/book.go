package peer

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Book is the node's shared view of its peers: who is discovered, each
// one's health, and which frontends each serves; and what we tell them we
// serve (Local). Peer actors write their own entry; the intake reads it to
// route and keeps Local up to date, the API and metrics read it to report.
// It is safe for concurrent use. A peer known only from a stored registry (not
// discovered yet, e.g. down since our start) is in the book as unknown and
// not Discovered: its frontends still route to it, so messages queue for it.
//
// An address discovery lists that has never answered is in the book under
// the address (SetAddress) until its name is learned: it is listed, with
// its failed checks, like any peer. A peer discovery no longer lists reads
// removed, and is listed until no message waits for it.
type Book struct {
	mu    sync.RWMutex
	peers map[string]*entry
	// owner maps a frontend to the peers whose registry names it.
	owner map[string][]string
	// queue is the forward queue depth per peer (from store stats).
	queue map[string]int64
	// local are the local frontends' names: our registry for peers.
	local []string
}

type entry struct {
	// address: the entry is an address that never answered, named by it.
	address     bool
	discovered  bool
	instances   []messages.PeerInstance
	state       messages.PeerState
	failures    int
	lastSuccess time.Time
	lastError   string
	frontends   []string
	// incarnation counts the writers of the entry (Book.Entry) and its
	// removals (Gone): only the writer of the current count writes.
	incarnation uint64
}

// NewBook returns an empty book.
func NewBook() *Book {
	return &Book{peers: map[string]*entry{}, owner: map[string][]string{}, queue: map[string]int64{}}
}

func (b *Book) get(name string) *entry {
	e := b.peers[name]
	if e == nil {
		e = &entry{state: messages.PeerUnknown}
		b.peers[name] = e
	}
	return e
}

// Entry is one peer actor's right to write its peer's entry. The writes of
// an entry made stale — its peer removed since (Gone), or a newer actor of
// the same name given an Entry — are dropped: a health check that
// completes while its actor is being stopped cannot make a removed peer
// read healthy again (the supervisor's Gone and the stopping actor's last
// write run on different goroutines).
type Entry struct {
	b           *Book
	name        string
	incarnation uint64
}

// Entry returns the writer of peer name's entry for a new peer actor; any
// earlier writer of name is stale from now on.
func (b *Book) Entry(name string) *Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(name)
	e.incarnation++
	return &Entry{b: b, name: name, incarnation: e.incarnation}
}

// write runs f on the entry under the book's lock, unless w is stale.
func (w *Entry) write(f func(e *entry)) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if e := w.b.peers[w.name]; e != nil && e.incarnation == w.incarnation {
		f(e)
	}
}

// Discovered records that discovery found the peer at these instances.
func (w *Entry) Discovered(instances []messages.PeerInstance) {
	w.write(func(e *entry) {
		e.discovered = true
		e.instances = append([]messages.PeerInstance(nil), instances...)
		if e.state == messages.PeerRemoved {
			e.state, e.failures, e.lastError = messages.PeerUnknown, 0, ""
		}
	})
}

// SetHealth records the peer's health after a check.
func (w *Entry) SetHealth(h *Health) {
	w.write(func(e *entry) {
		e.state, e.failures, e.lastSuccess, e.lastError = h.State(), h.Failures(), h.LastSuccess(), h.LastError()
	})
}

// SetRegistry replaces the frontends the peer serves (Book.SetRegistry);
// a stale writer's registry is dropped (nil conflicts).
func (w *Entry) SetRegistry(frontends []string) (conflicts []string) {
	w.write(func(e *entry) { conflicts = w.b.setRegistry(w.name, e, frontends) })
	return conflicts
}

// SetAddress records an address discovery lists that has never answered,
// with its checks so far (h): listed under the address until its name is
// learned (ForgetAddress).
func (b *Book) SetAddress(addr string, h *Health) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(addr)
	e.address = true
	e.instances = []messages.PeerInstance{{Address: addr}}
	e.state, e.failures, e.lastSuccess, e.lastError = h.State(), h.Failures(), h.LastSuccess(), h.LastError()
}

// ForgetAddress removes an address's entry (its name is learned, or it is
// no longer listed).
func (b *Book) ForgetAddress(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.peers[addr]; e != nil && e.address {
		delete(b.peers, addr)
	}
}

// Gone records that discovery no longer lists peer name: it reads removed.
// Its registry is kept, so messages already routed to it keep queueing
// (and count down to forward_failed); new messages for its frontends queue
// too, until a discovered peer claims them (Owner, Claim). List shows it
// while messages wait for it.
func (b *Book) Gone(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.peers[name]; e != nil {
		e.discovered, e.instances = false, nil
		e.state, e.failures = messages.PeerRemoved, 0
		e.incarnation++ // the stopping actor's writes are stale
	}
}

// SetRegistry replaces the frontends peer name serves, as stored before
// any peer actor runs (a peer actor writes through its Entry). It returns
// the frontends now claimed by more than one peer (for a warning).
func (b *Book) SetRegistry(name string, frontends []string) (conflicts []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.setRegistry(name, b.get(name), frontends)
}

func (b *Book) setRegistry(name string, e *entry, frontends []string) (conflicts []string) {
	for _, f := range e.frontends {
		b.owner[f] = remove(b.owner[f], name)
		if len(b.owner[f]) == 0 {
			delete(b.owner, f)
		}
	}
	e.frontends = sortedUnique(frontends)
	for _, f := range e.frontends {
		b.owner[f] = append(b.owner[f], name)
		sort.Strings(b.owner[f])
		if len(b.owner[f]) > 1 {
			conflicts = append(conflicts, f)
		}
	}
	return conflicts
}

// Owner returns the peer that serves frontend and whether that peer is
// healthy now. When several peers claim it, the first of: a discovered
// healthy peer, a discovered one, any (a peer removed from discovery or
// known only from a stored registry); by name among equals.
func (b *Book) Owner(frontend string) (peer string, healthy, ok bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	owners := b.owner[frontend] // sorted by name
	if len(owners) == 0 {
		return "", false, false
	}
	best, rank := owners[0], 3
	for _, o := range owners {
		if r := ownerRank(b.peers[o]); r < rank {
			best, rank = o, r
		}
	}
	return best, b.peers[best].state == messages.PeerHealthy, true
}

// ownerRank orders the claims on one frontend: discovered and healthy (0),
// discovered (1), not discovered (2).
func ownerRank(e *entry) int {
	switch {
	case e.discovered && e.state == messages.PeerHealthy:
		return 0
	case e.discovered:
		return 1
	}
	return 2
}

// Takeover is a peer's registry after Claim took frontends from it.
type Takeover struct {
	// Peer lost its claim on Taken and serves Left (possibly none).
	Peer        string
	Taken, Left []string
}

// Claim makes the writer's peer, when it is discovered, the only claimant
// of its frontends among the peers not discovered now (removed from
// discovery, or known only from a stored registry): their claims on those
// frontends are dropped. A frontend that moved from a decommissioned site
// to another thus stops being the old site's for good once the new one
// claims it; the caller stores the registries left (Takeover, by peer).
// A peer not discovered keeps a frontend no discovered peer claims, and a
// peer that comes back claims its frontends again at its next registry
// exchange.
func (w *Entry) Claim() (took []Takeover) {
	w.write(func(e *entry) {
		if !e.discovered {
			return
		}
		taken := map[string][]string{}
		for _, f := range e.frontends {
			for _, o := range slices.Clone(w.b.owner[f]) {
				if oe := w.b.peers[o]; o != w.name && !oe.discovered {
					taken[o] = append(taken[o], f)
					w.b.owner[f] = remove(w.b.owner[f], o)
				}
			}
		}
		for _, o := range slices.Sorted(maps.Keys(taken)) {
			oe := w.b.peers[o]
			left := []string{}
			for _, f := range oe.frontends {
				if !slices.Contains(taken[o], f) {
					left = append(left, f)
				}
			}
			oe.frontends = left
			took = append(took, Takeover{Peer: o, Taken: taken[o], Left: slices.Clone(left)})
		}
	})
	return took
}

// Healthy reports whether peer name is healthy.
func (b *Book) Healthy(name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.peers[name]
	return e != nil && e.state == messages.PeerHealthy
}

// Knows reports whether the book has peer name at all: discovered now, or
// known from a registry learned earlier (a peer since removed from
// discovery, that messages may still have been forwarded to).
func (b *Book) Knows(name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.peers[name] != nil
}

// SetQueueDepths replaces the forward queue depths (peers absent have 0).
func (b *Book) SetQueueDepths(depths map[string]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = make(map[string]int64, len(depths))
	for k, v := range depths {
		b.queue[k] = v
	}
}

// List returns every peer of the book, ordered by name: the addresses
// that never answered under their address, and a removed peer only while
// messages wait for it (its forward queue depth, SetQueueDepths).
func (b *Book) List() []messages.PeerInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.peers))
	for name, e := range b.peers {
		if e.state == messages.PeerRemoved && b.queue[name] == 0 {
			continue
		}
		names = append(names, name)
	}
	for name := range b.queue {
		if b.peers[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]messages.PeerInfo, 0, len(names))
	for _, name := range names {
		info := messages.PeerInfo{Node: name, State: messages.PeerUnknown, Frontends: []string{},
			Instances: []messages.PeerInstance{}, ForwardQueueDepth: b.queue[name]}
		if e := b.peers[name]; e != nil {
			info.State, info.ConsecutiveFailures, info.LastError = e.state, e.failures, e.lastError
			info.Frontends = append(info.Frontends, e.frontends...)
			info.Instances = append(info.Instances, e.instances...)
			if len(e.instances) > 0 {
				info.Address = e.instances[0].Address
			}
			if !e.lastSuccess.IsZero() {
				t := e.lastSuccess
				info.LastSuccess = &t
			}
		}
		out = append(out, info)
	}
	return out
}

func remove(xs []string, x string) []string {
	out := xs[:0]
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

func sortedUnique(xs []string) []string {
	out := append([]string{}, xs...)
	sort.Strings(out)
	w := 0
	for i, x := range out {
		if i == 0 || x != out[w-1] {
			out[w] = x
			w++
		}
	}
	return out[:w]
}

// Frontends returns the frontends peer name serves, as last learned.
func (b *Book) Frontends(name string) ([]string, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.peers[name]
	if e == nil || e.frontends == nil {
		return nil, false
	}
	return append([]string(nil), e.frontends...), true
}

// SetLocal replaces the names of the frontends this node serves: the
// registry peers learn from us, at their next exchange. The intake sets
// them whenever they change.
func (b *Book) SetLocal(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.local = append([]string{}, names...)
}

// Local returns the names of the frontends this node serves, as last set
// (empty, never nil, before).
func (b *Book) Local() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return append([]string{}, b.local...)
}
