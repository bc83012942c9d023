package forward

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Policy is the pure retry policy of forward queues.
type Policy struct {
	// RetryInterval is the forward worker's tick: a healthy peer's queue
	// is looked at this often even when nothing kicks it, and a message
	// the peer refused for now waits this long.
	RetryInterval time.Duration
	// MaxRetries is how many ticks a message may spend forward_queued
	// before it is forward_failed.
	MaxRetries int
	// Batch is the most messages one request carries.
	Batch int
	// InFlight is the most requests under way to one peer.
	InFlight int
}

// DefaultPolicy returns the defaults.
func DefaultPolicy() Policy {
	return Policy{
		// 5s: a peer back from a blip gets its queue within seconds.
		RetryInterval: 5 * time.Second,
		// 50 ticks, about four minutes with the tick above: long enough to
		// ride out a link flap, short enough that an operator hears about
		// a dead peer.
		MaxRetries: 50,
		// 256: one commit at the peer per request keeps its cost near a
		// single insert's.
		Batch: 256,
		// 4: enough to hide a round trip behind the peer's commit, few
		// enough that a peer that slows down is not flooded.
		InFlight: 4,
	}
}

// Validate reports every problem of p.
func (p Policy) Validate() error {
	var errs []error
	if p.RetryInterval <= 0 {
		errs = append(errs, fmt.Errorf("forward: retry interval %v must be positive", p.RetryInterval))
	}
	if p.MaxRetries < 1 {
		errs = append(errs, fmt.Errorf("forward: max retries %d must be at least 1", p.MaxRetries))
	}
	if p.RetryInterval > 0 && p.MaxRetries >= 1 {
		if w, ok := TotalWait(p.MaxRetries, p.RetryInterval); !ok || w > MaxWaitLimit {
			errs = append(errs, fmt.Errorf("forward: max retries %d x retry interval %v is longer than %s",
				p.MaxRetries, p.RetryInterval, MaxWaitLimitText))
		}
	}
	if p.Batch < 1 || p.Batch > messages.MaxForwardBatch {
		errs = append(errs, fmt.Errorf("forward: batch %d must be 1-%d", p.Batch, messages.MaxForwardBatch))
	}
	if p.InFlight < 1 {
		errs = append(errs, fmt.Errorf("forward: in flight %d must be at least 1", p.InFlight))
	}
	return errors.Join(errs...)
}

// MaxWaitLimit is the longest MaxWait a policy may have: ten years, far
// past any outage a queue should ride out, and far below the ~292 years a
// time.Duration holds, so that the sums built on it (the redelivery
// horizon) cannot overflow either.
const MaxWaitLimit = 10 * 365 * 24 * time.Hour

// MaxWaitLimitText is MaxWaitLimit as errors and docs say it.
const MaxWaitLimitText = "10 years (87600h)"

// TotalWait is retries x interval, and false when the product does not
// fit a time.Duration. Both must be positive.
func TotalWait(retries int, interval time.Duration) (time.Duration, bool) {
	if retries <= 0 || interval <= 0 {
		return 0, false
	}
	if int64(retries) > math.MaxInt64/int64(interval) {
		return math.MaxInt64, false
	}
	return time.Duration(retries) * interval, true
}

// MaxWait is how long a message may stay forward_queued: MaxRetries x
// RetryInterval. It never wraps: a product past a time.Duration's range
// is the longest duration (Validate refuses anything past MaxWaitLimit;
// a wrapped product could be negative and fail every queued message at
// once).
func (p Policy) MaxWait() time.Duration {
	if p.MaxRetries <= 0 || p.RetryInterval <= 0 {
		return 0
	}
	w, _ := TotalWait(p.MaxRetries, p.RetryInterval)
	return w
}

// Tick is how often a queue ticks: every RetryInterval, or sooner on a
// store other instances share (idlePoll, the fence's, is positive): they
// commit work the queue owns without kicking it.
func (p Policy) Tick(idlePoll time.Duration) time.Duration {
	if idlePoll > 0 {
		return min(p.RetryInterval, idlePoll)
	}
	return p.RetryInterval
}

// QueuedBefore is the cutoff of FailForwards at now: messages queued
// before it have waited MaxWait. The count of ticks is derived from
// queued_at, so no queued row is rewritten per tick.
func (p Policy) QueuedBefore(now time.Time) time.Time { return now.Add(-p.MaxWait()) }

// Verdict is what to record for one forwarded message.
type Verdict struct {
	// Outcome is set for work to complete (forwarded, forward_queued or
	// forward_failed).
	Outcome *persistence.Outcome
	// Status is set instead when the peer's answer already holds the final
	// state (a duplicate of a message it has delivered or failed).
	Status *persistence.StatusUpdate
}

// transientCodes are per-message refusals that may pass later.
var transientCodes = map[string]bool{messages.CodeUnavailable: true, messages.CodeOverloaded: true, messages.CodeInternal: true}

// Judge turns the peer's result for one message into a verdict.
func (p Policy) Judge(now time.Time, peer string, w persistence.Work, r messages.ForwardResult) Verdict {
	o := persistence.Outcome{Kind: persistence.WorkForward, Target: peer, MessageID: w.MessageID}
	switch {
	case r.Error == nil && (r.State == messages.StateDelivered || r.State == messages.StateFailed):
		res := persistence.ResultDelivered
		if r.State == messages.StateFailed {
			res = persistence.ResultFailed
		}
		return Verdict{Status: &persistence.StatusUpdate{ID: w.MessageID, From: peer, Result: res, Reason: r.Reason, At: now}}
	case r.Error == nil:
		o.Result = persistence.ResultDelivered
		o.Detail = "accepted by " + peer
		if r.Duplicate {
			o.Detail += " (already held there)"
		}
	case r.Error.Code == messages.CodeCapabilityMissing:
		o.Result, o.Reason = persistence.ResultFailed, messages.ReasonPeerUnsupported
		o.Detail = fmt.Sprintf("not forwarded to %s: %s; upgrade it, then resubmit", peer, r.Error.Message)
	case transientCodes[r.Error.Code]:
		o.Result, o.RetryAt = persistence.ResultRetry, now.Add(p.RetryInterval)
		o.Detail = fmt.Sprintf("%s refused for now: %s", peer, r.Error.Error())
	default:
		o.Result, o.Reason = persistence.ResultFailed, messages.ReasonPeerRejected
		o.Detail = fmt.Sprintf("%s refused it: %s", peer, r.Error.Error())
	}
	return Verdict{Outcome: &o}
}

// Unsent is the outcome of work whose request did not complete: it waits
// in forward_queued, due at once, because the queue stops sending until
// the peer is healthy again (which is what gates the retry).
func (p Policy) Unsent(now time.Time, peer string, w persistence.Work, err error) persistence.Outcome {
	return persistence.Outcome{
		Kind: w.Kind, Target: peer, MessageID: w.MessageID,
		Result: persistence.ResultRetry, RetryAt: now,
		Detail: fmt.Sprintf("%s unreachable: %v", peer, err),
	}
}
