package delivery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/polltest"
)

// claimStore is a real store that notes the limit of each claim, and whose
// next Write panics when armed (the worker's round panics: it restarts).
type claimStore struct {
	persistence.Store
	mu     sync.Mutex
	limits []int
	armed  bool
}

func (s *claimStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	s.mu.Lock()
	for _, c := range w.Claims {
		s.limits = append(s.limits, c.Limit)
	}
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		panic("injected fault in Write")
	}
	return s.Store.Write(ctx, now, w)
}

func (s *claimStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

// claims are the limits of the claims so far.
func (s *claimStore) claims() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.limits...)
}

// TestWorkerRestartKeepsWhatTheBoardOwesIt: a push worker that restarts
// (same PID, same mailbox) while rows the handover board granted it are on
// their way keeps them owed: its first claim leaves them their slots, and
// their Work, which comes to it, settles them. It dropped the debt as it
// started again (Board.Forget), claimed its MaxInFlight, and the granted
// rows came on top of it: 5 deliveries at once at a frontend of 3.
func TestWorkerRestartKeepsWhatTheBoardOwesIt(t *testing.T) {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	db, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := &claimStore{Store: db}
	board := handover.NewBoard()
	d := (&Deps{
		Owner: "me", Store: store, Clock: clock.Real{}, Board: board, MaxInFlight: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Publish: func(messages.StateChanged) {},
		HTTPClient: http.DefaultClient, Actors: &Actors{}, Policy: dispatchPolicy, SendTimeout: time.Second,
	}).withDefaults()
	fe := messages.Frontend{Name: "hook", Mode: messages.ModeWebhook, URL: "http://127.0.0.1:1/"}
	sys := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10 * time.Millisecond))
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewWorker(d, fe, nil)))
	t.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })
	key := handover.Key{Kind: persistence.WorkDelivery, Target: fe.Name}

	// Its first claim finds nothing: it offers its 3 slots, and the
	// intake takes 2 of them (their commit is on its way).
	polltest.Eventually(t, 20*time.Second, func() error {
		if n, _, to := board.Take(key, 2); n != 2 || !to.Equal(pid) {
			return fmt.Errorf("granted %d to %v, want 2 to the worker", n, to)
		}
		return nil
	})

	// A kick: its round claims the 1 slot the 2 owed leave, and panics.
	before := len(store.claims())
	store.arm()
	sys.Root.Send(pid, &messages.Kick{Frontend: fe.Name})
	var got []int
	polltest.Eventually(t, 20*time.Second, func() error {
		if got = store.claims()[before:]; len(got) < 2 {
			return fmt.Errorf("claims %v, want the one that panicked and the next incarnation's", got)
		}
		return nil
	})
	if got[0] != 1 || got[1] != 1 {
		t.Fatalf("claims of %v slots, want 1 and 1 (3 slots, 2 rows owed): all 3 again after the restart, and the 2 rows came on top", got)
	}

	// The granted rows come to the restarted worker: the debt is settled.
	sys.Root.Send(pid, &handover.Work{Key: key, Granted: 2})
	polltest.Eventually(t, 20*time.Second, func() error {
		if n := board.Owed(key, pid); n != 0 {
			return fmt.Errorf("owed %d once the Work came", n)
		}
		return nil
	})
}
