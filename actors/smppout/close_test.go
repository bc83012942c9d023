package smppout

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
)

// heldReceiptStore is a receipt store whose RecordReceipts waits until release
// is closed or its context ends (a store under load); in counts the calls
// under way.
type heldReceiptStore struct {
	release chan struct{}
	in      atomic.Int32
}

func (s *heldReceiptStore) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	s.in.Add(1)
	defer s.in.Add(-1)
	select {
	case <-s.release:
		return []persistence.Completion{persistence.NoWork}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestClientCloseWaitsForReceiptRecording: a receipt is recorded on a
// goroutine of its own (off the session's reading one). Close returned
// while that goroutine was still in the store, which the node's stop
// closes next. Close now cancels the recording (the receipt is not
// answered ESME_ROK: the SMSC sends it again) and waits for it.
func TestClientCloseWaitsForReceiptRecording(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := &heldReceiptStore{release: make(chan struct{})}
	c, err := New(Config{Frontend: messages.Frontend{Name: "smsc", Mode: messages.ModeSMPP, URL: "smpp://sb@" + smsc.Addr, Secret: "pw"},
		Store: st, Reconnect: ring.Reconnect{MaxAttempts: 1, Min: time.Hour, Max: time.Hour, Jitter: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	receipted := make(chan struct{})
	go func() {
		defer close(receipted)
		_, _ = smsc.Receipt("x-1", "DELIVRD") // ends with the connection, unanswered
	}()
	polltest.Until(t, 20*time.Second, "the receipt in the store", func() bool { return st.in.Load() == 1 })
	c.Close()
	in := st.in.Load()
	close(st.release)
	<-receipted
	if in != 0 {
		t.Fatalf("Close returned with %d receipt recordings still in the store", in)
	}
}
