package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestNumberAndText(t *testing.T) {
	for in, want := range map[string]string{
		"+447700900123": "+44770*******",
		"447700900123":  "44770*******",
		"4477":          "4477",
		"ACME":          "ACME",
	} {
		if got := Number(in); got != want {
			t.Errorf("Number(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"HTTP 400: unknown subscriber +447700900123": "HTTP 400: unknown subscriber +44770*******",
		"no route for destination 33612345678":       "no route for destination 33612******",
		"attempt 2 failed: HTTP 503; retry in 40s":   "attempt 2 failed: HTTP 503; retry in 40s",
		"route 4477 -> sms-uk, 123456 left":          "route 4477 -> sms-uk, 123456 left",
		"1234567":                                    "12345**",
		"":                                           "",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHandlerMasksEveryAttribute(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil))).With("destination_msisdn", "+447700900123")
	log.Warn("message failed for 33612345678",
		"message_body", "Your code is 318044",
		"source", "ACME",
		"reason", "rejected: unknown subscriber 447700900124",
		"err", errors.New("peer said 447700900125 is barred"),
		"attempts", 3,
		slog.Group("msg", "number", "+15550100999", "id", "m-1"))
	out := buf.String()
	for _, leak := range []string{"447700900123", "33612345678", "318044", "447700900124", "447700900125", "15550100999"} {
		if strings.Contains(out, leak) {
			t.Errorf("the log line shows %s: %s", leak, out)
		}
	}
	for _, kept := range []string{`"source":"ACME"`, `"attempts":3`, `"id":"m-1"`, `"message_body":"[redacted]"`, "+44770*******", "33612******"} {
		if !strings.Contains(out, kept) {
			t.Errorf("the log line lacks %s: %s", kept, out)
		}
	}
}
