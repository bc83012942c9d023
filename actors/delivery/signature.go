package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signed webhooks (docs/api.md, "Signed webhooks"). A webhook frontend
// with a secret gets every call signed, the way Stripe and GitHub sign
// theirs:
//
//	X-Switchboard-Signature: t=1767225600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// t is the time of the call in unix seconds; v1 is the hex HMAC-SHA256,
// keyed with the secret, of t, a '.', and the body exactly as sent. The
// receiver recomputes it over the raw body, refuses a t further than a
// tolerance from its clock (5 minutes), and refuses a signature it has
// seen within that tolerance: a replay. The node signs each attempt
// afresh, so its own retries are never replays.

// SignatureHeader carries the signature.
const SignatureHeader = "X-Switchboard-Signature"

// DefaultTolerance is how far a signature's time may be from the
// receiver's clock: wide enough for clock skew and a slow network, narrow
// enough that a receiver remembers every signature of the window.
const DefaultTolerance = 5 * time.Minute

// Sign is the header value of body sent at t with secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no valid X-Switchboard-Signature")
	ErrBadSignature = errors.New("the signature does not match the body")
	ErrStale        = errors.New("the signature's time is outside the tolerance")
)

// Verify checks header (the X-Switchboard-Signature value) against body
// and secret at now, and returns the signature's time. It checks the
// time and the HMAC; remembering signatures to refuse replays is the
// receiver's: it keeps the signatures of the tolerance window.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) (time.Time, error) {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t":
			ts = v
		case k == "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return time.Time{}, ErrNoSignature
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return at, fmt.Errorf("%w (%v from now)", ErrStale, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return at, nil
		}
	}
	return at, ErrBadSignature
}

// signTimes gives webhook calls the times they are signed with. A
// signature is of the time in whole seconds and the body, and a deferred
// message (a 429: not attempted, its attempt given back) is called again
// with the same body: a call within the second of the one before carried
// its very signature, which a receiver that refuses a signature it has
// seen (docs/api.md) answers 401, failing the message. So a message's
// call is signed a second after its last one at least (a second or so
// ahead of the clock at most, well within DefaultTolerance). It is shared
// by a node's workers (a retired worker's successor calls the same
// messages); instances of a site keep their own, which a deferral's next
// call, claimed by another instance within the same second, escapes.
type signTimes struct {
	mu sync.Mutex
	// last is the unix second of each message's last signature; kept is
	// its size after the last sweep (see at).
	last map[string]int64
	kept int
}

// at is the time to sign message id's call made at now with.
func (s *signTimes) at(id string, now time.Time) time.Time {
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]int64{}
	}
	if l, ok := s.last[id]; ok && sec <= l {
		sec = l + 1
	}
	// A message last signed before this second cannot collide with a
	// later call: forgotten, in sweeps as the map doubles (amortised
	// constant time a call).
	if len(s.last) >= max(signSweep, 2*s.kept) {
		for k, v := range s.last {
			if v < now.Unix() {
				delete(s.last, k)
			}
		}
		s.kept = len(s.last)
	}
	s.last[id] = sec
	return time.Unix(sec, 0)
}

// signSweep is the least size of signTimes at which it forgets.
const signSweep = 1024
