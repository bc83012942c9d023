package switchboard

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// TestChangeAnsweredLateIsRecorded: a change whose call's bound ran out
// before the intake answered is answered unavailable, yet the intake makes
// it after: its answer is still awaited, and the call's LateChange (which
// records it) is called once it says the change was made, with the result
// the call would have returned (what a resubmit set, a bulk resubmit's
// counts: the record's detail). A change not answered when the node stops
// is logged as possibly made unrecorded.
func TestChangeAnsweredLateIsRecorded(t *testing.T) {
	log, logs := logtest.New()
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	n := &Node{log: log, system: sys, stopping: make(chan struct{})}
	n.ready.Store(true)
	g := &gateway{n: n}
	// An intake that answers a DeleteRoute, a Resubmit or a ResubmitBulk
	// only when told to.
	release := make(chan error)
	resubmitted := messages.Message{ID: "m-1", Frontend: "fe-a", State: messages.StatePending}
	n.intake = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.DeleteRoute:
			m.Reply <- <-release
		case *messages.Resubmit:
			m.Reply <- messages.ResubmitReply{Message: resubmitted, Err: <-release}
		case *messages.ResubmitBulk:
			m.Reply <- messages.BulkReply{Resubmitted: 3, Skipped: 1, Err: <-release}
		}
	}))
	type lateCall struct {
		change string
		result any
	}
	late := make(chan lateCall, 2)
	lateChange := func(change string) func(any) {
		return func(result any) { late <- lateCall{change, result} }
	}
	call := func(prefix string) {
		t.Helper()
		ctx, cancel := context.WithCancel(httpapi.WithLateChange(context.Background(), lateChange(prefix)))
		cancel() // the bound ran out: no answer in time
		var e *messages.Error
		if err := g.DeleteRoute(ctx, prefix); !errors.As(err, &e) || e.Code != messages.CodeUnavailable {
			t.Fatalf("DeleteRoute(%s) unanswered: %v, want unavailable", prefix, err)
		}
	}

	call("44")
	release <- messages.Errorf(messages.CodeNotFound, "no route 44") // not made: not recorded
	call("45")
	release <- nil // made
	select {
	case got := <-late:
		if got != (lateCall{"45", nil}) {
			t.Errorf("LateChange called with %+v, want only 45's, with no result (44's was not made)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late answer of a change that was made was not handed to LateChange")
	}

	// A resubmit made whose message could not be read back is made, and
	// says what it set; a bulk resubmit that failed part of the way made
	// what it counts.
	notReadBack := fmt.Errorf("read back: %w", messages.ErrNotReadBack)
	partWay := messages.Errorf(messages.CodeUnavailable, "the message store is unavailable")
	for _, c := range []struct {
		change string
		call   func(context.Context) error
		end    error
		want   any
	}{
		{"resubmit", func(ctx context.Context) error { _, err := g.Resubmit(ctx, "m-1"); return err },
			notReadBack, resubmitted},
		{"bulk resubmit", func(ctx context.Context) error { _, err := g.ResubmitBulk(ctx, messages.StateFailed); return err },
			partWay, messages.BulkReply{Resubmitted: 3, Skipped: 1, Err: partWay}},
	} {
		ctx, cancel := context.WithCancel(httpapi.WithLateChange(context.Background(), lateChange(c.change)))
		cancel()
		if err := c.call(ctx); err == nil {
			t.Fatalf("%s unanswered: no error", c.change)
		}
		release <- c.end
		select {
		case got := <-late:
			if got.change != c.change || !reflect.DeepEqual(got.result, c.want) {
				t.Errorf("LateChange called with %+v, want %s's with %+v", got, c.change, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the late answer of a %s made was not handed to LateChange", c.change)
		}
	}

	call("46")
	close(n.stopping)
	polltest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "may have been made without its audit record") {
			return fmt.Errorf("no warning for a change unanswered at the stop:\n%s", logs.String())
		}
		return nil
	})
	close(release) // the blocked intake goes
	if len(late) > 0 {
		t.Errorf("LateChange called with %+v", <-late)
	}
}
