// Package redact masks personal data in what a node writes about messages
// (--redact on): phone numbers keep their first digits (enough to tell the
// country and network an operator is looking at) and lose the rest;
// message bodies are dropped. It serves the logs, through Handler, and the
// audit trail, through Text.
//
// What counts as a number: the attributes named like one (NumberKeys), and
// in any other text every run of 7 or more digits (an optional '+' before
// it), which is what a phone number looks like in an error a frontend or a
// peer returns. Shorter runs (counts, status codes, ports, route
// prefixes) are left alone.
package redact

import (
	"context"
	"log/slog"
	"slices"
	"strings"
)

// KeepDigits is how many leading digits of a number stay readable: a
// country code and a network code.
const KeepDigits = 5

// minRun is the shortest run of digits taken for a number in free text.
const minRun = 7

// NumberKeys are the log attributes that hold a number.
var NumberKeys = []string{"source_msisdn", "destination_msisdn", "msisdn", "source", "destination", "number"}

// BodyKeys are the log attributes that hold a message body: dropped.
var BodyKeys = []string{"message_body", "body", "message_body_base64"}

// Number masks a number: its first KeepDigits digits stay, every later
// digit becomes '*' (other characters, a leading '+', stay).
func Number(s string) string {
	b := []byte(s)
	seen := 0
	for i, c := range b {
		if c >= '0' && c <= '9' {
			if seen >= KeepDigits {
				b[i] = '*'
			}
			seen++
		}
	}
	return string(b)
}

// Text masks every run of minRun or more digits in s as Number does.
func Text(s string) string {
	var out strings.Builder
	run := -1
	flush := func(end int) {
		if run < 0 {
			return
		}
		if end-run >= minRun {
			out.WriteString(Number(s[run:end]))
		} else {
			out.WriteString(s[run:end])
		}
		run = -1
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			if run < 0 {
				run = i
			}
			continue
		}
		flush(i)
		out.WriteByte(s[i])
	}
	flush(len(s))
	return out.String()
}

// Body is what a dropped body reads as.
const Body = "[redacted]"

// Handler wraps a slog.Handler and masks every record's attributes (and
// its message's numbers) before the wrapped handler sees them.
type Handler struct{ next slog.Handler }

// NewHandler wraps next.
func NewHandler(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = attr(a)
	}
	return &Handler{next: h.next.WithAttrs(masked)}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler { return &Handler{next: h.next.WithGroup(name)} }

// attr masks one attribute (and the attributes of a group).
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case v.Kind() == slog.KindGroup:
		g := v.Group()
		masked := make([]any, len(g))
		for i, x := range g {
			masked[i] = attr(x)
		}
		return slog.Group(a.Key, masked...)
	case slices.Contains(BodyKeys, a.Key):
		return slog.String(a.Key, Body)
	case slices.Contains(NumberKeys, a.Key):
		return slog.String(a.Key, Number(v.String()))
	case v.Kind() == slog.KindString:
		return slog.String(a.Key, Text(v.String()))
	case v.Kind() == slog.KindAny:
		// An error, a Stringer, a slice: masked as its text.
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, Text(err.Error()))
		}
		return slog.String(a.Key, Text(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
