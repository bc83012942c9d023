package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
)

// poll sends the pull worker a poll and returns what it was answered
// with; false when no answer came within patience.
func (r *busRig) poll(max int, wait, lease, patience time.Duration) ([]messages.Outgoing, bool) {
	r.t.Helper()
	reply := make(chan messages.PollReply, 1)
	done := make(chan struct{})
	defer close(done) // the poller leaves
	r.sys.Root.Send(r.pid, &messages.Poll{Frontend: r.fe.Name, Max: max, Wait: wait, Lease: lease, Done: done, Reply: reply})
	select {
	case a := <-reply:
		if a.Err != nil {
			r.t.Fatalf("poll: %v", a.Err)
		}
		return a.Messages, true
	case <-time.After(patience):
		return nil, false
	}
}

// ackDelivered acks the messages ids as delivered, and waits for the
// commit.
func (r *busRig) ackDelivered(ids []string) {
	r.t.Helper()
	a := &messages.Ack{Frontend: r.fe.Name}
	for _, id := range ids {
		a.Results = append(a.Results, messages.DeliveryResult{ID: id, Status: messages.Delivered})
	}
	reply := make(chan messages.AckReply, 1)
	a.Reply = reply
	r.sys.Root.Send(r.pid, a)
	select {
	case got := <-reply:
		if got.Err != nil || len(got.Outcomes) != len(ids) {
			r.t.Fatalf("ack = %+v", got)
		}
		for _, o := range got.Outcomes {
			if o.Outcome != string(persistence.Applied) {
				r.t.Fatalf("ack of %s: %s, want applied", o.ID, o.Outcome)
			}
		}
	case <-time.After(20 * time.Second):
		r.t.Fatal("the ack was not answered")
	}
}

// TestPollsThatDoNotWaitHoldNoBusCopies: a pull frontend whose consumer
// polls without waiting (wait_ms 0) is served from the store (the bus's
// fetch and claim by id come too late for such a poll). The bus copies of
// the work it took that the worker's fetches brought found their rows
// leased and were naked until the lease ended, each one of the consumer's
// MaxAckPending meanwhile: a consumer that polled so fast enough filled
// them all, and long polls of the same frontend got nothing from the bus
// (here 4 of 4 for a 5 min lease: the long poll waited in vain). Now a
// copy whose row is leased, or not due, beyond a moment is acked: the row
// in the store stays the record, and its leaseholder settles it.
func TestPollsThatDoNotWaitHoldNoBusCopies(t *testing.T) {
	const (
		n, maxAckPending = 12, 4
		lease            = 5 * time.Minute
	)
	r := newRig(t, rigSpec{n: n, pull: true, maxAckPending: maxAckPending})
	r.start()

	// The consumer polls without waiting until it has every message, and
	// the worker's fetches have had copies of its work handed out (the
	// first poll's claim from the store took the oldest rows, and the
	// first fetch brings their copies).
	var ids []string
	polltest.Eventually(t, 20*time.Second, func() error {
		ms, _ := r.poll(4, 0, lease, 20*time.Second)
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		if info := r.consumer(); len(ids) < n || info.NumPending > n-maxAckPending {
			return fmt.Errorf("polls without waiting got %d of %d messages; the bus handed out %d copies",
				len(ids), n, n-int(info.NumPending))
		}
		return nil
	})
	if len(ids) != n {
		t.Fatalf("polls got %d messages (%v), want %d, each once", len(ids), ids, n)
	}
	r.ackDelivered(ids)

	// A long poll of the same frontend gets work that went through the
	// bus: the consumer has room to hand it out. (The bus's backstop
	// claims only work overdue by 10 s: within this poll's 5 s the work
	// comes by the bus or not at all.)
	r.publish([]persistence.Relay{r.acceptID("late", time.Now().UTC())})
	got, _ := r.poll(1, 5*time.Second, lease, 10*time.Second)
	if len(got) != 1 || got[0].ID != "late" {
		info := r.consumer()
		t.Fatalf("a long poll got %+v, want the message published for it; the consumer has %d of %d handed out and not settled (%v acked, %v naked)",
			got, info.NumAckPending, maxAckPending, r.settled(bus.Ack), r.settled(bus.Nak))
	}
	r.ackDelivered([]string{"late"})

	// Every copy is settled once its work is: none waits for a lease.
	polltest.Eventually(t, 20*time.Second, func() error {
		if ms, _ := r.poll(4, 0, lease, 20*time.Second); len(ms) > 0 {
			t.Fatalf("polled %+v again after it was acked", ms)
		}
		if info := r.consumer(); info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("the consumer has %d copies handed out and not settled, %d not handed out; want none",
				info.NumAckPending, info.NumPending)
		}
		return nil
	})
}
