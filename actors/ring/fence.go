package ring

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Fence is what a worker asks before it claims work: the ring fencing of
// the claim. Delivery workers and forward queues take one; nil claims the
// whole ring unfenced (a store used without a ring, as in some tests).
type Fence interface {
	// Claim returns the fencing of a claim of work of kind k, or false when
	// this instance owns none of the ring for k's service now: the worker
	// claims nothing until it is kicked or its idle poll comes.
	Claim(k persistence.WorkKind) (*persistence.RingClaim, bool)
	// Refused tells that the store refused a claim for a stale epoch (a new
	// assignment is on its way and kicks the worker; its idle poll may
	// try, and be refused, before).
	Refused(k persistence.WorkKind)
	// IdlePoll is how often an idle worker looks for work that other
	// instances of the site committed (they cannot kick it); 0 when the
	// store is this instance's alone and every commit kicks its worker.
	IdlePoll() time.Duration
}

// Leader tells whether this instance leads its site's ring now: the
// site-wide jobs (the janitor's sweeps, the cleaner's purges) run on the
// master only, so that a site runs each once. *Shares is one.
type Leader interface {
	Master() bool
}

// Claim claims req's work through fence (nil claims unfenced): ok is
// false, with no error, when this instance owns none of the ring for the
// work's service now, or when the store refused the claim for a stale
// epoch (counted by fence; the new assignment is on its way). Both mean:
// claim nothing now.
func Claim(ctx context.Context, store persistence.Store, fence Fence, req persistence.ClaimRequest) (persistence.Claim, bool, error) {
	if fence != nil {
		rc, ok := fence.Claim(req.Kind)
		if !ok {
			return persistence.Claim{}, false, nil
		}
		req.Ring = rc
	}
	cl, err := store.ClaimWork(ctx, req)
	switch {
	case errors.Is(err, persistence.ErrStaleEpoch):
		fence.Refused(req.Kind)
		return persistence.Claim{}, false, nil
	case err != nil:
		return persistence.Claim{}, false, err
	}
	return cl, true, nil
}

// Write runs w as one store Write (a worker's store round: its outcomes
// and its next claims), each claim fenced through fence (nil: unfenced)
// when fenced says so (nil: every claim). A claim of a service this
// instance owns none of now is not made (a new assignment kicks the
// worker); one the store refused for a stale epoch is counted by fence.
// claims[i] is what w.Claims[i] claimed, nil when it was not made or
// refused. A w left with nothing to do is not written.
func Write(ctx context.Context, store persistence.Store, fence Fence, now time.Time, w persistence.Write,
	fenced func(persistence.ClaimRequest) bool) (written persistence.Written, claims []*persistence.Claim, err error) {
	claims = make([]*persistence.Claim, len(w.Claims))
	reqs, at := w.Claims, make([]int, 0, len(w.Claims)) // w.Claims[j] is reqs[at[j]]
	w.Claims = make([]persistence.ClaimRequest, 0, len(reqs))
	for i, req := range reqs {
		if fence != nil && (fenced == nil || fenced(req)) {
			rc, ok := fence.Claim(req.Kind)
			if !ok {
				continue
			}
			req.Ring = rc
		}
		w.Claims = append(w.Claims, req)
		at = append(at, i)
	}
	if w.Empty() {
		return written, claims, nil
	}
	if written, err = store.Write(ctx, now, w); err != nil {
		return written, claims, err
	}
	for j := range written.Claims {
		if written.Claims[j].Refused {
			fence.Refused(w.Claims[j].Kind)
			continue
		}
		claims[at[j]] = &written.Claims[j]
	}
	return written, claims, nil
}

// Partition is what one service's partition holds: its token ranges under
// an epoch.
type Partition struct {
	Service string
	Epoch   uint64
	Ranges  []messages.TokenRange
}

// Shares holds this instance's partitions, one per service it runs, as the
// coordinator last applied them, and answers its workers' Claim calls. It
// is safe for concurrent use: the coordinator writes, every worker reads.
type Shares struct {
	mu       sync.RWMutex
	parts    map[string]Partition
	master   bool
	idlePoll time.Duration
	refused  func(service string)
}

// NewShares returns empty shares (nothing may be claimed until the first
// Apply). idlePoll is Fence.IdlePoll: 0 for a store no other instance
// shares. refused counts refused claims (a metric), may be nil.
func NewShares(idlePoll time.Duration, refused func(service string)) *Shares {
	return &Shares{parts: map[string]Partition{}, idlePoll: idlePoll, refused: refused}
}

// Apply replaces the partitions with those of instance self in a (for the
// services it runs) and returns the services whose partition changed.
func (s *Shares) Apply(a messages.RingAssignment, self string, services []string) []string {
	next := map[string]Partition{}
	for _, svc := range services {
		if rs := Grant(a, self, svc); len(rs) > 0 {
			next[svc] = Partition{Service: svc, Epoch: a.Epoch, Ranges: rs}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []string
	for _, svc := range messages.AllServices {
		old, had := s.parts[svc]
		nw, has := next[svc]
		if had != has || old.Epoch != nw.Epoch || !slices.Equal(old.Ranges, nw.Ranges) {
			changed = append(changed, svc)
		}
	}
	s.parts = next
	return changed
}

// Clear drops every partition (the instance stops working the ring: it
// stands down, or it stops).
func (s *Shares) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts = map[string]Partition{}
	s.master = false
}

// Partitions returns a copy of the partitions, ordered by service.
func (s *Shares) Partitions() []Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Partition, 0, len(s.parts))
	for _, svc := range messages.AllServices {
		if p, ok := s.parts[svc]; ok {
			out = append(out, p)
		}
	}
	return out
}

// SetMaster records whether this instance is its ring's master now.
func (s *Shares) SetMaster(m bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.master = m
}

// Master reports whether this instance is its ring's master now (the
// site-wide sweeps of the janitor run there only).
func (s *Shares) Master() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.master
}

// Claim implements Fence.
func (s *Shares) Claim(k persistence.WorkKind) (*persistence.RingClaim, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.parts[persistence.ServiceOf(k)]
	if !ok {
		return nil, false
	}
	return &persistence.RingClaim{Epoch: p.Epoch, Ranges: p.Ranges}, true
}

// Refused implements Fence.
func (s *Shares) Refused(k persistence.WorkKind) {
	if s.refused != nil {
		s.refused(persistence.ServiceOf(k))
	}
}

// IdlePoll implements Fence. It does not depend on the ring's members: a
// master alone in its ring still shares the store with instances that may
// have committed work before they went away.
func (s *Shares) IdlePoll() time.Duration { return s.idlePoll }
