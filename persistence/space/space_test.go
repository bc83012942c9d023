package space

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseReserve(t *testing.T) {
	for in, want := range map[string]Reserve{
		"256MiB": {Bytes: 256 << 20}, "1GiB": {Bytes: 1 << 30}, "500MB": {Bytes: 500e6}, "0": {},
		"4096": {Bytes: 4096}, "5%": {Percent: 5}, "0.5 %": {Percent: 0.5}, " 2 GiB ": {Bytes: 2 << 30},
	} {
		got, err := ParseReserve(in)
		if err != nil || got != want {
			t.Errorf("ParseReserve(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1MiB", "1.5GiB", "91%", "-2%", "x%", "10PiB"} {
		if _, err := ParseReserve(in); err == nil {
			t.Errorf("ParseReserve(%q) accepted", in)
		}
	}
	for _, r := range []Reserve{{Bytes: 256 << 20}, {Percent: 7.5}, {Bytes: 1000}} {
		back, err := ParseReserve(r.String())
		if err != nil || back != r {
			t.Errorf("%+v -> %q -> %+v, %v", r, r.String(), back, err)
		}
	}
}

func TestReserveNeed(t *testing.T) {
	if n := (Reserve{Percent: 10}).Need(1000); n != 100 {
		t.Errorf("10%% of 1000 = %d", n)
	}
	if n := (Reserve{Bytes: 42}).Need(1000); n != 42 {
		t.Errorf("42 bytes of 1000 = %d", n)
	}
}

func TestGate(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	g := NewGate(Reserve{Bytes: 100 << 20})
	if shut, _ := g.Shut(now); shut {
		t.Fatal("a new gate is shut")
	}
	step := func(what string, free uint64, wantShut bool, wantWhy string) {
		t.Helper()
		g.Observe(free, 1<<40)
		shut, why := g.Shut(now)
		if shut != wantShut || !strings.Contains(why, wantWhy) {
			t.Errorf("%s: shut %v (%q), want %v (%q)", what, shut, why, wantShut, wantWhy)
		}
	}
	step("room", 200<<20, false, "")
	step("below the reserve", 99<<20, true, "99MiB free on the store's file system, below the reserve of 100MiB (--min-free-space 100MiB)")
	// Inside the margin the reason gives the free space now, not the figure
	// that shut the gate (a /readyz read while the cleaner frees space).
	step("at the reserve, inside the margin", 100<<20, true,
		"100MiB free on the store's file system, not yet above the reserve of 100MiB plus its margin of 5MiB (--min-free-space 100MiB)")
	step("further inside the margin", 103<<20, true, "103MiB free on the store's file system, not yet above the reserve of 100MiB plus its margin of 5MiB")
	step("past the margin", 106<<20, false, "")
	step("at the reserve again: open", 100<<20, false, "")

	// A write that failed for lack of space shuts it for Hold, whatever
	// the free space says.
	g.Failed(now, errors.New("database or disk is full"))
	step("after a failed write", 500<<20, true, "the store could not write: database or disk is full")
	now = now.Add(Hold)
	step("after the hold", 500<<20, false, "")
}

// TestGateReasonIsInOneUnit: the reason printed the free space in the
// largest unit dividing it and the reserve, when no unit divided it, in
// bare bytes: "79031040KiB free on the store's file system, below the
// reserve of 243497856614 (--min-free-space 90%)". Both are for people,
// in one human unit each.
func TestGateReasonIsInOneUnit(t *testing.T) {
	g := NewGate(Reserve{Bytes: 243497856614})
	g.Observe(79031040<<10, 1<<40)
	want := "75.3GiB free on the store's file system, below the reserve of 226.7GiB (--min-free-space 243497856614)"
	if _, why := g.Shut(time.Now()); why != want {
		t.Errorf("reason %q, want %q", why, want)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 100 << 20: "100MiB",
		100<<20 - 1: "99.9MiB", 5<<30 + 1<<29: "5.5GiB", 3 << 40: "3TiB", 2048 << 40: "2048TiB",
		1<<63 - 1: "8388607.9TiB",
	} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestGateHoldSurvivesAClockStepBack: a clock stepped back after a
// failed write (NTP correcting a clock that ran ahead) shuts the gate for
// Hold from the step, not for the step's length more (the sim found a
// node refusing every message for minutes after its disk had room).
func TestGateHoldSurvivesAClockStepBack(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	g := NewGate(Reserve{})
	g.Observe(500<<20, 1<<40)
	g.Failed(now, errors.New("database or disk is full"))
	back := now.Add(-4 * time.Minute)
	if shut, _ := g.Shut(back); !shut {
		t.Fatal("the gate opened at once after the clock stepped back")
	}
	if shut, why := g.Shut(back.Add(Hold)); shut {
		t.Fatalf("the gate is still shut %v after the clock stepped back 4m: %s", Hold, why)
	}
	// Forward steps keep ending the hold early, as before.
	g.Failed(now, errors.New("database or disk is full"))
	if shut, _ := g.Shut(now.Add(time.Hour)); shut {
		t.Fatal("the gate is shut an hour later")
	}
}

func TestGateChangedOnce(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	g := NewGate(Reserve{Bytes: 10 << 20})
	var got []bool
	for _, free := range []uint64{100 << 20, 5 << 20, 4 << 20, 3 << 20, 100 << 20, 100 << 20, 5 << 20} {
		g.Observe(free, 1<<40)
		if changed, shut, _ := g.Changed(now); changed {
			got = append(got, shut)
		}
	}
	if want := []bool{true, false, true}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("transitions %v, want %v", got, want)
	}
}

func TestUsage(t *testing.T) {
	free, total, err := Usage(t.TempDir())
	if err != nil || total == 0 || free > total {
		t.Errorf("Usage = %d of %d, %v", free, total, err)
	}
	if _, _, err := Usage("/does/not/exist"); err == nil {
		t.Error("Usage of a missing directory worked")
	}
}
