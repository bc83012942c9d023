package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"AcceptWhileWorkersDeliver", concurrentAcceptAndDeliver},
	}
}

// concurrentAcceptAndDeliver runs 8 accepting goroutines against 4 workers
// that claim and deliver on one target. Every call uses the same Now and a
// long lease, so no lease can run out: a message handed to two workers means
// two live leases, which the store must never grant.
func concurrentAcceptAndDeliver(f *fixture) {
	const (
		accepters = 8
		batches   = 25
		batchSize = 4
		workers   = 4
		total     = accepters * batches * batchSize
		// maxIdle bounds the empty claims a worker makes once accepting is
		// over, so a store that loses work fails instead of hanging.
		maxIdle = 20000
	)
	ctx, s := f.ctx, f.store
	f.register([]persistence.NewMessage{newMsg("")}) // the accepters' frontend

	var (
		mu        sync.Mutex
		claimedBy = map[string]string{}
		delivered atomic.Int64
		accepted  sync.WaitGroup
		done      atomic.Bool
		all       sync.WaitGroup
	)
	for a := range accepters {
		accepted.Add(1)
		all.Add(1)
		go func() {
			defer all.Done()
			defer accepted.Done()
			for b := range batches {
				batch := make([]persistence.NewMessage, batchSize)
				for i := range batch {
					batch[i] = newMsg(fmt.Sprintf("conc-%d-%02d-%d", a, b, i))
				}
				res, err := s.Accept(ctx, base, batch)
				if err != nil {
					f.Errorf("accepter %d: Accept: %v", a, err)
					return
				}
				for _, r := range res {
					if !r.Created {
						f.Errorf("accepter %d: %s not created", a, r.Message.ID)
					}
				}
			}
		}()
	}
	go func() { accepted.Wait(); done.Store(true) }()

	for w := range workers {
		all.Add(1)
		owner := fmt.Sprintf("worker-%d", w)
		go func() {
			defer all.Done()
			idle := 0
			for {
				finished := done.Load() // read before claiming: nothing is accepted after
				c, err := s.ClaimWork(ctx, persistence.ClaimRequest{
					Kind: persistence.WorkDelivery, Target: feA, Owner: owner, Limit: 7, Now: base, Lease: lease,
				})
				if err != nil {
					f.Errorf("%s: ClaimWork: %v", owner, err)
					return
				}
				if len(c.Work) == 0 {
					if finished && c.NextDue.IsZero() {
						return // nothing left, nothing leased by anyone
					}
					if finished {
						if idle++; idle > maxIdle {
							f.Errorf("%s: outbox never drains (NextDue %v, %d delivered of %d)", owner, c.NextDue, delivered.Load(), total)
							return
						}
					}
					runtime.Gosched()
					continue
				}
				idle = 0
				outcomes := make([]persistence.Outcome, len(c.Work))
				mu.Lock()
				for i, wk := range c.Work {
					if prev, ok := claimedBy[wk.MessageID]; ok {
						f.Errorf("%s claimed by %s and %s while the lease was live", wk.MessageID, prev, owner)
					}
					claimedBy[wk.MessageID] = owner
					if wk.LeaseOwner != owner || wk.Message.Attempts != 1 {
						f.Errorf("%s: claimed %s with owner %q attempts %d", owner, wk.MessageID, wk.LeaseOwner, wk.Message.Attempts)
					}
					outcomes[i] = persistence.Outcome{
						Kind: persistence.WorkDelivery, Target: feA, MessageID: wk.MessageID,
						Result: persistence.ResultDelivered, Detail: owner,
					}
				}
				mu.Unlock()
				comps, err := s.CompleteWork(ctx, base, outcomes)
				if err != nil {
					f.Errorf("%s: CompleteWork: %v", owner, err)
					return
				}
				for i, comp := range comps {
					if comp != persistence.Applied {
						f.Errorf("%s: CompleteWork(%s) = %s, want applied", owner, outcomes[i].MessageID, comp)
					} else {
						delivered.Add(1)
					}
				}
			}
		}()
	}
	all.Wait()
	if f.Failed() {
		return
	}

	if n := delivered.Load(); n != total {
		f.Errorf("delivered %d, want %d", n, total)
	}
	if len(claimedBy) != total {
		f.Errorf("%d messages claimed, want %d", len(claimedBy), total)
	}
	st := f.stats()
	if st.ByState[messages.StateDelivered] != total || st.ByState[messages.StatePending] != 0 || st.OutboxDepth != 0 {
		f.Errorf("Stats: delivered %d pending %d outbox %d; want %d, 0, 0",
			st.ByState[messages.StateDelivered], st.ByState[messages.StatePending], st.OutboxDepth, total)
	}
	msgs := f.listAll("", 500)
	if len(msgs) != total {
		f.Errorf("ListMessages paged %d messages, want %d", len(msgs), total)
	}
	for _, m := range msgs {
		if m.State != messages.StateDelivered || m.Attempts != 1 {
			f.Errorf("%s: state %s attempts %d, want delivered after 1", m.ID, m.State, m.Attempts)
		}
		if e := f.ledger(m.ID, feA); e.Detail != claimedBy[m.ID] {
			f.Errorf("%s: ledger says %q delivered it, the claim said %q", m.ID, e.Detail, claimedBy[m.ID])
		}
	}
}
