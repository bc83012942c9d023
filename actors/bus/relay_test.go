package bus_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// accept stores a message with delivery work for "fe", written to publish
// when publish is set, and returns the row to publish.
func accept(t *testing.T, st persistence.Store, id string, publish bool) []persistence.Relay {
	t.Helper()
	register(t, st, "fe")
	res, err := st.Accept(context.Background(), time.Now(), []persistence.NewMessage{{
		ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900001", Body: "hi", State: messages.StatePending,
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}, Publish: publish,
	}})
	if err != nil || len(res) != 1 || (res[0].Relay != nil) != publish {
		t.Fatalf("Accept %s = %+v, %v", id, res, err)
	}
	if !publish {
		return nil
	}
	return []persistence.Relay{*res[0].Relay}
}

// register registers frontend fe: a store creates a message for local
// delivery only while its frontend is registered.
func register(t *testing.T, st persistence.Store, fe string) {
	t.Helper()
	now := time.Now()
	if err := st.PutFrontend(context.Background(), persistence.Frontend{Name: fe, Mode: persistence.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// fetchUntil acks what the bus hands out for "fe" until it has handed out
// the messages want (in any order).
func fetchUntil(t *testing.T, b *bus.Bus, want ...string) {
	t.Helper()
	var got []string
	polltest.Until(t, 10*time.Second, fmt.Sprintf("the bus handing out %q", want), func() bool {
		_ = b.Fetch(context.Background(), "fe", 10, 100*time.Millisecond, func(ms []*bus.Msg) {
			for _, m := range ms {
				got = append(got, m.ID)
				_ = m.Settle(bus.Decision{Action: bus.Ack})
			}
		})
		return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
	})
}

// TestStreamMadeAnewRelaysAgain: a memory stream loses its messages when
// the server restarts; the instance that makes it again has the site's
// relayed and undone delivery rows relayed again, so the work comes back
// through the bus at once (not after the store's backstop).
func TestStreamMadeAnewRelaysAgain(t *testing.T) {
	srv := bustest.Start(t)
	b := open(t, srv.URL())
	st := sqlitetest.Open(t)
	r := bus.StartRelay(b, st, clock.Real{}, 1)
	defer r.Stop()
	r.Publish(slices.Concat(accept(t, st, "m-1", true), accept(t, st, "m-2", true)))
	polltest.Until(t, 10*time.Second, "both rows in the stream", func() bool { return streamMsgs(t, srv.URL()) == 2 })
	fetchUntil(t, b, "m-1", "m-2") // acked on the bus; the store still has the rows (no outcome was recorded)

	srv.Restart() // the memory stream is gone, with its consumer
	fetchUntil(t, b, "m-1", "m-2")

	// The stream deleted while the bus is up: the next publish finds no
	// stream, and the bus makes it again.
	js := jetStream(t, srv.URL())
	if err := js.DeleteStream(context.Background(), "SWITCHBOARD_test"); err != nil {
		t.Fatal(err)
	}
	r.Publish(accept(t, st, "m-3", true))
	fetchUntil(t, b, "m-1", "m-2", "m-3")
	if at, err := st.OldestUnrelayed(context.Background()); err != nil || !at.IsZero() {
		t.Fatalf("OldestUnrelayed = %v, %v; want every row relayed again", at, err)
	}
}

// TestRelayPublishesWhatTheIntakeWrote: rows committed marked relayed and
// handed to Publish reach the bus without a relay round (the store has
// nothing unrelayed); while the bus is down the relay is not Ready, and a
// row handed to it then is given back to the store, and relayed by a
// round once the bus returns; rows written unrelayed go by a round.
func TestRelayPublishesWhatTheIntakeWrote(t *testing.T) {
	srv := bustest.Start(t)
	// A file stream: the rows m-1 and m-2, acked on the bus but not done
	// in the store, stay behind across the restart (a memory stream made
	// anew would have them relayed again: TestStreamMadeAnewRelaysAgain).
	b := openWith(t, srv.URL(), func(c *bus.Config) { c.Storage = bus.StorageFile })
	st := sqlitetest.Open(t)
	r := bus.StartRelay(b, st, clock.Real{}, 1)
	defer r.Stop()
	unrelayed := func() time.Time {
		t.Helper()
		at, err := st.OldestUnrelayed(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return at
	}

	if !r.Ready() {
		t.Fatal("the relay is not Ready with the bus up")
	}
	r.Publish(slices.Concat(accept(t, st, "m-1", true), accept(t, st, "m-2", true)))
	fetchUntil(t, b, "m-1", "m-2")
	if at := unrelayed(); !at.IsZero() {
		t.Fatalf("unrelayed work since %v: the rows were given back", at)
	}

	srv.Stop()
	waitUp(t, b, false)
	if r.Ready() {
		t.Fatal("the relay is Ready with the bus down")
	}
	r.Publish(accept(t, st, "m-3", true)) // written as the bus went down
	polltest.Until(t, 10*time.Second, "m-3 given back to the store", func() bool { return !unrelayed().IsZero() })

	srv.Restart()
	waitUp(t, b, true)
	fetchUntil(t, b, "m-3")
	polltest.Until(t, 10*time.Second, "nothing unrelayed", func() bool { return unrelayed().IsZero() })

	// Work written unrelayed (the relay was not Ready) goes by a round,
	// between the batches of what the intake hands over.
	accept(t, st, "m-4", false)
	r.Kick()
	r.Publish(accept(t, st, "m-5", true))
	fetchUntil(t, b, "m-4", "m-5")
}

// takes counts a store's relay rounds (RelayWork).
type takes struct {
	persistence.Store
	n atomic.Int64
}

func (s *takes) RelayWork(ctx context.Context, req persistence.RelayRequest) ([]persistence.Relay, error) {
	s.n.Add(1)
	return s.Store.RelayWork(ctx, req)
}

// TestRelayPublishNeedsNoRound: rows handed to Publish cost no relay round
// (the point of writing them marked relayed: no statement per commit);
// rows handed to it after Stop are given back to the store at once.
func TestRelayPublishNeedsNoRound(t *testing.T) {
	srv := bustest.Start(t)
	b := openWith(t, srv.URL(), func(c *bus.Config) { c.RelaySweep = time.Hour })
	st := &takes{Store: sqlitetest.Open(t)}
	r := bus.StartRelay(b, st, clock.Real{}, 1)
	// The round at the start (work written before it) is the only one.
	polltest.Until(t, 10*time.Second, "the round at the start", func() bool { return st.n.Load() == 1 })
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("p-%d", i)
		want = append(want, id)
		r.Publish(accept(t, st, id, true))
		time.Sleep(5 * time.Millisecond)
	}
	fetchUntil(t, b, want...)
	if n := st.n.Load(); n != 1 {
		t.Fatalf("%d relay rounds for 20 rows handed to Publish, want only the one at the start", n)
	}

	r.Stop()
	r.Publish(accept(t, st, "late", true))
	if at, err := st.OldestUnrelayed(context.Background()); err != nil || at.IsZero() {
		t.Fatalf("OldestUnrelayed = %v, %v: a row handed over after Stop was not given back", at, err)
	}
}

// manualClock is a clock.Clock that moves only when told to.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at   time.Time
	f    func()
	done bool
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !t.done
		t.done = true
		return stopped
	}
}

// waiting reports whether a timer is set for at.
func (c *manualClock) waiting(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if !t.done && t.at.Equal(at) {
			return true
		}
	}
	return false
}

// set moves the clock to at and fires the timers due by then.
func (c *manualClock) set(at time.Time) {
	c.mu.Lock()
	c.now = at
	var due []func()
	for _, t := range c.timers {
		if !t.done && !t.at.After(at) {
			t.done = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// TestRelayPublishesScheduledWorkWhenItFallsDue: the relay publishes only
// work that is due (work on the bus early would wait in its consumer,
// naked, holding one of its MaxAckPending until its time); it learns when
// the earliest work waiting for its time falls due and publishes it then,
// not at its next sweep.
func TestRelayPublishesScheduledWorkWhenItFallsDue(t *testing.T) {
	srv := bustest.Start(t)
	b := openWith(t, srv.URL(), func(c *bus.Config) { c.RelaySweep = 24 * time.Hour })
	st := sqlitetest.Open(t)
	clk := &manualClock{now: time.Now().UTC().Truncate(time.Second)}
	due := clk.Now().Add(time.Hour)
	register(t, st, "fe")
	for _, m := range []struct {
		id string
		at time.Time
	}{{"later", due}, {"now", clk.Now()}} {
		_, err := st.Accept(context.Background(), clk.Now(), []persistence.NewMessage{{
			ID: m.id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900001", Body: "hi", State: messages.StatePending,
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: m.at},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := bus.StartRelay(b, st, clk, 1)
	defer r.Stop()
	fetchUntil(t, b, "now") // the round at the start
	if n := streamMsgs(t, srv.URL()); n != 0 {
		t.Fatalf("the stream holds %d messages after the due one was acked, want 0: the scheduled one waits in the outbox", n)
	}
	polltest.Until(t, 10*time.Second, "the relay waiting for the scheduled work's time", func() bool { return clk.waiting(due) })
	clk.set(due)
	fetchUntil(t, b, "later")
}

// acceptFor stores a message with delivery work for frontend fe, due now,
// written unrelayed (for the relay's rounds).
func acceptFor(t *testing.T, st persistence.Store, id, fe string) {
	t.Helper()
	register(t, st, fe)
	_, err := st.Accept(context.Background(), time.Now(), []persistence.NewMessage{{
		ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900001", Body: "hi", State: messages.StatePending,
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: fe},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRelayGoesOnPastRowsTheStreamRefuses: rows the stream refuses are
// given back, and would be taken first again in every round (they are the
// oldest): a backlog of more than a batch of them held up the rows of
// every other frontend behind them for good. The relay's next take starts
// past them, so the rows behind are relayed.
func TestRelayGoesOnPastRowsTheStreamRefuses(t *testing.T) {
	srv := bustest.Start(t)
	b := open(t, srv.URL())
	refuseAll(t, b, srv.URL(), "full")
	if _, err := b.Publish(context.Background(), []persistence.Relay{{Row: 2, MessageID: "second", Target: "full"}}); err == nil {
		t.Fatal("the stream took a second message for full")
	}

	st := sqlitetest.Open(t)
	for i := range 300 { // more than a batch (256)
		acceptFor(t, st, fmt.Sprintf("refused-%03d", i), "full")
	}
	acceptFor(t, st, "behind", "fe")
	r := bus.StartRelay(b, st, clock.Real{}, 1)
	defer r.Stop()
	fetchUntil(t, b, "behind")
}

// lines counts the log records of each message and keeps the attributes
// of the last of each.
type lines struct {
	mu    sync.Mutex
	n     map[string]int
	attrs map[string]map[string]string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Message]++
	as := map[string]string{"level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool {
		as[a.Key] = a.Value.String()
		return true
	})
	if l.attrs == nil {
		l.attrs = map[string]map[string]string{}
	}
	l.attrs[r.Message] = as
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

func (l *lines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// last is the attributes (and "level") of the last record of msg, nil
// when none was logged.
func (l *lines) last(msg string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attrs[msg]
}

// TestRelayDegradesTheBusWhilePublishesFail: publishes of the intake's
// rows that fail (the stream refuses them, the connection up) were
// dropped without a word, and the bus stayed up: the intake went on
// writing its work to publish and the workers waited on the bus, so the
// work waited for the backstop. Failures are now logged once per error,
// and after DegradeAfter in a row the bus is degraded (not Up: the intake
// writes unrelayed and the workers claim from the store) until a publish
// succeeds.
func TestRelayDegradesTheBusWhilePublishesFail(t *testing.T) {
	srv := bustest.Start(t)
	log := &lines{n: map[string]int{}}
	b := openWith(t, srv.URL(), func(c *bus.Config) { c.Logger = slog.New(log) })
	refuseAll(t, b, srv.URL(), "fe")

	st := sqlitetest.Open(t)
	r := bus.StartRelay(b, st, clock.Real{}, 1)
	defer r.Stop()
	for i := range 5 {
		r.Publish(accept(t, st, fmt.Sprintf("m-%d", i), true))
	}
	polltest.Until(t, 20*time.Second, "the bus degraded", func() bool { return !b.Up() })
	if state, why := b.State(); state != "down" || !strings.Contains(why, "degraded") || !strings.Contains(why, "maximum messages per subject") {
		t.Fatalf("State = %q, %q; want down, degraded, with the publish's error", state, why)
	}
	if r.Ready() {
		t.Fatal("the relay is Ready with the bus degraded: the intake would go on writing its work to publish")
	}
	const failed = "publishing delivery work to the bus failed; the rows go back to the outbox for the relay's rounds"
	if n := log.count(failed); n != 1 {
		t.Fatalf("%q logged %d times, want once (one error, several batches)", failed, n)
	}
	// The stream takes messages for fe again: the relay's next round
	// publishes, and the bus is up again.
	cfg := streamInfo(t, srv.URL()).Config
	cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject = -1, false
	if _, err := jetStream(t, srv.URL()).UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 20*time.Second, "the bus up again", func() bool { return b.Up() })
	want := []string{"first"}
	for i := range 5 {
		want = append(want, fmt.Sprintf("m-%d", i))
	}
	fetchUntil(t, b, want...)
}

// refuseAll makes the stream at url refuse every message for frontend
// target from now on: it holds one for it (published through b, row 1),
// and an operator's limit allows one a subject (discard new).
func refuseAll(t *testing.T, b *bus.Bus, url, target string) {
	t.Helper()
	if _, err := b.Publish(context.Background(), []persistence.Relay{{Row: 1, MessageID: "first", Target: target}}); err != nil {
		t.Fatal(err)
	}
	cfg := streamInfo(t, url).Config
	cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject = 1, true
	if _, err := jetStream(t, url).UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}
