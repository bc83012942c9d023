package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Policy decides what happens to a delivery: whether a claimed message may
// be attempted, and what a frontend's verdict turns into. It is pure.
type Policy struct {
	// RetryMin and RetryMax bound the backoff: the wait after attempt n is
	// RetryMin * 2^(n-1), capped at RetryMax, then jittered into [w/2, w].
	RetryMin, RetryMax time.Duration
	// MaxAttempts attempts are made; a retry verdict on the last one fails
	// the message (dead-letter, reason max_attempts). A deferred verdict
	// (messages.DeliveryResult.Deferred: the frontend was busy) is no
	// attempt: it is retried without using one, bounded by Validity alone.
	// Deferrals of an attempt in a row back off as retries do: the k-th
	// waits as a retry of attempt+k-1 would (AfterDeferrals), so that a
	// frontend busy for long is called less and less often, not at the
	// same rate for ever.
	MaxAttempts int
	// Validity counts from the message's submission; once it has passed the
	// message fails with reason expired instead of being attempted.
	Validity time.Duration
}

// Validate reports what is wrong with p.
func (p Policy) Validate() error {
	var errs []error
	if p.RetryMin <= 0 || p.RetryMax < p.RetryMin {
		errs = append(errs, fmt.Errorf("delivery policy: need 0 < RetryMin (%v) <= RetryMax (%v)", p.RetryMin, p.RetryMax))
	}
	if p.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("delivery policy: MaxAttempts %d < 1", p.MaxAttempts))
	}
	if p.Validity <= 0 {
		errs = append(errs, fmt.Errorf("delivery policy: Validity %v must be positive", p.Validity))
	}
	return errors.Join(errs...)
}

// Backoff is the wait after failed attempt n (n >= 1). Jitter spreads the
// retries of a burst that failed together, so that a frontend coming back is
// not hit by all of them at once; keeping the wait within [w/2, w] keeps the
// cap a real cap.
func (p Policy) Backoff(attempt int, rng *rand.Rand) time.Duration {
	w := p.RetryMax
	if attempt < 1 {
		attempt = 1
	}
	if shift := attempt - 1; shift < 62 {
		if d := p.RetryMin << shift; d > 0 && d < p.RetryMax && d>>shift == p.RetryMin {
			w = d
		}
	}
	half := w / 2
	return half + time.Duration(rng.Int64N(int64(w-half)+1))
}

// Expired reports whether m's validity has passed at now: the node's
// Validity from its submission, or the message's own validity_until when
// that is earlier.
func (p Policy) Expired(m messages.Message, now time.Time) bool {
	return !now.Before(m.ExpiresAt(m.SubmittedAt, p.Validity))
}

// Before checks claimed work before it is attempted. When ok is false the
// work must not be attempted and the returned outcome recorded instead: the
// message has expired, or its attempts are used up (a lease that ran out
// counts as an attempt).
func (p Policy) Before(w persistence.Work, now time.Time) (o persistence.Outcome, ok bool) {
	switch {
	case p.Expired(w.Message, now):
		return failed(w.Target, w.MessageID, messages.ReasonExpired, expiredDetail(w.Message, p.Validity)), false
	case w.Message.Attempts > p.MaxAttempts:
		return failed(w.Target, w.MessageID, messages.ReasonMaxAttempts,
			fmt.Sprintf("no verdict after %d attempts", p.MaxAttempts)), false
	}
	return persistence.Outcome{}, true
}

// After turns a frontend's verdict on attempt `attempt` of a message into
// the outcome to record; a deferral is taken for the first of its attempt
// (AfterDeferrals).
func (p Policy) After(target, id string, attempt int, v messages.DeliveryResult, now time.Time, rng *rand.Rand) persistence.Outcome {
	return p.AfterDeferrals(target, id, attempt, 0, v, now, rng)
}

// AfterDeferrals is After for a verdict that follows `deferred` deferrals
// of the same attempt in a row: a deferral that names no wait
// (RetryAfter) then waits as a retry of attempt+deferred would (the
// backoff doubles on with each, up to RetryMax); one that names it waits
// that, or the attempt's backoff when longer. Other verdicts do not read
// deferred.
func (p Policy) AfterDeferrals(target, id string, attempt, deferred int, v messages.DeliveryResult, now time.Time, rng *rand.Rand) persistence.Outcome {
	o := p.after(target, id, attempt, max(deferred, 0), v, now, rng)
	o.Attempt = attempt // what the detail names, kept with its history entry
	o.Named = v.Attempt // a pull ack's: the store tells a stale verdict by it
	o.Resend = v.Resend
	if v.Note != "" {
		o.Detail += "; " + v.Note
	}
	return o
}

func (p Policy) after(target, id string, attempt, deferred int, v messages.DeliveryResult, now time.Time, rng *rand.Rand) persistence.Outcome {
	switch v.Status {
	case messages.Delivered:
		detail := "delivered to " + target
		if attempt > 0 {
			detail += fmt.Sprintf(" (attempt %d)", attempt)
		}
		if len(v.SMSCMessageIDs) > 0 {
			detail += "; SMSC message id " + strings.Join(v.SMSCMessageIDs, ", ")
		}
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: target, MessageID: id,
			Result: persistence.ResultDelivered, Detail: detail, SMSCMessageIDs: v.SMSCMessageIDs}
	case messages.Failed:
		reason := messages.ReasonRejected
		if v.Reason != "" {
			reason += ": " + v.Reason
		}
		return failed(target, id, reason, fmt.Sprintf("rejected by %s: %s", target, orNone(v.Reason)))
	}
	if v.Deferred {
		// Not attempted (the frontend is busy): no attempt is used (the
		// store gives back the one the claim counted), so max_attempts
		// does not apply; Before's expiry still does. The history names
		// the attempt given back: the next claim counts it again, and a
		// claim of another attempt after this entry follows a claim
		// that left no verdict (smppout.ResendNote). When the frontend
		// names no wait, its wait doubles on from the deferrals of the
		// attempt before it: kept at the attempt's backoff, a frontend
		// that keeps answering busy was called at that fixed rate for
		// ever. One that names it (a Retry-After, the SMSC's throttle
		// pause, the submit rate's next slot) is taken at its word, as
		// before: doubled on, a message that kept missing its pacing's
		// slots would wait ever longer while slots went unused.
		step := attempt
		if v.RetryAfter <= 0 {
			step += deferred
		}
		wait := p.retryWait(step, v, rng)
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: target, MessageID: id,
			Result: persistence.ResultRetry, RetryAt: now.Add(wait), Reason: v.Reason, Deferred: true,
			Detail: fmt.Sprintf("not attempted (attempt %d given back): %s busy: %s; retry in %v",
				attempt, target, orNone(v.Reason), wait.Round(time.Millisecond))}
	}
	if attempt >= p.MaxAttempts {
		return failed(target, id, messages.ReasonMaxAttempts,
			fmt.Sprintf("attempt %d of %d failed: %s", attempt, p.MaxAttempts, orNone(v.Reason)))
	}
	wait := p.retryWait(attempt, v, rng)
	return persistence.Outcome{Kind: persistence.WorkDelivery, Target: target, MessageID: id,
		Result: persistence.ResultRetry, RetryAt: now.Add(wait), Reason: v.Reason,
		Detail: fmt.Sprintf("attempt %d failed: %s; retry in %v", attempt, orNone(v.Reason), wait.Round(time.Millisecond))}
}

// retryWait is the wait before a retry verdict v is tried again: the
// backoff after attempt `step` (a deferral's: its attempt plus the
// deferrals of it before), or longer when the frontend asked for longer
// (RetryAfter: a Retry-After, an SMSC's throttle), within RetryMax.
func (p Policy) retryWait(step int, v messages.DeliveryResult, rng *rand.Rand) time.Duration {
	wait := p.Backoff(step, rng)
	if asked := min(v.RetryAfter, p.RetryMax); asked > wait {
		wait = asked
	}
	return wait
}

// expiredDetail says which validity passed.
func expiredDetail(m messages.Message, validity time.Duration) string {
	if m.ValidityUntil != nil && m.ValidityUntil.Before(m.SubmittedAt.Add(validity)) {
		return "expired: not delivered by its validity_until " + m.ValidityUntil.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("expired: not delivered within %v of submission", validity)
}

func failed(target, id, reason, detail string) persistence.Outcome {
	return persistence.Outcome{Kind: persistence.WorkDelivery, Target: target, MessageID: id,
		Result: persistence.ResultFailed, Reason: reason, Detail: detail}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
