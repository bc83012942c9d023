package ring

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestReconnectValidate(t *testing.T) {
	if err := (Reconnect{MaxAttempts: 3, Min: time.Second, Max: time.Minute, Jitter: 0.2}).Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	err := (Reconnect{MaxAttempts: 0, Min: 0, Max: -1, Jitter: 1.5}).Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, f := range []string{"MaxAttempts: ", "Min: ", "Max: must be at least Min", "Jitter: "} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("error %q names a flag", err)
	}
	if err := DefaultReconnect().Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}

func TestReconnectDelayTable(t *testing.T) {
	r := Reconnect{MaxAttempts: 5, Min: 100 * time.Millisecond, Max: time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	for attempt, want := range map[int]time.Duration{0: 100 * time.Millisecond, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 1000: time.Second} {
		if got := r.Delay(attempt, rng); got != want {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, want)
		}
	}
	if r.GiveUp(4) || !r.GiveUp(5) {
		t.Error("GiveUp: want true from MaxAttempts failures")
	}
}

func TestReconnectDelayBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "min"))
		r := Reconnect{
			MaxAttempts: 1,
			Min:         lo,
			Max:         lo + time.Duration(rapid.Int64Range(0, 1<<62).Draw(t, "extra")),
			Jitter:      rapid.Float64Range(0, 1).Draw(t, "jitter"),
		}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		attempt := rapid.IntRange(1, 200).Draw(t, "attempt")
		// The reference: Min·2^(attempt-1) capped at Max, exactly.
		b := new(big.Int).Lsh(big.NewInt(int64(r.Min)), uint(attempt-1))
		base := r.Max
		if b.Cmp(big.NewInt(int64(r.Max))) < 0 {
			base = time.Duration(b.Int64())
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "s1"), rapid.Uint64().Draw(t, "s2")))
		d := r.Delay(attempt, rng)
		// The floor base·(1−Jitter) computed exactly (a float64 floor can
		// round above base: CI once drew base ≈ 2^62, Jitter 2^-54), less
		// what Delay's float64 rounding may take off: a few parts in 2^53
		// of base, bounded by base/2^50.
		exact := new(big.Float).SetPrec(200).SetInt64(int64(base))
		exact.Mul(exact, new(big.Float).SetPrec(200).Sub(big.NewFloat(1), big.NewFloat(r.Jitter)))
		floor, _ := exact.Int64()
		floor -= int64(base)>>50 + 1
		if int64(d) < max(floor, 1) || d > base || d > r.Max || d <= 0 {
			t.Fatalf("Delay(%d) = %v, want in [%v, %v] (max %v)", attempt, d, time.Duration(floor), base, r.Max)
		}
	})
}
