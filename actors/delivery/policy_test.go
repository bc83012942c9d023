package delivery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

var testPolicy = Policy{RetryMin: time.Minute, RetryMax: 8 * time.Minute, MaxAttempts: 5, Validity: 24 * time.Hour}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute, 8 * time.Minute}
	for i, w := range want {
		attempt := i + 1
		for range 50 {
			got := testPolicy.Backoff(attempt, rng)
			if got < w/2 || got > w {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", attempt, got, w/2, w)
			}
		}
	}
	if got := testPolicy.Backoff(1000, rng); got > testPolicy.RetryMax || got < testPolicy.RetryMax/2 {
		t.Fatalf("Backoff(1000) = %v overflowed the cap", got)
	}
}

// TestBackoffBounds: whatever the settings and attempt, the wait is within
// [w/2, w] of the reference doubling capped at max, and never above max.
func TestBackoffBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "min"))
		hi := lo + time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "extra"))
		n := rapid.IntRange(1, 200).Draw(t, "attempt")
		p := Policy{RetryMin: lo, RetryMax: hi, MaxAttempts: 1, Validity: time.Hour}
		ref := lo
		for i := 1; i < n && ref < hi; i++ {
			ref *= 2
		}
		ref = min(ref, hi)
		got := p.Backoff(n, rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0)))
		if got < ref/2 || got > ref || got > hi {
			t.Fatalf("Backoff(%d) with [%v,%v] = %v, reference %v", n, lo, hi, got, ref)
		}
	})
}

func TestBefore(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	work := func(attempts int, submitted time.Time) persistence.Work {
		return persistence.Work{Target: "fe", MessageID: "m1",
			Message: messages.Message{ID: "m1", Attempts: attempts, SubmittedAt: submitted}}
	}
	cases := []struct {
		name   string
		w      persistence.Work
		ok     bool
		reason string
	}{
		{"first attempt", work(1, now), true, ""},
		{"last attempt", work(5, now), true, ""},
		{"attempts used up", work(6, now), false, messages.ReasonMaxAttempts},
		{"just valid", work(1, now.Add(-24*time.Hour+time.Microsecond)), true, ""},
		{"expired", work(1, now.Add(-24*time.Hour)), false, messages.ReasonExpired},
		{"expired wins over attempts", work(9, now.Add(-48*time.Hour)), false, messages.ReasonExpired},
	}
	for _, c := range cases {
		o, ok := testPolicy.Before(c.w, now)
		if ok != c.ok || (!ok && (o.Result != persistence.ResultFailed || o.Reason != c.reason || o.MessageID != "m1")) {
			t.Errorf("%s: Before = %+v, %v; want ok=%v reason %q", c.name, o, ok, c.ok, c.reason)
		}
	}
}

func TestAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		name    string
		attempt int
		v       messages.DeliveryResult
		result  persistence.Result
		reason  string
	}{
		{"delivered", 1, messages.DeliveryResult{Status: messages.Delivered}, persistence.ResultDelivered, ""},
		{"rejected", 1, messages.DeliveryResult{Status: messages.Failed, Reason: "unknown subscriber"}, persistence.ResultFailed, "rejected: unknown subscriber"},
		{"rejected without reason", 2, messages.DeliveryResult{Status: messages.Failed}, persistence.ResultFailed, "rejected"},
		{"retry", 1, messages.DeliveryResult{Status: messages.Retry, Reason: "503"}, persistence.ResultRetry, "503"},
		{"retry on the last attempt", 5, messages.DeliveryResult{Status: messages.Retry}, persistence.ResultFailed, messages.ReasonMaxAttempts},
	}
	for _, c := range cases {
		o := testPolicy.After("fe", "m1", c.attempt, c.v, now, rng)
		if o.Result != c.result || o.Reason != c.reason || o.Target != "fe" || o.MessageID != "m1" || o.Kind != persistence.WorkDelivery {
			t.Errorf("%s: After = %+v; want %s reason %q", c.name, o, c.result, c.reason)
		}
		if o.Result == persistence.ResultRetry {
			if d := o.RetryAt.Sub(now); d < 30*time.Second || d > time.Minute {
				t.Errorf("%s: retry in %v, want within [30s, 1m]", c.name, d)
			}
		}
		if o.Detail == "" || strings.Contains(o.Detail, "%!") {
			t.Errorf("%s: bad detail %q", c.name, o.Detail)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := testPolicy.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Policy{RetryMin: time.Minute, RetryMax: time.Second}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "RetryMin") || !strings.Contains(err.Error(), "MaxAttempts") || !strings.Contains(err.Error(), "Validity") {
		t.Fatalf("Validate() = %v; want every problem", err)
	}
}

// An smpp frontend's verdict: a delivered one carries the SMSC's ids into
// the outcome and its detail; a note is added to any outcome's detail.
func TestAfterSMSCAndNote(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	o := testPolicy.After("smsc", "m1", 2, messages.DeliveryResult{Status: messages.Delivered, SMSCMessageIDs: []string{"a1", "a2"},
		Note: "resent"}, now, rng)
	if strings.Join(o.SMSCMessageIDs, ",") != "a1,a2" || o.Detail != "delivered to smsc (attempt 2); SMSC message id a1, a2; resent" {
		t.Fatalf("delivered: %+v", o)
	}
	o = testPolicy.After("smsc", "m1", 2, messages.DeliveryResult{Status: messages.Retry, Reason: "ESME_RTHROTTLED", Note: "resent"}, now, rng)
	if o.SMSCMessageIDs != nil || !strings.HasPrefix(o.Detail, "attempt 2 failed: ESME_RTHROTTLED; retry in ") || !strings.HasSuffix(o.Detail, "; resent") {
		t.Fatalf("retry: %+v", o)
	}
}

// TestAfterHonoursRetryAfter: a retry verdict's RetryAfter (a webhook's
// 429 or 503 Retry-After) delays the next attempt past the backoff, up to
// the policy's longest wait; a shorter one leaves the backoff.
func TestAfterHonoursRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		asked    time.Duration
		min, max time.Duration
	}{
		{0, testPolicy.RetryMin / 2, testPolicy.RetryMin},
		{time.Second, testPolicy.RetryMin / 2, testPolicy.RetryMin},
		{testPolicy.RetryMax / 2, testPolicy.RetryMax / 2, testPolicy.RetryMax / 2},
		{100 * testPolicy.RetryMax, testPolicy.RetryMax, testPolicy.RetryMax},
	} {
		o := testPolicy.After("fe", "m1", 1, messages.DeliveryResult{Status: messages.Retry, RetryAfter: c.asked}, now, rng)
		if d := o.RetryAt.Sub(now); o.Result != persistence.ResultRetry || d < c.min || d > c.max {
			t.Errorf("Retry-After %v: %s in %v, want a retry in [%v, %v]", c.asked, o.Result, d, c.min, c.max)
		}
	}
}

// TestAfterDeferred: a deferred verdict (the frontend was busy, the
// message not attempted) is a retry that uses no attempt, on the last
// attempt too (max_attempts counts real attempts only), at the wait a
// retry of that attempt would get (the backoff, or the frontend's ask
// when longer, within RetryMax); its history says it was not attempted.
// Expiry still ends it (Before), and it counts as deferred, not retry.
func TestAfterDeferred(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		attempt  int
		asked    time.Duration
		min, max time.Duration
	}{
		{1, 0, testPolicy.RetryMin / 2, testPolicy.RetryMin},
		{testPolicy.MaxAttempts, 0, testPolicy.RetryMax / 2, testPolicy.RetryMax},
		{testPolicy.MaxAttempts + 3, 0, testPolicy.RetryMax / 2, testPolicy.RetryMax},
		{1, 4 * time.Minute, 4 * time.Minute, 4 * time.Minute},
		{2, time.Hour, testPolicy.RetryMax, testPolicy.RetryMax},
	} {
		v := messages.DeliveryResult{Status: messages.Retry, Reason: "throttled (ESME_RTHROTTLED)", RetryAfter: c.asked, Deferred: true}
		o := testPolicy.After("fe", "m1", c.attempt, v, now, rng)
		d := o.RetryAt.Sub(now)
		if o.Result != persistence.ResultRetry || !o.Deferred || d < c.min || d > c.max || o.Reason != v.Reason {
			t.Errorf("attempt %d, asked %v: %+v (in %v); want a deferred retry in [%v, %v]", c.attempt, c.asked, o, d, c.min, c.max)
		}
		if want := fmt.Sprintf("not attempted (attempt %d given back): fe busy: throttled (ESME_RTHROTTLED); retry in %v",
			c.attempt, d.Round(time.Millisecond)); o.Detail != want {
			t.Errorf("attempt %d: detail %q, want %q", c.attempt, o.Detail, want)
		}
		if got := disposition(o); got != "deferred" {
			t.Errorf("attempt %d: counted as %q, want deferred", c.attempt, got)
		}
	}
	m := messages.Message{ID: "m1", SubmittedAt: now.Add(-testPolicy.Validity), Attempts: 1}
	if o, ok := testPolicy.Before(persistence.Work{MessageID: "m1", Target: "fe", Message: m}, now); ok || o.Reason != messages.ReasonExpired {
		t.Errorf("Before on a message past its validity: %+v, %v; want it failed, expired", o, ok)
	}
	if got := disposition(testPolicy.After("fe", "m1", 1, messages.DeliveryResult{Status: messages.Retry}, now, rng)); got != "retry" {
		t.Errorf("an ordinary retry counted as %q", got)
	}
}
