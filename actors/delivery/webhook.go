package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// Webhook POSTs messages to one frontend URL.
type Webhook struct {
	URL    string
	Client *http.Client
	// Secret, when set, signs each call (signature.go); Now is the time
	// of the signature (time.Now when nil).
	Secret string
	Now    func() time.Time
	// times, when set, keeps a message's calls from sharing a signature
	// (signTimes).
	times *signTimes
}

// Send delivers one message and returns the frontend's verdict. It never
// returns an error: a failure to reach the frontend is a retry verdict.
// A 429 Too Many Requests is a deferred one (DeliveryResult.Deferred):
// the frontend is at its rate limit and did not take the message (HTTP's
// ESME_RTHROTTLED), so it uses no attempt; a 503, the service failing,
// is an ordinary retry.
//
// It follows no redirect, whatever w.Client says: a 301-303 would be
// followed by a GET without the message, whose answer (a login page's
// 200) would be taken as the verdict; a 307 or 308 would re-send the
// signed message to wherever the Location points. A 3xx is the frontend's
// answer, a permanent failure like a 4xx (Classify): the URL needs fixing.
//
// Nor does it let net/http send the call again by itself: on a reused
// connection that breaks after the frontend read the call, the transport
// re-sends a request with an Idempotency-Key whose body it can rewind,
// with the same signature, which a frontend that refuses a signature it
// has seen (docs/api.md) answers 401, failing the message. Without
// GetBody the call fails as a retry verdict instead, and the node's retry
// is signed afresh.
func (w Webhook) Send(ctx context.Context, m messages.Outgoing) messages.DeliveryResult {
	body, err := json.Marshal(m)
	if err != nil {
		return messages.DeliveryResult{ID: m.ID, Status: messages.Failed, Reason: "cannot encode message: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return messages.DeliveryResult{ID: m.ID, Status: messages.Failed, Reason: "bad webhook url: " + redactedError(err)}
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	req.Header.Set("X-Switchboard-Attempt", strconv.Itoa(m.Attempt))
	if m.Trace != "" {
		req.Header.Set("traceparent", m.Trace)
	}
	if w.Secret != "" {
		now := time.Now
		if w.Now != nil {
			now = w.Now
		}
		t := now()
		if w.times != nil {
			t = w.times.at(m.ID, t)
		}
		req.Header.Set(SignatureHeader, Sign(w.Secret, t, body))
	}
	client := *w.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return messages.DeliveryResult{ID: m.ID, Status: messages.Retry, Reason: transportReason(err)}
	}
	// Read a little of the body for the reason, drain the rest so the
	// connection is reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	status := Classify(resp.StatusCode)
	var after time.Duration
	if status == messages.Retry {
		after = transport.RetryAfterHeader(resp.Header) // a 429's or 503's ask to wait
	}
	reason := ""
	if status != messages.Delivered {
		reason = fmt.Sprintf("HTTP %d", resp.StatusCode)
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			reason += " to " + messages.RedactURL(loc)
		}
		if s := bytes.TrimSpace(snippet); len(s) > 0 {
			reason += ": " + string(s)
		}
	}
	return messages.DeliveryResult{ID: m.ID, Status: status, Reason: reason, RetryAfter: after,
		Deferred: resp.StatusCode == http.StatusTooManyRequests}
}

// Classify maps a webhook's HTTP status to a verdict (docs/api.md, "Webhook frontends").
func Classify(code int) messages.DeliveryStatus {
	switch {
	case code >= 200 && code < 300:
		return messages.Delivered
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return messages.Retry
	default:
		return messages.Failed
	}
}

// transportReason is a failed call's reason (history, last_detail, the
// logs, the call record, the attempt's span).
func transportReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return redactedError(err)
}

// redactedError is err's text with the URL it quotes as the node shows a
// frontend's URL (messages.RedactURL): net/http's *url.Error quotes the
// whole URL, a key given as its user (https://API_KEY@host/hook) too, and
// a password as "***" rather than the documented xxxxx.
func redactedError(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	redacted := &url.Error{Op: ue.Op, URL: messages.RedactURL(ue.URL), Err: ue.Err}
	if ue == err {
		return redacted.Error()
	}
	// Wrapped: its own text around the URL's.
	return strings.Replace(err.Error(), ue.Error(), redacted.Error(), 1)
}

// sendWebhook makes one webhook call and sends its verdict to the worker.
func (w *Worker) sendWebhook(out messages.Outgoing) {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.SendTimeout)
	defer cancel()
	var span trace.Span
	if w.d.Tracing != nil && out.Trace != "" {
		// The webhook's traceparent is this attempt's span.
		span = w.attemptSpan(telemetry.SpanDeliverWebhook, out)
		out.Trace = telemetry.Of(span)
	}
	r := Webhook{URL: w.fe.URL, Client: w.d.HTTPClient, Secret: w.fe.Secret, Now: w.d.Clock.Now, times: w.d.signed}.Send(ctx, out)
	if span != nil {
		endAttempt(span, r.Status, r.Reason)
	}
	w.sys.Root.Send(w.self, &pushResult{id: out.ID, attempt: out.Attempt, result: r})
}
