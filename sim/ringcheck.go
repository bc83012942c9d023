package sim

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/messages"
)

// ringCheckEvery is how often the ring invariant is checked during a run.
const ringCheckEvery = 250 * time.Millisecond

// RingResult is the verdict of the ring checks of a run with
// multi-instance sites.
type RingResult struct {
	// Sites counts the multi-instance sites (0: no ring was checked).
	Sites int
	// Checks counts the looks at every site's partitions, Overlaps those
	// that found a token owned by two partitions under the store's epoch.
	Checks, Overlaps int64
	// Claims counts the outbox rows claimed on those sites, DoubleClaims
	// the rows claimed by a second owner under a live lease of a first.
	Claims, DoubleClaims int64
	// Skipped counts the looks made while the epoch moved (not judged);
	// Split the looks that found two instances or more holding partitions
	// under the store's epoch (the ring was split among them).
	Skipped, Split int64
	// Fatals are the instances that stopped themselves (Node.Fatal) and
	// were restarted, with their reasons.
	Fatals []string
	// Details explain the violations.
	Details []string
}

// OK reports whether the ring invariants held.
func (r RingResult) OK() bool { return r.Overlaps == 0 && r.DoubleClaims == 0 }

// Line is the ring's report line, printed before the sim: line.
func (r RingResult) Line() string {
	return fmt.Sprintf("sim: ring checks=%d overlaps=%d double_claims=%d", r.Checks, r.Overlaps, r.DoubleClaims)
}

// ringCheck checks, all along a run, that among the running instances of
// each multi-instance site no token of a service is in two partitions
// whose epoch is the store's current epoch: "no token owned by two
// partition actors with valid epochs at once".
type ringCheck struct {
	mu       sync.Mutex
	checks   int64
	overlaps int64
	skipped  int64
	split    int64
	details  []string
}

func (r *ringCheck) run(c *Cluster) {
	tick := time.NewTicker(ringCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.bgCtx.Done():
			return
		case <-tick.C:
		}
		for i, sh := range c.shared {
			if sh != nil && sh.multi {
				r.look(c, i)
			}
		}
	}
}

// owned is one range of a partition of one instance.
type owned struct {
	instance string
	r        messages.TokenRange
}

// look checks site i once: the store's epoch is read before and after the
// partitions, and a look during which it moved is not judged (a partition
// of the old epoch read before the publication and one of the new epoch
// read after it are both valid at their time).
func (r *ringCheck) look(c *Cluster, i int) {
	sh := c.shared[i]
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	before, err := sh.store.Ring(ctx)
	if err != nil {
		return
	}
	parts := map[string][]ring.Partition{}
	c.mu.Lock()
	nodes := map[string]interface{ RingPartitions() []ring.Partition }{}
	for _, m := range c.sites[i] {
		if m.node != nil {
			nodes[m.name] = m.node
		}
	}
	c.mu.Unlock()
	for name, n := range nodes {
		parts[name] = n.RingPartitions()
	}
	after, err := sh.store.Ring(ctx)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if before.Epoch != after.Epoch {
		r.skipped++
		return
	}
	r.checks++
	epoch := before.Epoch
	by := map[string][]owned{}
	holders := 0
	for name, ps := range parts {
		held := false
		for _, p := range ps {
			if p.Epoch != epoch {
				continue // stale: the store fences its claims
			}
			held = true
			for _, rg := range p.Ranges {
				by[p.Service] = append(by[p.Service], owned{name, rg})
			}
		}
		if held {
			holders++
		}
	}
	if holders > 1 {
		r.split++
	}
	bad := false
	for svc, os := range by {
		sort.Slice(os, func(a, b int) bool { return os[a].r.Lo < os[b].r.Lo })
		for k := 1; k < len(os); k++ {
			// Ranges are inclusive; after sorting, one overlaps an earlier
			// one exactly when it starts at or below the highest end so far.
			for j := k - 1; j >= 0; j-- {
				if os[k].r.Lo <= os[j].r.Hi {
					bad = true
					if len(r.details) < maxDetails {
						r.details = append(r.details, fmt.Sprintf("overlap at %s epoch %d, %s: %s holds [%d, %d] and %s holds [%d, %d]",
							nodeName(i), epoch, svc, os[j].instance, os[j].r.Lo, os[j].r.Hi, os[k].instance, os[k].r.Lo, os[k].r.Hi))
					}
				}
			}
		}
	}
	if bad {
		r.overlaps++
	}
}

// result is the ring's verdict after the run (the claim check runs now,
// over the whole log).
func (c *Cluster) ringResult() RingResult {
	var res RingResult
	for i, sh := range c.shared {
		if sh == nil || !sh.multi {
			continue
		}
		res.Sites++
		n, doubles := sh.log.check(nodeName(i))
		res.Claims += n
		res.DoubleClaims += int64(len(doubles))
		sort.Strings(doubles)
		res.Details = append(res.Details, doubles...)
	}
	c.ring.mu.Lock()
	res.Checks, res.Overlaps, res.Skipped, res.Split = c.ring.checks, c.ring.overlaps, c.ring.skipped, c.ring.split
	res.Details = append(append([]string{}, c.ring.details...), res.Details...)
	c.ring.mu.Unlock()
	c.mu.Lock()
	res.Fatals = append([]string{}, c.fatals...)
	c.mu.Unlock()
	return res
}
