package retention

import (
	"math/rand/v2"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Policy is how long messages rest before they go. Every field is a
// duration; zero keeps those messages forever.
type Policy struct {
	// Retention keeps delivered messages (--retention, 24h).
	Retention time.Duration
	// RetentionFailed keeps failed and forward_failed ones
	// (--retention-failed, 168h: the dead letters wait for an operator).
	RetentionFailed time.Duration
	// ForwardedAfter keeps a forwarded message whose report never came
	// (--message-validity + --retention-failed: by then the peer has ended
	// its delivery, and a failure would have been kept that long).
	ForwardedAfter time.Duration
	// AuditRetention keeps the audit trail (--audit-retention, a year).
	// It is purged by age alone, after each pass over messages, never
	// with them.
	AuditRetention time.Duration
}

// Request is the purge request of a batch of limit at now: each resting
// state's cutoff. ok is false when nothing is ever purged.
func (p Policy) Request(now time.Time, limit int) (req persistence.PurgeRequest, ok bool) {
	before := map[messages.State]time.Time{}
	for st, d := range map[messages.State]time.Duration{
		messages.StateDelivered: p.Retention, messages.StateFailed: p.RetentionFailed,
		messages.StateForwardFailed: p.RetentionFailed, messages.StateForwarded: p.ForwardedAfter,
	} {
		if d > 0 {
			before[st] = now.Add(-d)
		}
	}
	return persistence.PurgeRequest{Now: now, Before: before, Limit: limit}, len(before) > 0
}

// Interval is the pause between passes: a tenth of the shortest
// retention, within [1s, 1m], so that a message outlives its retention by
// at most 10% (and by a minute for the day-long defaults); a minute when
// everything is kept forever (the store's upkeep still runs).
func (p Policy) Interval() time.Duration {
	shortest := time.Duration(0)
	for _, d := range []time.Duration{p.Retention, p.RetentionFailed, p.ForwardedAfter} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Minute
	}
	return min(max(shortest/10, time.Second), time.Minute)
}

// Pacer sizes the cleaner's batches and the pauses between them. It is a
// pure state machine: Batch says how many to ask for, Done takes what the
// batch did and says how long to wait and whether the pass goes on.
type Pacer struct {
	// Min and Max bound a batch (messages).
	Min, Max int
	// Target is how long one batch may hold the store: a batch that took
	// longer halves the next, one that took under half of it grows the
	// next by half.
	Target time.Duration
	// MinPause is the least pause between two batches of a pass; Backoff
	// the least pause after a batch that failed (it ends its pass).
	MinPause, Backoff time.Duration

	batch int
	// rate is the pass's pace (messages a second; 0: as fast as the duty
	// allows): see Pass.
	rate float64
}

// Pass starts a pass over eligible messages that should be done within
// interval (when the next pass starts): the batches are spread over it,
// about a fifth faster than eligible/interval. A pass over what became
// eligible since the last one thus purges at the rate messages came to rest
// (the intake's rate, in the long run), and takes no more of the store than
// that; a backlog (after a downtime, or a shorter retention) is purged as
// fast as the duty cap of Done allows.
func (p *Pacer) Pass(eligible int64, interval time.Duration) {
	p.rate = 0
	if interval > 0 {
		p.rate = 1.2 * float64(eligible) / interval.Seconds()
	}
}

// DefaultPacer is the pacing of the embedded store and Postgres alike:
// batches of 100 to 10,000 messages (starting at 500), each aiming at 4 ms
// of the store, at least 4 ms apart, 5 s after a failure. Measured with
// cmd/bench ingest-retention (a node at its full ingest rate with the
// cleaner purging at that rate): the embedded store's one writer runs a
// purge batch after the submits queued with it, in a transaction that the
// submits queued meanwhile join, so a batch's time is added to their
// latency. 10 ms batches took 16% of the
// intake's rate, 20 ms ones half of it. 7 ms batches at least 10 ms apart
// took about 8% on a faster machine, but on a slower one (2026-12-02) the
// cleaner fell behind the intake and the ratio was 0.80-0.82 in two runs;
// 4 ms batches 4 ms apart kept up there (it purged 4.8-5.1k msg/s against
// 4.2-4.4k arriving) at 0.94 and 0.84; 3 ms batches 2 ms apart gave 0.83.
func DefaultPacer() Pacer {
	return Pacer{Min: 100, Max: 10000, Target: 4 * time.Millisecond, MinPause: 4 * time.Millisecond, Backoff: 5 * time.Second, batch: 500}
}

// Batch is the size of the next batch.
func (p *Pacer) Batch() int {
	if p.batch == 0 {
		p.batch = (p.Min + p.Max) / 2
	}
	return min(max(p.batch, p.Min), p.Max)
}

// Done records a batch that asked for `asked`, purged `purged` and took
// `took` (failed: it returned an error). It returns the pause before the
// next batch and whether the pass goes on (a full batch leaves more
// behind); when it does not, the pass is over. A failed batch ends the
// pass, with Backoff as the least pause before the next one: a new pass
// counts again and asks whether this instance still leads, which a pass
// that retried its batch for as long as a failure lasts never did. The
// pause between batches keeps the pass's pace (Pass) and is at least the
// batch's own time (the cleaner holds the store at most about half of the
// time), jittered by ±20% with r, at least MinPause.
func (p *Pacer) Done(asked, purged int, took time.Duration, failed bool, r *rand.Rand) (pause time.Duration, more bool) {
	b := p.Batch()
	switch {
	case failed:
		p.batch = max(p.Min, b/4)
		return p.Backoff, false
	case took > p.Target:
		p.batch = max(p.Min, b/2)
	case took < p.Target/2 && purged == asked:
		p.batch = min(p.Max, b+b/2)
	}
	if purged < asked {
		return 0, false
	}
	pause = took
	if p.rate > 0 {
		pause = max(pause, time.Duration(float64(asked)/p.rate*float64(time.Second))-took)
	}
	pause = time.Duration(float64(pause) * (0.8 + 0.4*r.Float64()))
	return max(pause, p.MinPause), true
}
