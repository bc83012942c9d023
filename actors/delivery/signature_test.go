package delivery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSignAndVerify(t *testing.T) {
	const secret = "whsec-0123456789abcdef"
	at := time.Unix(1767225600, 0)
	body := []byte(`{"id":"m-1","message_body":"hi"}`)
	sig := Sign(secret, at, body)
	if !strings.HasPrefix(sig, "t=1767225600,v1=") || len(sig) != len("t=1767225600,v1=")+64 {
		t.Fatalf("signature %q", sig)
	}
	// The HMAC-SHA256 of "1767225600." + body keyed with the secret, as
	// a receiver computes it (this one by Python's hmac module).
	if want := "t=1767225600,v1=f5afc0aaf5ce215ebc4593dd853f320801f077642da6ca16b0e25787559de586"; sig != want {
		t.Fatalf("Sign = %q, want %q", sig, want)
	}
	if got, err := Verify(secret, sig, body, at.Add(4*time.Minute), DefaultTolerance); err != nil || !got.Equal(at) {
		t.Errorf("Verify of a good signature: %v, %v", got, err)
	}
	for name, c := range map[string]struct {
		secret, header string
		body           []byte
		now            time.Time
		want           error
	}{
		"another secret":     {"other-secret-0123456", sig, body, at, ErrBadSignature},
		"another body":       {secret, sig, []byte(`{"id":"m-2","message_body":"hi"}`), at, ErrBadSignature},
		"too old":            {secret, sig, body, at.Add(6 * time.Minute), ErrStale},
		"from the future":    {secret, sig, body, at.Add(-6 * time.Minute), ErrStale},
		"no header":          {secret, "", body, at, ErrNoSignature},
		"no v1":              {secret, "t=1767225600", body, at, ErrNoSignature},
		"bad time":           {secret, "t=soon,v1=" + strings.Repeat("0", 64), body, at, ErrNoSignature},
		"another time, same": {secret, strings.Replace(sig, "t=1767225600", "t=1767225601", 1), body, at, ErrBadSignature},
	} {
		if _, err := Verify(c.secret, c.header, c.body, c.now, DefaultTolerance); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// A header with two v1 (the node signs with one; a receiver accepts
	// any that matches, docs/api.md): either passes.
	two := "t=1767225600,v1=" + strings.Repeat("ab", 32) + "," + strings.TrimPrefix(sig, "t=1767225600,")
	if _, err := Verify(secret, two, body, at, DefaultTolerance); err != nil {
		t.Errorf("two v1, one good: %v", err)
	}
}

// TestSignTimes: a message's calls within one second are signed a second
// apart (a deferral's call again would otherwise carry the signature of
// the one before: a replay to its receiver); other messages, and calls a
// second or more apart, take the clock's time; what no later call can
// collide with is forgotten as the table grows.
func TestSignTimes(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 300_000_000)
	var s signTimes
	for i, c := range []struct {
		id   string
		at   time.Time
		want int64
	}{
		{"a", t0, t0.Unix()},
		{"a", t0.Add(400 * time.Millisecond), t0.Unix() + 1},
		{"a", t0.Add(500 * time.Millisecond), t0.Unix() + 2},
		{"b", t0.Add(500 * time.Millisecond), t0.Unix()},
		{"a", t0.Add(5 * time.Second), t0.Unix() + 5},
	} {
		if got := s.at(c.id, c.at).Unix(); got != c.want {
			t.Errorf("call %d (%s at %v): signed at %d, want %d", i, c.id, c.at.Sub(t0), got, c.want)
		}
	}
	later := t0.Add(time.Minute)
	for i := range 3 * signSweep {
		s.at(fmt.Sprint("m", i), later)
	}
	if n := len(s.last); n > 3*signSweep+2 || s.last["a"] != 0 || s.last["b"] != 0 {
		t.Errorf("%d entries kept, a %d, b %d: the messages of a minute ago are not forgotten", n, s.last["a"], s.last["b"])
	}
}
