package smppout

import (
	"sort"
	"sync"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Clients are the smpp frontends' clients of this instance, by frontend
// name: the delivery worker of a frontend gets its client here, which
// outlives a restart of the worker (a panic does not drop the bind).
type Clients struct {
	base Config

	mu sync.Mutex
	m  map[string]*Client
	// retired are the clients Get replaced, while they close: each writes
	// its frontend's gauges no more (they are the new client's), and
	// Close waits for them.
	retired map[*Client]bool
}

// NewClients returns the registry; base is every client's Config but its
// Frontend.
func NewClients(base Config) *Clients {
	return &Clients{base: base, m: map[string]*Client{}, retired: map[*Client]bool{}}
}

// Get returns the client of fe, starting it (or a new one, when fe's URL
// or password changed since).
func (cs *Clients) Get(fe messages.Frontend) (*Client, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[fe.Name]; ok {
		if c.cfg.Frontend.URL == fe.URL && c.cfg.Frontend.Secret == fe.Secret {
			return c, nil
		}
		c.cfg.Metrics.retire()
		cs.retired[c] = true
		go cs.close(c)
		delete(cs.m, fe.Name)
	}
	cfg := cs.base
	cfg.Frontend = fe
	cfg.Metrics = cs.base.Metrics.ofClient()
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cs.m[fe.Name] = c
	return c, nil
}

// close closes a retired client and forgets it.
func (cs *Clients) close(c *Client) {
	c.Close()
	cs.mu.Lock()
	delete(cs.retired, c)
	cs.mu.Unlock()
}

// Release stops fe's client when it is still the one of fe's URL and
// password (its frontend was deleted, or changed mode): it unbinds.
func (cs *Clients) Release(fe messages.Frontend) {
	cs.mu.Lock()
	c, ok := cs.m[fe.Name]
	if ok && c.cfg.Frontend.URL == fe.URL && c.cfg.Frontend.Secret == fe.Secret {
		delete(cs.m, fe.Name)
	} else {
		ok = false
	}
	cs.mu.Unlock()
	if ok {
		c.Close()
		cs.base.Metrics.forget(fe.Name)
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

// Close stops every client (each unbinds), in name order, and waits for
// those Get replaced to end.
func (cs *Clients) Close() {
	cs.mu.Lock()
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
	cs.m = map[string]*Client{}
	cs.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
}
