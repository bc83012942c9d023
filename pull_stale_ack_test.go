package switchboard_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// lateAckRead is a store whose next GetMessage made by a pull worker's ack
// reads the message, then waits (read is closed as it waits) until go_ is
// closed: the ack's read of the attempt counts (Worker.ack) and the round
// that records its verdicts are apart, as they are whenever a claim round
// is out or another instance claims meanwhile.
type lateAckRead struct {
	persistence.Store
	mu    sync.Mutex
	armed bool
	read  chan struct{}
	go_   chan struct{}
}

func (s *lateAckRead) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	m, err := s.Store.GetMessage(ctx, id)
	buf := make([]byte, 16<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	s.mu.Lock()
	hold := s.armed && strings.Contains(stack, "delivery.(*Worker).ack")
	if hold {
		s.armed = false
	}
	s.mu.Unlock()
	if hold {
		close(s.read)
		<-s.go_
	}
	return m, err
}

// TestStaleRetryAckDoesNotTakeAnotherPollersLease: poller A's lease of
// attempt 1 runs out while A's retry ack naming attempt 1 is being
// decided; poller B gets attempt 2. docs/api.md: a retry naming an attempt
// older than the latest is `stale` and ignored; "a late verdict on a lease
// that ran out applies as long as the message was not offered again".
// Applied, it took B's lease away (the row due again, unleased) and the
// message was offered a third time while B still held it: delivered twice.
func TestStaleRetryAckDoesNotTakeAnotherPollersLease(t *testing.T) {
	staleAckAfterAnotherPoll(t, messages.Retry)
}

// TestStaleFailedAckDoesNotDeadLetterAnotherPollersMessage: as above with
// a failed verdict naming attempt 1. Applied, it dead-lettered the
// message B was delivering.
func TestStaleFailedAckDoesNotDeadLetterAnotherPollersMessage(t *testing.T) {
	staleAckAfterAnotherPoll(t, messages.Failed)
}

// staleAckAfterAnotherPoll acks attempt 1 of a message with status while
// the ack's read of the attempt count and the recording of its verdict are
// apart, and poller B gets attempt 2 between them. The verdict must be
// stale, the message still B's: not offered again while B's lease lasts,
// not failed.
func staleAckAfterAnotherPoll(t *testing.T, status messages.DeliveryStatus) {
	sc := sqlite.DefaultConfig()
	sc.Path = filepath.Join(t.TempDir(), "switchboard.db")
	inner, err := sqlite.Open(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	st := &lateAckRead{Store: inner, read: make(chan struct{}), go_: make(chan struct{})}
	cfg := testConfig(t)
	cfg.Store = st
	h := startNode(t, cfg)
	h.pullFrontend("p", "46")
	id := h.submit("", "46123")
	if a := h.poll("p", 1, 2000, 1000); len(a) != 1 || a[0].Attempt != 1 { // A: leased for 1 s
		t.Fatalf("poll A %+v", a)
	}
	st.mu.Lock()
	st.armed = true
	st.mu.Unlock()
	type ackRes struct {
		out []messages.AckOutcome
		err error
	}
	done := make(chan ackRes, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := h.node.Ack(ctx, "p", []messages.DeliveryResult{{ID: id, Status: status, Attempt: 1, Reason: "busy"}})
		done <- ackRes{out, err}
	}()
	<-st.read // A's ack read attempt 1
	var b []messages.Outgoing
	for range 10 { // A's lease runs out: B gets attempt 2
		if b = h.poll("p", 1, 2000, 60000); len(b) == 1 {
			break
		}
	}
	if len(b) != 1 || b[0].Attempt != 2 {
		t.Fatalf("poll B %+v", b)
	}
	close(st.go_)
	r := <-done
	if r.err != nil {
		t.Fatalf("ack A: %v", r.err)
	}
	c := h.poll("p", 1, 1000, 60000) // B holds attempt 2 for a minute: nothing to offer
	m := h.message(id)
	if r.out[0].Outcome != messages.OutcomeStale || len(c) != 0 || m.State.Final() {
		t.Fatalf("A's %s of attempt 1 after B got attempt 2: %q (want stale); a third poll got %+v while B holds the lease (message %s, %d attempts)",
			status, r.out[0].Outcome, c, m.State, m.Attempts)
	}
	// B's own verdict stands.
	out, err := h.node.Ack(context.Background(), "p", []messages.DeliveryResult{{ID: id, Status: messages.Delivered, Attempt: 2}})
	if err != nil || out[0].Outcome != string(persistence.Applied) {
		t.Fatalf("B's delivered of attempt 2: %+v, %v", out, err)
	}
}
