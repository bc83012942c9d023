package switchboard

import (
	"context"
	"errors"
	"fmt"
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
// records it) is called once it says the change was made. A change not
// answered when the node stops is logged as possibly made unrecorded.
func TestChangeAnsweredLateIsRecorded(t *testing.T) {
	log, logs := logtest.New()
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	n := &Node{log: log, system: sys, stopping: make(chan struct{})}
	n.ready.Store(true)
	g := &gateway{n: n}
	// An intake that answers a DeleteRoute or a Resubmit only when told
	// to.
	release := make(chan error)
	n.intake = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.DeleteRoute:
			m.Reply <- <-release
		case *messages.Resubmit:
			m.Reply <- messages.ResubmitReply{Err: <-release}
		}
	}))
	late := make(chan string, 2)
	call := func(prefix string) {
		t.Helper()
		ctx, cancel := context.WithCancel(httpapi.WithLateChange(context.Background(), func() { late <- prefix }))
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
		if got != "45" {
			t.Errorf("LateChange called for %s, want only 45's (44's was not made)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late answer of a change that was made was not handed to LateChange")
	}

	// A resubmit made whose message could not be read back is made.
	ctx, cancel := context.WithCancel(httpapi.WithLateChange(context.Background(), func() { late <- "resubmit" }))
	cancel()
	if _, err := g.Resubmit(ctx, "m-1"); err == nil {
		t.Fatal("Resubmit unanswered: no error")
	}
	release <- fmt.Errorf("read back: %w", messages.ErrNotReadBack)
	select {
	case got := <-late:
		if got != "resubmit" {
			t.Errorf("LateChange called for %s, want the resubmit's", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late answer of a resubmit made but not read back was not handed to LateChange")
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
		t.Errorf("LateChange called for %s", <-late)
	}
}
