package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// changeBackend makes every change it is asked for and answers as the node
// does: a call whose context has ended by the time the change is made is
// answered unavailable (the node gave up waiting for its actor), and the
// context's LateChange, if it carries one, is called then with the call's
// result (the answer that came after). It keeps what it made and what was
// recorded.
type changeBackend struct {
	stubBackend
	// slow makes each change wait for its context's end.
	slow bool
	// readBack is the error of a PutRoute's, PutFrontend's or
	// Resubmit's read-back.
	readBack error
	// bulkEnd is the error a ResubmitBulk ends with after its first page.
	bulkEnd error

	mu            sync.Mutex
	made, audited []string
}

func (b *changeBackend) make(ctx context.Context, action, target string, result any) error {
	if b.slow {
		<-ctx.Done()
	}
	b.mu.Lock()
	b.made = append(b.made, action+" "+target)
	b.mu.Unlock()
	if ctx.Err() != nil {
		if late := LateChange(ctx); late != nil {
			late(result)
		}
		return messages.Errorf(messages.CodeUnavailable, "no answer in time: %v", ctx.Err())
	}
	return nil
}

func (b *changeBackend) Audit(_ context.Context, e messages.AuditEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.audited = append(b.audited, e.Action+" "+e.Target+" / "+e.Detail)
}

func (b *changeBackend) Resubmit(ctx context.Context, id string) (messages.Message, error) {
	m := stubMessage(id, messages.StatePending)
	if b.readBack != nil {
		// As the intake answers: what the resubmit set, beside the error.
		m = messages.Message{ID: id, Frontend: m.Frontend, State: m.State}
	}
	if err := b.make(ctx, messages.AuditResubmit, id, m); err != nil {
		return messages.Message{}, err
	}
	if b.readBack != nil {
		return m, fmt.Errorf("%w: %w", messages.ErrNotReadBack, b.readBack)
	}
	return m, nil
}

func (b *changeBackend) ResubmitBulk(ctx context.Context, state messages.State) (messages.BulkReply, error) {
	res := messages.BulkReply{Resubmitted: 2, Skipped: 1}
	if err := b.make(ctx, messages.AuditResubmitBulk, string(state), res); err != nil {
		return messages.BulkReply{}, err
	}
	return res, b.bulkEnd
}

func (b *changeBackend) PutRoute(ctx context.Context, r messages.Route) (messages.Route, error) {
	if err := b.make(ctx, messages.AuditRoutePut, r.Prefix, nil); err != nil {
		return messages.Route{}, err
	}
	if b.readBack != nil {
		return messages.Route{}, fmt.Errorf("%w: %w", ErrNotReadBack, b.readBack)
	}
	return r, nil
}

func (b *changeBackend) DeleteRoute(ctx context.Context, prefix string) error {
	return b.make(ctx, messages.AuditRouteDelete, prefix, nil)
}

func (b *changeBackend) PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error) {
	if err := b.make(ctx, messages.AuditFrontendPut, f.Name, nil); err != nil {
		return messages.Frontend{}, err
	}
	if b.readBack != nil {
		return messages.Frontend{}, fmt.Errorf("%w: %w", ErrNotReadBack, b.readBack)
	}
	return f, nil
}

func (b *changeBackend) DeleteFrontend(ctx context.Context, name string) error {
	return b.make(ctx, messages.AuditFrontendDelete, name, nil)
}

// TestChangeIsRecordedWhateverBecomesOfItsCaller: every change made is in
// the audit trail, when its caller hung up before the answer (it was
// answered nothing: the change was made, then not recorded), when the read
// of its result failed (503, the change made), and when the node's answer
// came after its request timeout (503, recorded when the answer came); a
// bulk resubmit that fails part of the way is recorded with what it made.
// Each record has its action's detail, the late one too (it had only the
// late note: a bulk resubmit's counts, a resubmit's frontend and state
// were missing from it).
func TestChangeIsRecordedWhateverBecomesOfItsCaller(t *testing.T) {
	calls := []struct{ method, path, body, action, target, detail string }{
		{"POST", "/api/messages/m-1/resubmit", "", messages.AuditResubmit, "m-1", "to frontend fe-a, now pending"},
		{"POST", "/api/messages/resubmit", `{"state":"failed"}`, messages.AuditResubmitBulk, "failed", "2 resubmitted, 1 skipped"},
		{"PUT", "/api/routes/44", `{"frontend":"fe-a"}`, messages.AuditRoutePut, "44", "frontend fe-a"},
		{"DELETE", "/api/routes/44", "", messages.AuditRouteDelete, "44", ""},
		{"PUT", "/api/frontends/fe-b", `{"mode":"webhook","url":"https://bob:pw@hooks.example/x","secret":"0123456789abcdef"}`, messages.AuditFrontendPut, "fe-b",
			`mode webhook, url "https://bob:xxxxx@hooks.example/x", signed true`},
		{"DELETE", "/api/frontends/fe-b", "", messages.AuditFrontendDelete, "fe-b", ""},
	}
	for _, c := range []struct {
		name   string
		b      *changeBackend
		hangUp bool
		status int      // 0: every call's own success
		only   []string // the actions called (all when empty)
		late   bool     // recorded with the late note
	}{
		{name: "caller hung up", b: &changeBackend{}, hangUp: true},
		{name: "read-back failed", b: &changeBackend{readBack: messages.Errorf(messages.CodeUnavailable, "the message store is unavailable")},
			status: http.StatusServiceUnavailable, only: []string{messages.AuditResubmit, messages.AuditRoutePut, messages.AuditFrontendPut}},
		{name: "answered after the request timeout", b: &changeBackend{slow: true}, status: http.StatusServiceUnavailable, late: true},
		{name: "bulk failed part of the way", b: &changeBackend{bulkEnd: messages.Errorf(messages.CodeUnavailable, "the message store is unavailable")},
			status: http.StatusServiceUnavailable, only: []string{messages.AuditResubmitBulk}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Only the late case reaches the request timeout: its changes
			// wait for it. The others must not, however slow the machine
			// (a change past 1 ms was recorded late, unlike their want).
			timeout := time.Minute
			if c.late {
				timeout = time.Millisecond
			}
			s, err := New(Config{Backend: c.b, APIToken: stubToken, RequestTimeout: timeout, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var want, records []string
			for _, call := range calls {
				if len(c.only) > 0 && !slices.Contains(c.only, call.action) {
					continue
				}
				req := httptest.NewRequest(call.method, call.path, strings.NewReader(call.body))
				req.Header.Set("Authorization", "Bearer "+stubToken)
				if c.hangUp {
					ctx, cancel := context.WithCancel(req.Context())
					cancel()
					req = req.WithContext(ctx)
				}
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req)
				if c.status != 0 && rec.Code != c.status {
					t.Errorf("%s %s: %d %s, want %d", call.method, call.path, rec.Code, rec.Body, c.status)
				}
				want = append(want, call.action+" "+call.target)
				detail := call.detail
				if c.late {
					detail = strings.TrimPrefix(detail+"; "+lateNote, "; ")
				}
				records = append(records, call.action+" "+call.target+" / "+detail)
			}
			c.b.mu.Lock()
			defer c.b.mu.Unlock()
			if !slices.Equal(c.b.made, want) {
				t.Fatalf("changes made %v, want %v", c.b.made, want)
			}
			if len(c.b.audited) != len(want) {
				t.Fatalf("%d changes made, %d recorded: %v", len(want), len(c.b.audited), c.b.audited)
			}
			for i, e := range c.b.audited {
				if e != records[i] {
					t.Errorf("record %d: %q, want %q", i, e, records[i])
				}
			}
		})
	}
}
