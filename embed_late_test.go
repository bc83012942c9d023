package switchboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// lateNode is an embedded node whose in-process deliveries time out
// after 1.2 s (WebhookTimeout plus one second).
func lateNode(t *testing.T, maxAttempts int, logs *logtest.Buffer) *switchboard.Node {
	cfg := embeddedConfig(t)
	cfg.WebhookTimeout = 200 * time.Millisecond
	cfg.DeliveryMaxAttempts = maxAttempts
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	return startNode(t, cfg).node
}

func finalMessage(t *testing.T, n *switchboard.Node, id string) messages.Message {
	t.Helper()
	var m messages.Message
	polltest.Eventually(t, 15*time.Second, func() error {
		var err error
		if m, err = n.Message(context.Background(), id); err != nil {
			return err
		}
		if !m.State.Final() {
			return fmt.Errorf("state %s", m.State)
		}
		return nil
	})
	return m
}

// TestActorLateRetryOfEarlierAttemptIsStale: an in-process frontend
// answers attempt 1 Retry late, while attempt 2 is in flight, then attempt
// 2 Delivered. The late retry was taken as attempt 2's verdict: on the
// last attempt the message failed max_attempts, and attempt 2's delivered
// was dropped. With or without the answer naming its attempt, it is
// attempt 1's, and dropped.
func TestActorLateRetryOfEarlierAttemptIsStale(t *testing.T) {
	for _, echo := range []bool{false, true} {
		t.Run(fmt.Sprintf("echo=%v", echo), func(t *testing.T) {
			n := lateNode(t, 2, nil)
			serveActor(t, n, "gw", "gw", "46", actorFunc(func(c actor.Context) {
				d, ok := c.Message().(*messages.Delivery)
				if !ok {
					return
				}
				sender, sys, m := c.Sender(), c.ActorSystem(), d.Message
				pause, status := 500*time.Millisecond, messages.Delivered
				if m.Attempt == 1 {
					pause, status = 1400*time.Millisecond, messages.Retry // after its timeout, while attempt 2 is out
				}
				r := &messages.DeliveryResult{ID: m.ID, Status: status}
				if echo {
					r.Attempt = m.Attempt
				}
				time.AfterFunc(pause, func() { sys.Root.Send(sender, r) })
			}))
			if _, _, err := n.Submit(context.Background(), messages.Submission{ID: "lr", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
				t.Fatal(err)
			}
			if m := finalMessage(t, n, "lr"); m.State != messages.StateDelivered || m.Attempts != 2 {
				t.Fatalf("state %s after %d attempts (%+v): want delivered by attempt 2", m.State, m.Attempts, m.History)
			}
		})
	}
}

// TestActorAnswersWithoutAttemptAfterAPanic: an in-process frontend's
// actor panics on attempt 1 (the node's guardian restarts it; the Delivery
// is dropped) and answers the later attempts without naming them. The
// attempt that panicked stayed the oldest not answered, and each answer
// was taken for the attempt before its own: attempt 2's Retry was dropped
// as late (its timeout recorded instead of its reason) and the next
// Delivered recorded against the attempt before it. Attempt 2's Retry is
// recorded now, with its reason (at its deadline: it might have been
// attempt 1's, late), and each Delivered against its own attempt.
func TestActorAnswersWithoutAttemptAfterAPanic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[int]messages.DeliveryResult // by attempt; attempt 1 panics
		want    string                          // the history's attempts
	}{
		{name: "retry, then delivered", answers: map[int]messages.DeliveryResult{
			2: {Status: messages.Retry, Reason: "operator busy"}, 3: {Status: messages.Delivered}},
			want: "[retry a1 timeout retry a2 operator busy delivered a3]"},
		{name: "delivered", answers: map[int]messages.DeliveryResult{2: {Status: messages.Delivered}},
			want: "[retry a1 timeout delivered a2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := lateNode(t, 3, nil)
			serveActor(t, n, "gw", "gw", "46", actorFunc(func(c actor.Context) {
				d, ok := c.Message().(*messages.Delivery)
				if !ok {
					return
				}
				if d.Message.Attempt == 1 {
					panic("gateway bug")
				}
				r := tc.answers[d.Message.Attempt]
				r.ID = d.Message.ID
				c.Respond(&r)
			}))
			if _, _, err := n.Submit(context.Background(), messages.Submission{ID: "pa", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
				t.Fatal(err)
			}
			m := finalMessage(t, n, "pa")
			var got []string
			for _, e := range m.History {
				if e.Attempt == 0 {
					continue // accepted
				}
				s := fmt.Sprintf("%s a%d", e.State, e.Attempt)
				if _, reason, ok := strings.Cut(e.Detail, " failed: "); ok {
					reason, _, _ = strings.Cut(reason, "; retry in")
					s += " " + reason
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != tc.want || m.State != messages.StateDelivered {
				t.Fatalf("state %s, history %s; want delivered, %s", m.State, got, tc.want)
			}
		})
	}
}

// TestActorLateDeliveredAfterLastAttemptIsLogged: the last attempt timed
// out and the message failed; the frontend's Delivered comes after. The
// failure stands (a final state is never changed), and a warning names
// the message so that an operator does not resubmit it blindly.
func TestActorLateDeliveredAfterLastAttemptIsLogged(t *testing.T) {
	logs := &logtest.Buffer{}
	n := lateNode(t, 1, logs)
	// The frontend answers once the message has failed: late whatever
	// the timer's lateness on a busy machine.
	asked := make(chan func(), 1)
	serveActor(t, n, "gw", "gw", "46", actorFunc(func(c actor.Context) {
		if d, ok := c.Message().(*messages.Delivery); ok {
			sender, sys := c.Sender(), c.ActorSystem()
			asked <- func() { sys.Root.Send(sender, &messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered}) }
		}
	}))
	if _, _, err := n.Submit(context.Background(), messages.Submission{ID: "late", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if m := finalMessage(t, n, "late"); m.State != messages.StateFailed || m.Reason != messages.ReasonMaxAttempts {
		t.Fatalf("state %s %q, want failed max_attempts", m.State, m.Reason)
	}
	(<-asked)()
	polltest.Eventually(t, 5*time.Second, func() error {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "late verdict on a final message") &&
				strings.Contains(l, "message=late") && strings.Contains(l, "frontend=gw") {
				return nil
			}
		}
		return fmt.Errorf("no warning about the late verdict")
	})
	if m, _ := n.Message(context.Background(), "late"); m.State != messages.StateFailed {
		t.Fatalf("state %s after the late verdict, want failed", m.State)
	}
}
