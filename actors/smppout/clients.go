package smppout

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Clients are the smpp frontends' clients of this instance, by frontend
// name: the delivery worker of a frontend gets its client here (Get),
// holds it across its restarts (a panic does not drop the bind), and
// releases it when it stops (Release).
//
// When a frontend's URL or password changes, its new worker gets a new
// client, and the old one is retired: no Get returns it any more, it
// writes the frontend's gauges no more (they are the new client's), and it
// stays bound for the old worker, which drains what it has in flight on
// it (the submit_sm outstanding are answered, or time out), until that
// worker releases it. A client closes (it unbinds) when the last worker
// holding it releases it, or at Close.
type Clients struct {
	base Config

	mu sync.Mutex
	m  map[string]*Client
	// users counts the workers holding each client, current or retired.
	users map[*Client]int
	// retired are the clients Get replaced that are not closed yet.
	retired map[*Client]bool
	// closing are the clients a Release is closing: Close waits for them
	// too, so that none still records a receipt on the store the node
	// closes after it.
	closing map[*Client]bool
	// refs are the frontends' references of long texts, by name: a
	// frontend's clients (a change's new one and the old one draining, one
	// of a frontend deleted and created again) share its counter, so that
	// their long texts do not share references. One small counter per
	// frontend name the instance served: kept until Close.
	refs map[string]*Refs
	// stopAt is when the node's stop must end, on the clients' clock
	// (zero: no stop under way): see Stopping. cutStop stops the watch
	// of the stop's context.
	stopAt  time.Time
	cutStop func() bool
}

// NewClients returns the registry; base is every client's Config but its
// Frontend and Refs (each frontend's is its own, made at its first client
// from base.Seed).
func NewClients(base Config) *Clients {
	return &Clients{base: base, m: map[string]*Client{}, users: map[*Client]int{}, retired: map[*Client]bool{},
		closing: map[*Client]bool{}, refs: map[string]*Refs{}}
}

// Get returns the client of fe for a worker, starting it (or a new one,
// retiring the old, when fe's URL or password changed since). Each Get is
// to be matched by a Release of the client.
func (cs *Clients) Get(fe messages.Frontend) (*Client, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[fe.Name]; ok {
		if c.cfg.Frontend.URL == fe.URL && c.cfg.Frontend.Secret == fe.Secret {
			cs.users[c]++
			return c, nil
		}
		c.cfg.Metrics.retire()
		cs.retired[c] = true
		delete(cs.m, fe.Name)
	}
	cfg := cs.base
	cfg.Frontend = fe
	cfg.Metrics = cs.base.Metrics.ofClient()
	if cs.refs[fe.Name] == nil {
		cs.refs[fe.Name] = newRefs(cs.base.Seed, fe.Name)
	}
	cfg.Refs = cs.refs[fe.Name]
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if !cs.stopAt.IsZero() {
		c.Stopping(cs.stopAt)
	}
	cs.m[fe.Name] = c
	cs.users[c] = 1
	return c, nil
}

// Stopping tells the clients that the node's stop has begun, within ctx:
// each client that closes from now on (its last worker's Release, or
// Close) gives the store the time ctx has left, less stopReserve (at
// least closeFloor), to record the receipts it answered (Client.Stopping),
// those Get starts later too. ctx canceled, now or later, leaves no time
// but closeFloor, also to the clients closing then. Without a deadline,
// until it is canceled, nothing changes (closeStoreWait).
func (cs *Clients) Stopping(ctx context.Context) {
	clk := cs.base.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	switch end, ok := ctx.Deadline(); {
	case ctx.Err() != nil:
		cs.stopBy(clk.Now())
	case ok:
		cs.stopBy(clk.Now().Add(time.Until(end))) // ctx's deadline is the wall clock's; the clients read their own
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.cutStop != nil {
		cs.cutStop()
	}
	cs.cutStop = context.AfterFunc(ctx, func() { cs.stopBy(clk.Now()) })
}

// stopBy tells every client, current, retired or closing, and those Get
// starts later, that the node's stop ends at by, on their clock.
func (cs *Clients) stopBy(by time.Time) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopAt = by
	for _, c := range cs.m {
		c.Stopping(by)
	}
	for c := range cs.retired {
		c.Stopping(by)
	}
	for c := range cs.closing {
		c.Stopping(by)
	}
}

// Release is a worker's end with c (it stopped: its frontend was deleted
// or changed, or the node stops). The last worker's release stops c: it
// unbinds, and, when it is still its frontend's client, the frontend's
// series go with it, unless a Get made a client of that name meanwhile
// (the frontend created again), which owns them: c writes the gauges no
// more from its release on.
func (cs *Clients) Release(c *Client) {
	cs.mu.Lock()
	n, ok := cs.users[c]
	if !ok {
		cs.mu.Unlock()
		return
	}
	if n > 1 {
		cs.users[c] = n - 1
		cs.mu.Unlock()
		return
	}
	delete(cs.users, c)
	delete(cs.retired, c)
	cs.closing[c] = true
	name := c.cfg.Frontend.Name
	current := cs.m[name] == c
	if current {
		delete(cs.m, name)
		c.cfg.Metrics.retire()
	}
	cs.mu.Unlock()
	c.Close()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.closing, c)
	if !current {
		return
	}
	if _, again := cs.m[name]; !again {
		cs.base.Metrics.forget(name)
	}
}

// States are the bind states of the clients, by frontend name.
func (cs *Clients) States() map[string]smpp.BindState {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[string]smpp.BindState, len(cs.m))
	for name, c := range cs.m {
		out[name] = c.State()
	}
	return out
}

// Close stops every client, those Get retired too (each unbinds), and
// waits for them, and for those a Release is closing.
func (cs *Clients) Close() {
	cs.mu.Lock()
	if cs.cutStop != nil {
		cs.cutStop()
	}
	names := make([]string, 0, len(cs.m))
	for name := range cs.m {
		names = append(names, name)
	}
	sort.Strings(names)
	all := make([]*Client, len(names))
	for i, n := range names {
		all[i] = cs.m[n]
	}
	for c := range cs.retired {
		all = append(all, c)
	}
	for c := range cs.closing {
		all = append(all, c) // Close again: it returns once c has stopped
	}
	cs.m, cs.users, cs.retired, cs.refs = map[string]*Client{}, map[*Client]int{}, map[*Client]bool{}, map[string]*Refs{}
	cs.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
}
