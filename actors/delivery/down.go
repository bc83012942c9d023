package delivery

import (
	"sync"
	"time"
)

// Down are the frontends of this instance whose delivery worker is down:
// it used up its restart budget, and the frontend supervisor starts a new
// one later (Supervisor.lost). The supervisor writes it; the API's
// frontend documents (GET /api/frontends) and the
// switchboard_delivery_workers_down gauge read it. Safe for concurrent
// use; a nil or zero Down is empty.
type Down struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Of reports whether the worker of the frontend name is down, and when
// its next one starts (zero: none is due, the node stops).
func (d *Down) Of(name string) (time.Time, bool) {
	if d == nil {
		return time.Time{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[name]
	return at, ok
}

// Len is how many frontends' workers are down.
func (d *Down) Len() int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.at)
}

// set says the worker of the frontend name is down until at.
func (d *Down) set(name string, at time.Time) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[string]time.Time{}
	}
	d.at[name] = at
}

// clear says the frontend name has no worker down (a new one started, or
// the frontend changed or went away).
func (d *Down) clear(name string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.at, name)
}

// reset forgets every frontend (the supervisor starts afresh).
func (d *Down) reset() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.at)
}
