package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/persistence"
)

// A ring master whose lock lapses while it runs: the process is paused
// (stopped by a signal, a VM frozen, a long stall) long enough for the
// database to end the session that holds its lock, so another instance
// may take the lock and publish; when it goes on, it still believes it is
// the master until it checks its lock's connection (the Postgres elector
// does every second). The sim pauses the master's incarnation (its store
// calls wait, the requests to it and the connections it opens wait),
// frees its lock at the pause's start and closes its Lost channel Notice
// after the pause's end.

// freeze is an incarnation's pause: while it lasts, whatever waits on it
// waits.
type freeze struct {
	mu sync.Mutex
	ch chan struct{} // nil: running; closed when the pause ends
}

func (p *freeze) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
}

// end ends the pause (nothing when there is none): what waits goes on.
func (p *freeze) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// wait waits out the pause in force, or until ctx ends (false).
func (p *freeze) wait(ctx context.Context) bool {
	p.mu.Lock()
	ch := p.ch
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// PauseMaster pauses the ring master of site i for d, its lock lapsing
// at once; it learns that it lost the lock notice after the pause.
func PauseMaster(i int, d, notice time.Duration) Action {
	return Action{Kind: KindPauseMaster, Node: i, D: d, Notice: notice}
}

// pauseMaster pauses m, site i's master (its lock l): its store view, its
// endpoint's requests and dials wait for d; the lock is free at once; l's
// Lost closes notice after the pause. Whether another instance holds the
// lock when the master goes on, believing it leads, is counted
// (Overtaken): it then learns it does not from its Lost channel, or
// before from the store, which refuses its publications (storeView's
// PublishRing).
func (c *Cluster) pauseMaster(m *member, l *leadership, d, notice time.Duration) {
	c.mu.Lock()
	view, ep, n := m.view, m.ep, m.node
	c.faults.Lapses++
	c.mu.Unlock()
	el := l.el
	el.mu.Lock()
	if el.holders[l.name] == l {
		delete(el.holders, l.name) // the database ended its session: free
	}
	el.mu.Unlock()
	view.paused.start()
	ep.paused.start()
	fmt.Fprintf(c.opts.Progress, "sim: %s paused for %v, its ring master lock lapsed\n", m.name, d)
	c.after(d, func() {
		el.mu.Lock()
		h := el.holders[l.name]
		el.mu.Unlock()
		c.mu.Lock()
		if h != nil && h.s != l.s && m.node == n && !persistence.LeadershipEnded(l) {
			c.faults.Overtaken++ // another leads, and it goes on as the master
		}
		c.mu.Unlock()
		view.paused.end()
		ep.paused.end()
		c.after(notice, func() { l.once.Do(func() { close(l.lost) }) })
	})
}

// lapsing is site i's master and its lock, for a pause (nil when no
// running instance holds it).
func (c *Cluster) lapsing(i int) (*member, *leadership) {
	m := c.master(i)
	if m == nil {
		return nil, nil
	}
	sh := c.shared[i]
	sh.el.mu.Lock()
	defer sh.el.mu.Unlock()
	return m, sh.el.holders[ring.LockName]
}
