package sqlite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/retention"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
)

// BenchmarkIntakeBesidePurge measures what the cleaner costs the intake at
// the store, without HTTP: an intake (group commits of 24 new messages,
// one out at a time, as the node's) runs throughout, and each iteration is
// one second without purging, then one second with a purger (the
// cleaner's DefaultPacer, paced at the intake's rate of the second
// before, as a node whose messages come to the end of their retention as
// fast as they came in). The store holds 250,000 delivered messages past
// their retention. Run it with a count of iterations:
//
//	go test -run '^$' -bench IntakeBesidePurge -benchtime 10x ./persistence/sqlite/
//
// It reports intake-ratio (accepts a second with the purger over those
// without, pooled) and purge/intake (messages purged over accepted in the
// seconds without): alternating by the second, both sides share the
// machine's noise, which the bench's figures, a run apart, do not.
func BenchmarkIntakeBesidePurge(b *testing.B) {
	ctx := context.Background()
	s, base, next := purgeStore(b)
	for i := range 250 {
		batch := make([]persistence.NewMessage, 1000)
		outcomes := make([]persistence.Outcome, len(batch))
		for j := range batch {
			batch[j] = next()
			outcomes[j] = persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: batch[j].ID,
				Result: persistence.ResultDelivered, Detail: "delivered"}
		}
		at := base.Add(time.Duration(i) * time.Second)
		if _, err := s.Accept(ctx, at, batch); err != nil {
			b.Fatal(err)
		}
		if _, err := s.CompleteWork(ctx, at, outcomes); err != nil {
			b.Fatal(err)
		}
	}

	now := base.Add(24 * time.Hour)
	var accepted, purged, rate atomic.Int64
	var on, purging atomic.Bool
	stop, done := make(chan struct{}), make(chan error, 2)
	// loop runs step until stop is closed or step fails, then says which.
	loop := func(step func() error) {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := step(); err != nil {
				done <- err
				return
			}
		}
	}
	go loop(func() error { // the intake
		batch := make([]persistence.NewMessage, 24)
		for i := range batch {
			batch[i] = next()
		}
		if _, err := s.Accept(ctx, now, batch); err != nil {
			return err
		}
		accepted.Add(int64(len(batch)))
		return nil
	})
	r := rand.New(rand.NewPCG(1, 2))
	p := retention.DefaultPacer()
	req := persistence.PurgeRequest{Now: now, Before: map[messages.State]time.Time{messages.StateDelivered: now.Add(-time.Hour)}}
	go loop(func() error { // the purger
		if !on.Load() {
			purging.Store(false)
			time.Sleep(time.Millisecond)
			return nil
		}
		purging.Store(true)
		p.Pass(rate.Load(), time.Second) // 1.2 x that a second: the intake's rate
		req.Limit = p.Batch()
		start := time.Now()
		got, err := s.Purge(ctx, req, nil)
		if err != nil {
			return err
		}
		purged.Add(int64(len(got)))
		pause, _ := p.Done(req.Limit, len(got), time.Since(start), false, r)
		time.Sleep(pause)
		return nil
	})
	var without, with, gone float64
	for b.Loop() {
		a := accepted.Load()
		time.Sleep(time.Second)
		off := float64(accepted.Load() - a)
		rate.Store(int64(off / 1.2))
		on.Store(true)
		a, p := accepted.Load(), purged.Load()
		time.Sleep(time.Second)
		on.Store(false)
		without, with, gone = without+off, with+float64(accepted.Load()-a), gone+float64(purged.Load()-p)
		for time.Sleep(time.Millisecond); purging.Load(); time.Sleep(time.Millisecond) {
		}
	}
	close(stop)
	for range 2 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(with/without, "intake-ratio")
	b.ReportMetric(gone/without, "purge/intake")
	b.ReportMetric(without/float64(b.N), "accepts/s")
}

// purgeStore is the store of the purge benchmarks (closed by b's
// cleanup) with a pull frontend fe, the instant their times derive from,
// and next, which makes their messages one after the other: pending, with
// delivery work for fe, their destinations spread as a network's are.
func purgeStore(b *testing.B) (s *sqlite.Store, base time.Time, next func() persistence.NewMessage) {
	s = sqlitetest.Open(b)
	base = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutFrontend(context.Background(), persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base}); err != nil {
		b.Fatal(err)
	}
	n := 0
	next = func() persistence.NewMessage {
		n++
		return persistence.NewMessage{ID: fmt.Sprintf("m-%09d", n), SourceMSISDN: "+15550100",
			DestinationMSISDN: fmt.Sprintf("+4477%07d", n*7919%10_000_000),
			Body:              "a message body of a typical length, about sixty characters, and a few more.", SourceSMSC: "a", DestSMSC: "b",
			Frontend: "fe", State: messages.StatePending, Detail: "accepted for frontend fe",
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: base}}
	}
	return s, base, next
}
