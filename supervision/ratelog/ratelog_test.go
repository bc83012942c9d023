package ratelog

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Limiter{Burst: 2, Window: 10 * time.Second}
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0}, {time.Second, true, 0}, {2 * time.Second, false, 0}, {3 * time.Second, false, 0},
		{10 * time.Second, true, 2}, // a new window: the two before are reported
		{11 * time.Second, true, 0}, {12 * time.Second, false, 0},
	}
	for _, s := range steps {
		ok, n := l.Allow(t0.Add(s.at))
		if ok != s.ok || n != s.suppressed {
			t.Fatalf("at %v: Allow = %v, %d; want %v, %d", s.at, ok, n, s.ok, s.suppressed)
		}
	}
	if n := l.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
	if n := l.Pending(); n != 0 {
		t.Fatalf("Pending after Pending = %d, want 0", n)
	}
}

func TestLogSumsWhatItSuppresses(t *testing.T) {
	log, buf := logtest.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var timer func()
	g, err := New(Config{Logger: log, Msg: "message failed", Summary: "message failures not logged", Burst: 2, Window: time.Minute,
		Now: func() time.Time { return now },
		AfterFunc: func(d time.Duration, f func()) func() bool {
			if d <= 0 || d > time.Minute {
				t.Errorf("summary scheduled in %v, want by the window's end", d)
			}
			timer = f
			return func() bool { timer = nil; return true }
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		now = now.Add(time.Second)
		g.Write("id", i)
	}
	if got := buf.Records(t, "message failed"); len(got) != 2 {
		t.Fatalf("%d lines written, want 2", len(got))
	}
	if timer == nil {
		t.Fatal("no summary scheduled")
	}
	timer() // the window ends without another line
	sum := buf.Records(t, "message failures not logged")
	if len(sum) != 1 || sum[0]["suppressed"] != float64(3) || sum[0]["window"] != "1m0s" {
		t.Fatalf("summary %v, want one of 3", sum)
	}
	now = now.Add(time.Minute)
	g.Write("id", 9)
	g.Write("id", 10)
	g.Write("id", 11)
	lines := buf.Records(t, "message failed")
	if len(lines) != 4 || lines[2]["suppressed"] != nil {
		t.Fatalf("lines %v: the count was reported already", lines)
	}
	g.Close()
	if sum = buf.Records(t, "message failures not logged"); len(sum) != 2 || sum[1]["suppressed"] != float64(1) {
		t.Fatalf("Close reported %v, want the pending 1", sum)
	}
	g.Write("id", 12)
	if n := len(buf.Records(t, "message failed")); n != 4 {
		t.Fatalf("a closed Log wrote: %d lines", n)
	}
}
