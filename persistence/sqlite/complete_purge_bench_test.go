//go:build unix

// (BenchmarkCompleteAndPurge reads the process's CPU time with getrusage.)

package sqlite_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// BenchmarkCompleteAndPurge measures at the store the CPU (user and
// system, of the whole process: the writer and the syncer) that a
// delivery's outcome and a purge cost per message, the way the delivery
// worker and the cleaner call them: a store holding 60,000 delivered
// messages, then per iteration 10,000 more accepted (batches of 1,000),
// delivered (CompleteWork, batches of 100) and purged (Purge, batches of
// 100, oldest first):
//
//	go test -run '^$' -bench CompleteAndPurge -benchtime 4x ./persistence/sqlite/
func BenchmarkCompleteAndPurge(b *testing.B) {
	ctx := context.Background()
	s, base, next := purgeStore(b)
	second := 0
	// round accepts, delivers and (purge) purges 10,000 messages; it
	// returns the CPU of the deliveries and of the purges.
	round := func(purge bool) (deliver, purged time.Duration) {
		ids := make([]string, 0, 10_000)
		for range 10 {
			batch := make([]persistence.NewMessage, 1000)
			for j := range batch {
				batch[j] = next()
				ids = append(ids, batch[j].ID)
			}
			if _, err := s.Accept(ctx, base.Add(time.Duration(second)*time.Second), batch); err != nil {
				b.Fatal(err)
			}
		}
		t := cpuTime()
		for lo := 0; lo < len(ids); lo += 100 {
			second++
			outcomes := make([]persistence.Outcome, 100)
			for j := range outcomes {
				outcomes[j] = persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: ids[lo+j],
					Result: persistence.ResultDelivered, Detail: "delivered"}
			}
			if _, err := s.CompleteWork(ctx, base.Add(time.Duration(second)*time.Second), outcomes); err != nil {
				b.Fatal(err)
			}
		}
		deliver = cpuTime() - t
		if !purge {
			return deliver, 0
		}
		t = cpuTime()
		req := persistence.PurgeRequest{Now: base.Add(48 * time.Hour), Limit: 100,
			Before: map[messages.State]time.Time{messages.StateDelivered: base.Add(24 * time.Hour)}}
		for range len(ids) / 100 {
			if _, err := s.Purge(ctx, req, nil); err != nil {
				b.Fatal(err)
			}
		}
		return deliver, cpuTime() - t
	}
	for range 6 {
		round(false)
	}
	var deliver, purged time.Duration
	for b.Loop() {
		d, p := round(true)
		deliver, purged = deliver+d, purged+p
	}
	per := float64(10_000 * b.N)
	b.ReportMetric(float64(deliver.Microseconds())/per, "µs/delivered")
	b.ReportMetric(float64(purged.Microseconds())/per, "µs/purged")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
