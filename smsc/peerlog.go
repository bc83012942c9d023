package smsc

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
)

// The rate of the lines an ESME's input makes (a PDU refused, a response
// to nothing, a bind refused, a session that ends): each kind at most
// peerLogBurst per peerLogWindow over all sessions, then counted, as the
// API's refusals. A peer makes them as fast as it writes, before any
// bind.
const (
	peerLogBurst  = 10
	peerLogWindow = time.Minute
)

// peerLogs are the listener's rate-bounded lines, one ratelog.Log per
// message and level.
type peerLogs struct {
	log   *slog.Logger
	clock clock.Clock

	mu     sync.Mutex
	by     map[peerLine]*ratelog.Log
	closed bool
}

type peerLine struct {
	msg   string
	level slog.Level
}

func newPeerLogs(log *slog.Logger, c clock.Clock) *peerLogs {
	return &peerLogs{log: log, clock: c, by: map[peerLine]*ratelog.Log{}}
}

// write writes a line of msg at level with attrs, unless its kind's
// burst is used up.
func (p *peerLogs) write(level slog.Level, msg string, attrs ...any) {
	k := peerLine{msg, level}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	g := p.by[k]
	if g == nil {
		// The messages are the code's own: their number is bounded.
		g, _ = ratelog.New(ratelog.Config{Logger: p.log, Level: level, Msg: msg, Summary: msg + ": lines not logged one by one",
			Burst: peerLogBurst, Window: peerLogWindow, Now: p.clock.Now, AfterFunc: p.clock.AfterFunc})
		p.by[k] = g
	}
	p.mu.Unlock()
	g.Write(attrs...)
}

// close reports the counts still pending.
func (p *peerLogs) close() {
	p.mu.Lock()
	p.closed = true
	logs := make([]*ratelog.Log, 0, len(p.by))
	for _, g := range p.by {
		logs = append(logs, g)
	}
	p.mu.Unlock()
	for _, g := range logs {
		g.Close()
	}
}

// handler is the slog.Handler of the sessions' loggers: their lines go
// through the bounds.
func (p *peerLogs) handler() slog.Handler { return &peerHandler{logs: p} }

type peerHandler struct {
	logs  *peerLogs
	attrs []slog.Attr // the logger's (With), before the line's own
}

func (h *peerHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.logs.log.Handler().Enabled(ctx, l)
}

func (h *peerHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, 0, len(h.attrs)+r.NumAttrs())
	for _, a := range h.attrs {
		args = append(args, a)
	}
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a)
		return true
	})
	h.logs.write(r.Level, r.Message, args...)
	return nil
}

func (h *peerHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &peerHandler{logs: h.logs, attrs: append(slices.Clip(h.attrs), as...)}
}

// WithGroup puts nothing in a group: no session's logger has one.
func (h *peerHandler) WithGroup(string) slog.Handler { return h }
