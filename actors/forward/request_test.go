package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// slowPeer is node a's federation API over real HTTPS, as b's peer
// client sees it: it accepts every report of a delivery_status_batch and
// every message of a forward_batch after delay (its commit is slow), and
// from its stall-th request on (0: never) answers nothing until the
// caller gives up.
type slowPeer struct {
	delay time.Duration
	stall int64
	n     atomic.Int64
	done  chan struct{}
}

func (p *slowPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // read whole, so that the caller's giving up is seen
	if n := p.n.Add(1); p.stall > 0 && n >= p.stall {
		select {
		case <-r.Context().Done():
		case <-p.done:
		}
		return
	}
	if err != nil {
		return
	}
	time.Sleep(p.delay) // the peer's slow commit, not a wait for anything
	var out any
	switch r.URL.Path {
	case "/api/federation/delivery_status_batch":
		var in messages.StatusBatch
		err = json.Unmarshal(body, &in)
		rep := messages.StatusBatchReply{Results: make([]messages.StatusReply, len(in.Statuses))}
		for i, s := range in.Statuses {
			rep.Results[i] = messages.StatusReply{ID: s.ID, Outcome: "applied"}
		}
		out = rep
	case "/api/federation/forward_batch":
		var in messages.ForwardBatch
		err = json.Unmarshal(body, &in)
		rep := messages.ForwardBatchReply{Results: make([]messages.ForwardResult, len(in.Messages))}
		for i, f := range in.Messages {
			rep.Results[i].ID = f.ID
		}
		out = rep
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// start serves p and returns the config of b's queue to it (peer a), with
// a real peer client bounding each request by timeout, and a's link.
func (p *slowPeer) start(t *testing.T, timeout time.Duration) (Config, messages.PeerLink) {
	t.Helper()
	p.done = make(chan struct{})
	srv := httptest.NewTLSServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.done) }) // before the server closes
	pc, err := httpapi.NewPeerClient(httpapi.PeerClientConfig{Node: "b", Timeout: timeout, InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	return Config{Node: "b", Peer: "a", Owner: "b-0", Transport: pc, Timeout: timeout, Policy: DefaultPolicy()},
		messages.PeerLink{Healthy: true, Addr: srv.Listener.Addr().String(), ForwardBatch: true, StatusBatch: true}
}

// bigBatch is a batch of kind for a that the peer client sends in two
// requests: one more report or forward than a delivery_status_batch or
// forward_batch request may carry (messages.MaxStatusBatch,
// MaxForwardBatch). Short ones: the requests are quick to encode.
func bigBatch(kind persistence.WorkKind) Batch {
	b := Batch{Kind: kind}
	for i := range max(messages.MaxStatusBatch, messages.MaxForwardBatch) + 1 {
		id := fmt.Sprintf("%s-%04d", kind, i)
		m := messages.Message{ID: id, SourceMSISDN: "1", DestinationMSISDN: "2", Body: "hi", SourceSMSC: "a", DestSMSC: "b",
			Frontend: "fe-b", State: messages.StateFailed, Reason: "rejected", UpdatedAt: t0}
		if kind == persistence.WorkForward {
			m.SourceSMSC, m.DestSMSC, m.Frontend, m.State, m.Reason = "b", "a", "fe-a", messages.StatePending, ""
		}
		b.Work = append(b.Work, persistence.Work{Kind: kind, Target: "a", MessageID: id, LeaseEpoch: 3, Message: m})
	}
	return b
}

// TestRequestGivesEachRequestItsOwnTimeout: a batch the peer client sends
// in several requests, each answered in 0.55 x the timeout, gets through:
// the timeout bounds each request, not the whole call (which took 1.1 x
// the timeout and failed, every time, while the reports of its first
// request were applied at the peer again and again). The timeout leaves
// each request 1.8 s beside its delay for TLS, a 1 MiB body and -race on
// a loaded machine.
func TestRequestGivesEachRequestItsOwnTimeout(t *testing.T) {
	const timeout = 4 * time.Second
	for _, kind := range []persistence.WorkKind{persistence.WorkStatus, persistence.WorkForward} {
		t.Run(string(kind), func(t *testing.T) {
			p := &slowPeer{delay: timeout * 55 / 100}
			cfg, link := p.start(t, timeout)
			b := bigBatch(kind)
			res := cfg.request(link, b)
			if res.err != nil {
				t.Fatalf("%d %s in %d requests of 0.55 x the timeout each: %v", len(b.Work), kind, p.n.Load(), res.err)
			}
			if n := p.n.Load(); n < 2 {
				t.Fatalf("%d requests: want a call of several", n)
			}
			if len(res.status)+len(res.forward) != len(b.Work) {
				t.Errorf("%d status and %d forward results for %d", len(res.status), len(res.forward), len(b.Work))
			}
		})
	}
}

// TestRequestRecordsTheAnswersOfTheRequestsThatCompleted: a batch whose
// second request stalls past the timeout fails, but what the peer
// answered to the first is recorded (a report settled, a forward
// accepted) and only the rest is retried; the lane's next batches are
// half as large.
func TestRequestRecordsTheAnswersOfTheRequestsThatCompleted(t *testing.T) {
	for _, kind := range []persistence.WorkKind{persistence.WorkStatus, persistence.WorkForward} {
		t.Run(string(kind), func(t *testing.T) {
			p := &slowPeer{stall: 2}
			cfg, link := p.start(t, 2*time.Second)
			b := bigBatch(kind)
			res := cfg.request(link, b)
			if !errors.Is(res.err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the second request's timeout", res.err)
			}
			cfg.Policy.Batch = messages.MaxForwardBatch
			f := NewFlow("a", "b-0", cfg.Policy)
			f.Lane(kind).SetOpen(true)
			f.Lane(kind).Took()
			if !f.Sent(t0, b, res.forward, res.status, res.err) {
				t.Error("the request that timed out did not close the lane")
			}
			r, ok := f.Next(t0, time.Minute)
			if !ok || len(r.Outcomes) != len(b.Work) {
				t.Fatalf("round %+v: want an outcome for each of the %d", r, len(b.Work))
			}
			done := 0
			for i, o := range r.Outcomes {
				if o.MessageID != b.Work[i].MessageID {
					t.Fatalf("outcome %d is for %s, want %s", i, o.MessageID, b.Work[i].MessageID)
				}
				if o.Result == persistence.ResultRetry {
					continue
				}
				if done != i || o.Result != persistence.ResultDelivered {
					t.Errorf("outcome %d: %+v, want the first request's answers recorded delivered, the rest retried", i, o)
				}
				done++
			}
			if done == 0 || done == len(b.Work) {
				t.Errorf("%d of %d answered: want the first request's answers recorded and the rest retried", done, len(b.Work))
			}
			if got, want := f.Batch(kind), len(b.Work)/2; got != want {
				t.Errorf("batch after the timeout %d, want %d", got, want)
			}
		})
	}
}
