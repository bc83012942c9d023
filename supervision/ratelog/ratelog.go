// Package ratelog writes log lines that can come in floods (every message
// that fails, every refused API token) at a bounded rate: at most Burst
// lines of one kind per Window, the rest counted. The next line written
// carries the count ("suppressed": n), and a line of its own reports a
// count still pending once its window has passed, so nothing is hidden,
// only summed.
//
// Limiter is the pure core (no clock, no goroutines); Log is the shell
// around a *slog.Logger and a timer.
package ratelog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Limiter allows at most Burst lines per Window. Windows are fixed: one
// starts at the first line after the previous one ended. The zero value is
// not usable; set Burst and Window.
type Limiter struct {
	Burst  int
	Window time.Duration

	start      time.Time
	used       int
	suppressed int
}

// Allow reports whether a line may be written at now and, when it may, how
// many lines were suppressed before it (the count is then reset).
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	if l.start.IsZero() || !now.Before(l.start.Add(l.Window)) {
		l.start, l.used = now, 0
	}
	if l.used >= l.Burst {
		l.suppressed++
		return false, 0
	}
	l.used++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// Pending returns the count of lines suppressed and not reported yet, and
// resets it: the shell reports it when the window ends without another
// line.
func (l *Limiter) Pending() int {
	n := l.suppressed
	l.suppressed = 0
	return n
}

// WindowEnd is when the current window ends (zero before the first line).
func (l *Limiter) WindowEnd() time.Time {
	if l.start.IsZero() {
		return time.Time{}
	}
	return l.start.Add(l.Window)
}

// Config configures a Log.
type Config struct {
	Logger *slog.Logger
	Level  slog.Level
	// Msg is the message of every line; Summary the message of the line
	// that reports a count pending at the end of a window.
	Msg, Summary string
	// Burst lines per Window.
	Burst  int
	Window time.Duration
	// Now and AfterFunc are the clock (time.Now and time.AfterFunc when
	// nil); AfterFunc returns a function that cancels the call.
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) (cancel func() bool)
}

// Log writes one kind of line at a bounded rate. Safe for concurrent use.
type Log struct {
	cfg     Config
	mu      sync.Mutex
	lim     Limiter
	pending func() bool // the summary scheduled, or nil
	closed  bool
}

// New returns a Log.
func New(cfg Config) (*Log, error) {
	if cfg.Logger == nil || cfg.Msg == "" || cfg.Summary == "" || cfg.Burst < 1 || cfg.Window <= 0 {
		return nil, errors.New("ratelog: Logger, Msg, Summary, a positive Burst and Window are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return &Log{cfg: cfg, lim: Limiter{Burst: cfg.Burst, Window: cfg.Window}}, nil
}

// Write writes a line with attrs unless the window's burst is used up.
func (g *Log) Write(attrs ...any) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	now := g.cfg.Now()
	ok, suppressed := g.lim.Allow(now)
	if !ok && g.pending == nil {
		// Report the count when the window ends, should no line come.
		g.pending = g.cfg.AfterFunc(g.lim.WindowEnd().Sub(now), g.flush)
	}
	g.mu.Unlock()
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	g.cfg.Logger.Log(context.Background(), g.cfg.Level, g.cfg.Msg, attrs...)
}

// flush reports the count suppressed in a window that ended without
// another line.
func (g *Log) flush() {
	g.mu.Lock()
	g.pending = nil
	n := 0
	if !g.closed {
		n = g.lim.Pending()
	}
	g.mu.Unlock()
	if n > 0 {
		g.cfg.Logger.Log(context.Background(), g.cfg.Level, g.cfg.Summary, "suppressed", n, "window", g.cfg.Window.String())
	}
}

// Close reports a pending count at once and stops the timer.
func (g *Log) Close() {
	g.mu.Lock()
	if g.pending != nil {
		g.pending()
		g.pending = nil
	}
	n := g.lim.Pending()
	g.closed = true
	g.mu.Unlock()
	if n > 0 {
		g.cfg.Logger.Log(context.Background(), g.cfg.Level, g.cfg.Summary, "suppressed", n, "window", g.cfg.Window.String())
	}
}
