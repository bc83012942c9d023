package switchboard_test

import (
	"context"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// A retry of a stored submission (same id, same content) is answered 200
// with the stored message whatever changed since it was stored: its route,
// its validity, the room left (docs/api.md: "Routing may have sent it
// elsewhere since; that is not content"). A new id meets the same checks
// with their own errors.

// retryBody is the submission these tests send (again).
func retryBody(id string, extra ...string) map[string]string {
	b := map[string]string{"id": id, "source_msisdn": "15550001", "destination_msisdn": "+447700900123", "message_body": "hi " + id}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i]] = extra[i+1]
	}
	return b
}

// mustRetryStored submits body again and wants the stored message back.
func (h *harness) mustRetryStored(body map[string]string) {
	h.t.Helper()
	var m messages.Message
	h.must(200, "POST", "/api/messages", body, &m)
	if m.ID != body["id"] || m.Body != body["message_body"] {
		h.t.Fatalf("retry of %s answered %+v, want the stored message", body["id"], m)
	}
}

func TestRetryAfterRouteDeletedReturnsStored(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe", "44")
	h.must(202, "POST", "/api/messages", retryBody("r1"), nil)
	h.must(204, "DELETE", "/api/routes/44", nil, nil)
	h.mustRetryStored(retryBody("r1"))
	// Other content under the id is still a conflict, and a new id has no
	// route.
	h.apiError(409, "id_conflict", "POST", "/api/messages", retryBody("r1", "message_body", "other"))
	h.apiError(422, "no_route", "POST", "/api/messages", retryBody("r2"))
	if code, _ := h.do("GET", "/api/messages/r2", nil); code != 404 {
		t.Fatalf("GET r2 after its refusal: %d, want 404 (nothing stored)", code)
	}
}

// shiftedClock is the wall clock moved on by a set amount.
type shiftedClock struct {
	clock.Real
	by atomic.Int64
}

func (c *shiftedClock) Now() time.Time { return c.Real.Now().Add(time.Duration(c.by.Load())) }

func TestRetryAfterValidityPassedReturnsStored(t *testing.T) {
	clk := &shiftedClock{}
	cfg := testConfig(t)
	cfg.Clock = clk
	h := startNode(t, cfg)
	h.pullFrontend("fe", "44")
	until := clk.Now().Add(time.Hour).Format(time.RFC3339Nano)
	h.must(202, "POST", "/api/messages", retryBody("v1", "validity_until", until), nil)
	clk.by.Store(int64(2 * time.Hour))
	h.mustRetryStored(retryBody("v1", "validity_until", until))
	h.apiError(400, "invalid_request", "POST", "/api/messages", retryBody("v2", "validity_until", until))
}

// fullStore is a store whose commits of new messages fail for want of
// space while full is set.
type fullStore struct {
	persistence.Store
	full atomic.Bool
}

func (s *fullStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if s.full.Load() && len(w.Accept) > 0 {
		return persistence.Written{}, persistence.ErrNoSpace
	}
	return s.Store.Write(ctx, now, w)
}

func TestRetryWhileStorageFullReturnsStored(t *testing.T) {
	scfg := sqlite.DefaultConfig()
	scfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	inner, err := sqlite.Open(context.Background(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	st := &fullStore{Store: inner}
	cfg := testConfig(t)
	cfg.Store = st
	h := startNode(t, cfg)
	h.pullFrontend("fe", "44")
	h.must(202, "POST", "/api/messages", retryBody("f1"), nil)
	st.full.Store(true)
	h.apiError(507, "storage_full", "POST", "/api/messages", retryBody("f2")) // shuts the gate for space.Hold
	st.full.Store(false)
	h.mustRetryStored(retryBody("f1"))
	h.apiError(507, "storage_full", "POST", "/api/messages", retryBody("f3"))
}

// TestRetryAnswersTheDocumentOfGet: the 200 of a retry is the stored
// message as GET /api/messages/{id} shows it, history, last detail and
// next attempt included.
func TestRetryAnswersTheDocumentOfGet(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe", "44")
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := retryBody("d1", "deliver_after", later)
	h.must(202, "POST", "/api/messages", body, nil)
	var retry, get map[string]any
	h.must(200, "POST", "/api/messages", body, &retry)
	h.must(200, "GET", "/api/messages/d1", nil, &get)
	for _, k := range []string{"history", "last_detail", "next_attempt_at"} {
		if _, ok := get[k]; !ok {
			t.Fatalf("GET lacks %q: %v", k, get)
		}
	}
	if !reflect.DeepEqual(retry, get) {
		t.Fatalf("the retry's 200 is not the document of GET:\nretry %v\nGET   %v", retry, get)
	}
}
