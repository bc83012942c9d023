package postgres

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
)

// benchSizes are the batch sizes: one message per call (no batching), a
// small group commit, and a full one.
var benchSizes = []int{1, 16, 100}

// BenchmarkAccept measures Accept of batches of new messages with delivery
// work (message, history and outbox rows in one transaction) from one
// goroutine, in messages per second. Next to each size it measures, in the
// same run, the naive way to write as many rows: one INSERT round trip per
// row, one transaction per batch. The machines are shared and noisy, so the
// ratio is the figure to read; it is printed as a `bench:` line.
func BenchmarkAccept(b *testing.B) {
	for _, size := range benchSizes {
		var accept, naive float64
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { accept = benchAccept(b, size) })
		b.Run(fmt.Sprintf("baseline/batch=%d", size), func(b *testing.B) { naive = benchNaiveInsert(b, size) })
		if naive > 0 {
			fmt.Printf("bench: postgres-accept-batch%d %.0f msgs/s baseline=%.0f ratio=%.2f\n", size, accept, naive, accept/naive)
		}
	}
}

func benchAccept(b *testing.B, size int) float64 {
	s := withFE(b, open(b, pgtest.DSN(b)))
	batch := make([]persistence.NewMessage, size)
	n := 0
	for b.Loop() {
		for i := range batch {
			batch[i] = delivery(fmt.Sprintf("bench-%09d", n), "fe")
			n++
		}
		if _, err := s.Accept(b.Context(), t0, batch); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(n) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "msgs/s")
	return rate
}

// benchNaiveInsert writes size rows per transaction, one INSERT each, into a
// table keyed like messages.
func benchNaiveInsert(b *testing.B, size int) float64 {
	conn, err := pgx.Connect(b.Context(), pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(b.Context()) }()
	if _, err := conn.Exec(b.Context(), `CREATE TABLE naive (id text COLLATE "C" PRIMARY KEY, body text, at timestamptz)`); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		err := pgx.BeginFunc(b.Context(), conn, func(tx pgx.Tx) error {
			for range size {
				if _, err := tx.Exec(b.Context(), "INSERT INTO naive VALUES ($1, $2, $3)", fmt.Sprintf("row-%09d", n), "body", t0); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(n) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "rows/s")
	return rate
}

// BenchmarkClaimComplete measures the delivery cycle of one worker, in
// messages per second: claim a batch of due work, record it delivered (the
// Accept that queues the work is not timed). The fenced variant claims
// under a ring epoch (fence read, token filter) and completes with fenced
// outcomes.
func BenchmarkClaimComplete(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		for _, size := range benchSizes {
			name := fmt.Sprintf("batch=%d", size)
			if fenced {
				name = "fenced/" + name
			}
			b.Run(name, func(b *testing.B) { benchClaimComplete(b, size, fenced) })
		}
	}
}

func benchClaimComplete(b *testing.B, size int, fenced bool) {
	s := withFE(b, open(b, pgtest.DSN(b)))
	var ring *persistence.RingClaim
	var epoch uint64
	if fenced {
		epoch = 1
		whole := persistence.TokenRange{Lo: 0, Hi: math.MaxUint64}
		err := s.PublishRing(b.Context(), nil, 0, persistence.RingState{Epoch: epoch, Owners: []persistence.RangeOwner{
			{Service: messages.ServiceDelivery, Range: whole, Owner: "bench"}}})
		if err != nil {
			b.Fatal(err)
		}
		// Half the ring: a partition actor's share.
		ring = &persistence.RingClaim{Epoch: epoch, Ranges: []persistence.TokenRange{{Lo: 1 << 62, Hi: 3<<62 - 1}}}
	}
	n, round := 0, 0
	outcomes := make([]persistence.Outcome, 0, size)
	for b.Loop() {
		b.StopTimer()
		round++
		if _, err := s.Accept(b.Context(), t0, deliveries(fmt.Sprint(round), "fe", size)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		claim, err := s.ClaimWork(b.Context(), persistence.ClaimRequest{
			Kind: persistence.WorkDelivery, Target: "fe", Owner: "bench", Limit: size, Now: t0, Lease: time.Minute, Ring: ring,
		})
		if err != nil {
			b.Fatal(err)
		}
		outcomes = outcomes[:0]
		for _, w := range claim.Work {
			outcomes = append(outcomes, persistence.Outcome{
				Kind: w.Kind, Target: w.Target, MessageID: w.MessageID, Result: persistence.ResultDelivered,
				Epoch: epoch, Owner: "bench",
			})
		}
		if _, err := s.CompleteWork(b.Context(), t0, outcomes); err != nil {
			b.Fatal(err)
		}
		n += len(outcomes)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}
