package ring_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
	"github.com/switchboard-dev/switchboard/transport"
)

// The coordinator's shell, on synctest's virtual time: a real SQLite store,
// a real actor system, a transport the test plays the master with.

const publish = 30 * time.Second

func self(id string) messages.RingJoin {
	return messages.RingJoin{InstanceID: id, Node: "site", Address: id + ":7000", Services: messages.AllServices}
}

type shell struct {
	sys   *actor.ActorSystem
	pid   *actor.PID
	store *heldStore
	fatal chan error
	stop  func() error // stops the coordinator (once)
	// frontends, peers and directory are what the coordinator sent to
	// the workers' supervisor, the peers actor and the intake.
	frontends, peers, directory chan any

	mu sync.Mutex
	// failures are the coordinator's panics (the supervisor's events).
	failures []*actor.SupervisorEvent
}

// panics are the coordinator's failures so far, each a restart.
func (sh *shell) panics() []*actor.SupervisorEvent {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Clone(sh.failures)
}

// probe stands for an actor the coordinator signals: it passes on every
// message but the actor system's own.
type probe chan any

func (p probe) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		p <- c.Message()
	}
}

// spawnProbe starts a probe; got receives what it is sent.
func spawnProbe(sys *actor.ActorSystem) (*actor.PID, chan any) {
	got := make(chan any, 16)
	return sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return probe(got) })), got
}

// heldStore holds the store calls named in held (Ring, PublishRing, Ping) until
// the test lets them go or their context ends.
type heldStore struct {
	persistence.Store
	mu   sync.Mutex
	held map[string]bool
	gate chan struct{}
	// lose: the next PublishRing commits, then fails as if its answer
	// had been lost on the way back.
	lose bool
	// fail, when set, fails every PublishRing.
	fail error
}

// loseAnswer makes the next PublishRing commit and then fail.
func (h *heldStore) loseAnswer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lose = true
}

// hold makes the calls named wait from now on.
func (h *heldStore) hold(calls ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range calls {
		h.held[c] = true
	}
}

// release lets every held call go, and the next ones pass.
func (h *heldStore) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.held)
	close(h.gate)
	h.gate = make(chan struct{})
}

func (h *heldStore) wait(ctx context.Context, call string) error {
	h.mu.Lock()
	held, gate := h.held[call], h.gate
	h.mu.Unlock()
	if !held {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldStore) PublishRing(ctx context.Context, lead persistence.Leadership, prev uint64, s persistence.RingState) error {
	if err := h.wait(ctx, "PublishRing"); err != nil {
		return err
	}
	h.mu.Lock()
	lose, fail := h.lose, h.fail
	h.lose = false
	h.mu.Unlock()
	if fail != nil {
		return fail
	}
	if err := h.Store.PublishRing(ctx, lead, prev, s); err != nil || !lose {
		return err
	}
	return errors.New("connection reset by peer (the commit went through)")
}

func (h *heldStore) Ring(ctx context.Context) (persistence.RingState, error) {
	if err := h.wait(ctx, "Ring"); err != nil {
		return persistence.RingState{}, err
	}
	return h.Store.Ring(ctx)
}

func (h *heldStore) Ping(ctx context.Context) error {
	if err := h.wait(ctx, "Ping"); err != nil {
		return err
	}
	return h.Store.Ping(ctx)
}

// startShell starts a coordinator of role with tr (may be nil) on a fresh
// store whose calls named in held wait from the start; its actor system
// and store close when the bubble's test ends.
func startShell(t *testing.T, role string, tr transport.Ring, master string, held ...string) *shell {
	t.Helper()
	return startShellWith(t, func(c *ring.Config) { c.Role, c.Transport, c.MasterAddr = role, tr, master }, held...)
}

// subscribe has i-1 join (the assignment of epoch 2, with two members)
// and subscribe with a poll that waits a publish interval; it returns the
// poll.
func (sh *shell) subscribe(t *testing.T) *messages.RingPollRequest {
	t.Helper()
	join := make(chan messages.RingAnswer, 1)
	sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
	a := (<-join).Assignment
	if a.Epoch != 2 || len(a.Members) != 2 {
		t.Fatalf("assignment after the join: epoch %d, %d members", a.Epoch, len(a.Members))
	}
	poll := &messages.RingPollRequest{Poll: messages.RingPoll{InstanceID: "i-1", Epoch: 2, WaitMs: publish.Milliseconds()},
		Reply: make(chan messages.RingAnswer, 1)}
	sh.sys.Root.Send(sh.pid, poll)
	return poll
}

// startShellWith is startShell with the coordinator's Config set by set
// (its role, transport, master, elector, member document).
func startShellWith(t *testing.T, set func(*ring.Config), held ...string) *shell {
	t.Helper()
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "ring.db")
	cfg.Checkpoint = -1
	st, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := ring.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	sh := &shell{sys: sys, store: &heldStore{Store: st, held: map[string]bool{}, gate: make(chan struct{})}, fatal: make(chan error, 1)}
	sh.store.hold(held...)
	sys.EventStream.Subscribe(func(ev any) {
		if se, ok := ev.(*actor.SupervisorEvent); ok {
			sh.mu.Lock()
			sh.failures = append(sh.failures, se)
			sh.mu.Unlock()
		}
	})
	frontends, fch := spawnProbe(sys)
	peers, pch := spawnProbe(sys)
	directory, dch := spawnProbe(sys)
	sh.frontends, sh.peers, sh.directory = fch, pch, dch
	rcfg := ring.Config{
		Self: self("i-0"), PublishInterval: publish,
		Reconnect: ring.Reconnect{MaxAttempts: 3, Min: 2 * time.Second, Max: 6 * time.Second, Jitter: 0.5},
		Store:     sh.store, Clock: clock.Real{}, Seed: 1, Logger: slog.New(slog.DiscardHandler),
		Metrics: metrics, Shares: ring.NewShares(0, nil), Frontends: frontends, Peers: peers, Directory: directory,
		Fatal: func(err error) { sh.fatal <- err },
	}
	set(&rcfg)
	prod, err := ring.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	sh.pid = sh.sys.Root.Spawn(actor.PropsFromProducer(prod))
	sh.stop = sync.OnceValue(func() error { return sh.sys.Root.StopFuture(sh.pid).Wait() })
	t.Cleanup(func() {
		_ = sh.stop()
		sh.sys.Shutdown()
		_ = st.Close()
	})
	return sh
}

func (sh *shell) status(t *testing.T) messages.RingStatus {
	t.Helper()
	reply := make(chan messages.RingStatus, 1)
	sh.sys.Root.Send(sh.pid, &messages.RingStatusRequest{Reply: reply})
	return <-reply
}

// TestCoordinatorMasterPublishesAdmitsAndDrops: a master publishes its
// first assignment to the store, admits a joiner in a new epoch, answers a
// subscription when the publish interval has passed, and drops a member
// that stopped polling.
func TestCoordinatorMasterPublishesAdmitsAndDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "")
		synctest.Wait()
		if st := sh.status(t); st.Role != messages.RoleMaster || st.Epoch != 1 || st.Coverage != 1 {
			t.Fatalf("status after start: %+v", st)
		}
		if stored, err := sh.store.Ring(context.Background()); err != nil || stored.Epoch != 1 || stored.Master != "i-0" {
			t.Fatalf("stored ring: %+v, %v", stored, err)
		}

		poll := sh.subscribe(t)
		time.Sleep(publish - time.Second)
		synctest.Wait()
		select {
		case ans := <-poll.Reply:
			t.Fatalf("a subscription holding the current epoch was answered early: %+v", ans)
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if ans := <-poll.Reply; ans.Err != nil || ans.Assignment.Epoch != 2 {
			t.Fatalf("subscription after the publish interval: %+v", ans)
		}

		// i-1 polls no more: after the master's grace it is dropped.
		time.Sleep(3 * publish)
		synctest.Wait()
		if st := sh.status(t); len(st.Members) != 1 || st.Epoch != 3 {
			t.Fatalf("status after i-1 went silent: epoch %d, members %+v", st.Epoch, st.Members)
		}
	})
}

// master is a transport whose master refuses or fails as told.
type master struct {
	mu     sync.Mutex
	calls  int
	err    error
	leaves int
}

func (m *master) RingJoin(ctx context.Context, addr string, j messages.RingJoin) (messages.RingAssignment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	return messages.RingAssignment{}, m.err
}

func (m *master) RingPoll(ctx context.Context, addr string, p messages.RingPoll) (messages.RingAssignment, error) {
	return m.RingJoin(ctx, addr, messages.RingJoin{})
}

func (m *master) RingLeave(context.Context, string, messages.RingLeave) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaves++
	return nil
}

// TestCoordinatorSlaveGivesUpOnItsBackoff: a slave whose master does not
// answer tries --ring-reconnect-max-attempts times, its backoff apart, then
// reports the failure that stops the node.
func TestCoordinatorSlaveGivesUpOnItsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &master{err: errors.New("connection refused")}
		start := time.Now()
		sh := startShell(t, messages.RoleSlave, tr, "m:7000")
		err := <-sh.fatal
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "unreachable after 3 attempts") {
			t.Fatalf("fatal: %v", err)
		}
		// Two waits between three calls: 2 s then 4 s, less up to half
		// of each (jitter 0.5).
		if tr.calls != 3 || took < 3*time.Second || took > 6*time.Second {
			t.Fatalf("%d calls over %v, want 3 over 3-6 s", tr.calls, took)
		}
		if st := sh.status(t); st.Role != messages.RoleSlave || st.Epoch != 0 {
			t.Fatalf("status of a slave that never joined: %+v", st)
		}
	})
}

// TestCoordinatorMasterServesWhileAPublicationHangs: the store call that
// publishes a joiner's assignment runs off the mailbox: while it hangs the
// master answers a status request and a subscription behind the current
// epoch without any time passing, and the join is answered only once its
// assignment is stored.
func TestCoordinatorMasterServesWhileAPublicationHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "")
		synctest.Wait()
		join := make(chan messages.RingAnswer, 1)
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
		if a := (<-join).Assignment; a.Epoch != 2 {
			t.Fatalf("first join: epoch %d, want 2", a.Epoch)
		}

		sh.store.hold("PublishRing")
		start := time.Now()
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-2"), Reply: join})
		synctest.Wait()
		select {
		case ans := <-join:
			t.Fatalf("the join was answered before its assignment was stored: %+v", ans)
		default:
		}
		if st := sh.status(t); st.Epoch != 2 || len(st.Members) != 2 || time.Since(start) != 0 {
			t.Fatalf("status while publishing, after %v: epoch %d, %d members", time.Since(start), st.Epoch, len(st.Members))
		}
		poll := &messages.RingPollRequest{Poll: messages.RingPoll{InstanceID: "i-1", Epoch: 1, WaitMs: publish.Milliseconds()},
			Reply: make(chan messages.RingAnswer, 1)}
		sh.sys.Root.Send(sh.pid, poll)
		if ans := <-poll.Reply; ans.Err != nil || ans.Assignment.Epoch != 2 {
			t.Fatalf("a subscription behind the epoch, while publishing: %+v", ans)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the master answered after %v: the hanging store call held its mailbox", took)
		}

		sh.store.release()
		if ans := <-join; ans.Err != nil || ans.Assignment.Epoch != 3 || len(ans.Assignment.Members) != 3 {
			t.Fatalf("the join once published: %+v", ans)
		}
	})
}

// TestCoordinatorSlaveStopsWhileTheStoreHangs: a joined slave whose store
// ping hangs answers a status request and stops (saying goodbye to its
// master) without waiting for the ping.
func TestCoordinatorSlaveStopsWhileTheStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &master{}
		sh := startShell(t, messages.RoleSlave, tr, "m:7000", "Ping")
		synctest.Wait() // joined; the ping before the first poll hangs
		start := time.Now()
		if st := sh.status(t); st.Role != messages.RoleSlave {
			t.Fatalf("status: %+v", st)
		}
		if err := sh.stop(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the slave answered and stopped after %v: the hanging ping held its mailbox", took)
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.calls != 1 || tr.leaves != 1 {
			t.Fatalf("%d calls and %d goodbyes to the master, want the join and one goodbye", tr.calls, tr.leaves)
		}
	})
}

// TestCoordinatorHoldsRequestsWhileItDecides: while a master reads the
// stored assignment it leads from, a join waits (it is not told "not the
// master") and a status request is answered; the join is answered once
// the master has published.
func TestCoordinatorHoldsRequestsWhileItDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "", "Ring")
		join := make(chan messages.RingAnswer, 1)
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
		synctest.Wait()
		select {
		case ans := <-join:
			t.Fatalf("a join answered while the master was not decided yet: %+v", ans)
		default:
		}
		if st := sh.status(t); st.Role != "" {
			t.Fatalf("status while deciding: %+v", st)
		}
		sh.store.release()
		if ans := <-join; ans.Err != nil || ans.Assignment.Epoch != 2 || len(ans.Assignment.Members) != 2 {
			t.Fatalf("the join once the master leads: %+v", ans)
		}
	})
}

// TestCoordinatorRetriedPublicationAdoptsTheStoredAssignment: a
// publication commits but its answer is lost, and a join comes meanwhile.
// The retry, a second assignment under the same epoch, fails the
// compare-and-set; the master recognises its own commit and takes the
// assignment the store holds for current, so it publishes the joiner's in
// the next epoch, and the joiner's claims of the ranges the master gave it
// pass the store's fence.
func TestCoordinatorRetriedPublicationAdoptsTheStoredAssignment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "", "PublishRing")
		sh.store.loseAnswer()
		synctest.Wait() // epoch 1, i-0 alone, is being published
		join := make(chan messages.RingAnswer, 1)
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
		synctest.Wait()
		sh.store.release() // epoch 1 commits; its answer is lost
		<-join             // answered with what there is: the publication failed
		time.Sleep(time.Second)
		synctest.Wait() // the retry, a second after the failure

		st := sh.status(t)
		stored, err := sh.store.Ring(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Epoch != 2 || len(st.Members) != 2 || stored.Epoch != st.Epoch {
			t.Fatalf("master's view: epoch %d, members %+v; stored: epoch %d, members %+v, want both epoch 2 with i-0 and i-1",
				st.Epoch, st.Members, stored.Epoch, stored.Members)
		}
		for _, m := range st.Members {
			_, err := sh.store.ClaimWork(context.Background(), persistence.ClaimRequest{
				Kind: persistence.WorkDelivery, Target: "fe", Owner: m.InstanceID, Limit: 10, Now: time.Now(), Lease: time.Minute,
				Ring: &persistence.RingClaim{Epoch: st.Epoch, Ranges: m.Ranges}})
			if err != nil {
				t.Errorf("%s's claim of its ranges %v under epoch %d: %v", m.InstanceID, m.Ranges, st.Epoch, err)
			}
		}
	})
}

// elector grants the lock to every try (until refuse), and keeps what it
// granted.
type elector struct {
	mu    sync.Mutex
	leads []*lead
	// refuse: every try from now on finds the lock held by another
	// session.
	refuse bool
}

// refuseAll makes every try from now on find the lock held.
func (e *elector) refuseAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refuse = true
}

// lead is one granted lock: lost when the test (or its holder) releases it.
type lead struct {
	lost chan struct{}
	once sync.Once
}

func (l *lead) Lost() <-chan struct{} { return l.lost }

func (l *lead) Release(context.Context) error {
	l.once.Do(func() { close(l.lost) })
	return nil
}

func (e *elector) TryLead(context.Context, string) (persistence.Leadership, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuse {
		return nil, nil
	}
	l := &lead{lost: make(chan struct{})}
	e.leads = append(e.leads, l)
	return l, nil
}

// granted is what the elector granted, in order.
func (e *elector) granted() []*lead {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.leads)
}

// TestCoordinatorAutoLackingAServiceFollows: under role auto an instance
// whose services lack one does not try the master lock, free as it is: it
// follows as a slave, so that an instance running every service leads.
func TestCoordinatorAutoLackingAServiceFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := &elector{}
		sh := startShellWith(t, func(c *ring.Config) {
			c.Role, c.Elector, c.Transport = messages.RoleAuto, el, &master{}
			c.Self.Services = []string{messages.ServiceDelivery}
		})
		synctest.Wait()
		if st := sh.status(t); st.Role != messages.RoleSlave || st.Epoch != 0 {
			t.Fatalf("status of an auto instance without forward: %+v, want a slave", st)
		}
		if n := len(el.granted()); n != 0 {
			t.Fatalf("an auto instance without forward took the master lock (%d times)", n)
		}
	})
}

// TestCoordinatorLeadsAgainAfterLosingTheLock: an auto master that moved
// ranges (members joined and left), loses its lock, stands down and takes
// the lock again leads from a new master core, whose count of moved ranges
// starts from zero: it publishes, without a panic (the metric's count
// cannot go down) and so without a restart that gives the lock up.
func TestCoordinatorLeadsAgainAfterLosingTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := &elector{}
		sh := startShellWith(t, func(c *ring.Config) {
			c.Role, c.Elector, c.Transport = messages.RoleAuto, el, &master{}
		})
		synctest.Wait()
		for range 3 {
			join := make(chan messages.RingAnswer, 1)
			sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
			if a := <-join; a.Err != nil {
				t.Fatal(a.Err)
			}
			leave := make(chan error, 1)
			sh.sys.Root.Send(sh.pid, &messages.RingLeaveRequest{Leave: messages.RingLeave{InstanceID: "i-1"}, Reply: leave})
			if err := <-leave; err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		first := sh.status(t).Epoch

		// The lock is lost (a database blip): the master stands down, finds
		// no other, takes the lock again and leads again.
		_ = el.granted()[0].Release(context.Background())
		synctest.Wait()
		for _, e := range sh.panics() {
			t.Errorf("the coordinator failed: %v", e.Reason)
		}
		leads := el.granted()
		if len(leads) != 2 {
			t.Fatalf("%d locks taken, want 2: the first and the one it leads again with", len(leads))
		}
		select {
		case <-leads[1].Lost():
			t.Fatal("the lock taken again was given up")
		default:
		}
		if st := sh.status(t); st.Role != messages.RoleMaster || st.Epoch != first+1 {
			t.Fatalf("status after leading again: %+v, want master at epoch %d", st, first+1)
		}
	})
}

// publishOver stores s over the assignment of epoch prev, as the late
// publication of an old master lands: it confirmed its lock before this
// instance took it, so the store checks no lock now.
func publishOver(st persistence.Store, prev uint64, s persistence.RingState) error {
	return st.PublishRing(context.Background(), nil, prev, s)
}

// received is what got holds now, in order.
func received(got chan any) []any {
	var out []any
	for {
		select {
		case m := <-got:
			out = append(out, m)
		default:
			return out
		}
	}
}

// TestCoordinatorSignalsWorkersAndIntake: when this instance's partitions
// change, the delivery workers' supervisor is kicked for every worker and
// the peers actor for every peer's forwards and then their status reports;
// the master has the intake read the directory again every publish
// interval, a slave on every assignment it receives.
func TestCoordinatorSignalsWorkersAndIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "")
		synctest.Wait()
		if got := received(sh.frontends); !reflect.DeepEqual(got, []any{&messages.Kick{}}) {
			t.Fatalf("frontends after the first assignment: %+v", got)
		}
		if got := received(sh.peers); !reflect.DeepEqual(got, []any{&messages.KickPeer{}, &messages.KickPeer{Status: true}}) {
			t.Fatalf("peers after the first assignment: %+v", got)
		}
		if got := received(sh.directory); len(got) != 0 {
			t.Fatalf("directory reloaded before a publish interval: %+v", got)
		}
		time.Sleep(publish)
		synctest.Wait()
		if got := received(sh.directory); !reflect.DeepEqual(got, []any{&messages.ReloadDirectory{}}) {
			t.Fatalf("directory after a publish interval: %+v", got)
		}
		if got := append(received(sh.frontends), received(sh.peers)...); len(got) != 0 {
			t.Fatalf("kicks without a change of partition: %+v", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleSlave, &master{}, "m:7000", "Ping")
		synctest.Wait() // joined (an empty assignment: no partition changed)
		if got := received(sh.directory); !reflect.DeepEqual(got, []any{&messages.ReloadDirectory{}}) {
			t.Fatalf("directory after the join: %+v", got)
		}
		if got := append(received(sh.frontends), received(sh.peers)...); len(got) != 0 {
			t.Fatalf("kicks for an empty assignment: %+v", got)
		}
	})
}

// TestCoordinatorStaleCompareAndSetWhileHoldingTheLockPublishesOver: a
// publication of an old master, one that checked its lock before this
// instance took it and committed after this instance read the store, is
// stored over this master's view. This master's next publication fails the
// compare-and-set; the store confirmed the lock in that publication's
// transaction, so this master still leads: it publishes over the old
// master's assignment in the next epoch, keeping its lock, its role and the
// joiner, instead of standing down and leaving the site without a master.
func TestCoordinatorStaleCompareAndSetWhileHoldingTheLockPublishesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := &elector{}
		sh := startShellWith(t, func(c *ring.Config) {
			c.Role, c.Elector, c.Transport = messages.RoleAuto, el, &master{}
		})
		synctest.Wait() // epoch 1: i-0 alone
		old := persistence.RingState{Epoch: 2, Master: "i-9", MasterAddress: "i-9:7000", Owners: []persistence.RangeOwner{
			{Service: messages.ServiceDelivery, Range: ring.Whole[0], Owner: "i-9"},
			{Service: messages.ServiceForward, Range: ring.Whole[0], Owner: "i-9"},
		}, PublishedAt: time.Now()}
		if err := publishOver(sh.store.Store, 1, old); err != nil {
			t.Fatal(err)
		}

		join := make(chan messages.RingAnswer, 1)
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
		ans := <-join
		if ans.Err != nil || ans.Assignment.Epoch != 3 || len(ans.Assignment.Members) != 2 {
			t.Fatalf("the join: %+v, want epoch 3 with i-0 and i-1", ans)
		}
		synctest.Wait()
		if st := sh.status(t); st.Role != messages.RoleMaster || st.Epoch != 3 {
			t.Fatalf("status: %+v, want master at epoch 3", st)
		}
		stored, err := sh.store.Ring(context.Background())
		if err != nil || stored.Epoch != 3 || stored.Master != "i-0" {
			t.Fatalf("stored: epoch %d by %q, %v; want epoch 3 by i-0", stored.Epoch, stored.Master, err)
		}
		leads := el.granted()
		if len(leads) != 1 {
			t.Fatalf("%d locks taken, want the first only", len(leads))
		}
		select {
		case <-leads[0].Lost():
			t.Fatal("the master gave its lock up")
		default:
		}
		for _, m := range ans.Assignment.Members {
			_, err := sh.store.ClaimWork(context.Background(), persistence.ClaimRequest{
				Kind: persistence.WorkDelivery, Target: "fe", Owner: m.InstanceID, Limit: 10, Now: time.Now(), Lease: time.Minute,
				Ring: &persistence.RingClaim{Epoch: 3, Ranges: m.Ranges}})
			if err != nil {
				t.Errorf("%s's claim of its ranges %v under epoch 3: %v", m.InstanceID, m.Ranges, err)
			}
		}
	})
}

// TestCoordinatorPublicationAfterTheLockIsLostIsRefused: a publication
// under way when the master loses its lock (another session takes it) is
// refused by the store when it gets there: a master that no longer holds
// the lock stores nothing.
func TestCoordinatorPublicationAfterTheLockIsLostIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := &elector{}
		sh := startShellWith(t, func(c *ring.Config) {
			c.Role, c.Elector, c.Transport = messages.RoleAuto, el, &master{}
		})
		synctest.Wait() // epoch 1: i-0 alone
		sh.store.hold("PublishRing")
		join := make(chan messages.RingAnswer, 1)
		sh.sys.Root.Send(sh.pid, &messages.RingJoinRequest{Join: self("i-1"), Reply: join})
		synctest.Wait() // epoch 2, with i-1, is on its way to the store

		el.refuseAll() // another session takes the lock once it is free
		_ = el.granted()[0].Release(context.Background())
		synctest.Wait()
		if ans := <-join; ans.Err == nil {
			t.Fatalf("the join was answered by a master that lost its lock: %+v", ans)
		}
		sh.store.release()
		synctest.Wait()
		if stored, err := sh.store.Ring(context.Background()); err != nil || stored.Epoch != 1 {
			t.Fatalf("stored: epoch %d by %q, %v; want epoch 1: the publication after the lock was lost was stored",
				stored.Epoch, stored.Master, err)
		}
		if st := sh.status(t); st.Role != messages.RoleSlave {
			t.Fatalf("status: %+v, want a slave", st)
		}
	})
}

// TestCoordinatorPublicationFailedForWantOfRoomIsNotAnError: on a store
// with no room the master's publication fails every second, and each
// failure logged an ERROR line, where the node logs the storage gate
// closing once. One that failed for want of room is logged at debug; any
// other failure stays an error.
func TestCoordinatorPublicationFailedForWantOfRoomIsNotAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want slog.Level
	}{
		{"no room", fmt.Errorf("postgres: publish ring: %w: could not extend file", persistence.ErrNoSpace), slog.LevelDebug},
		{"other", errors.New("connection reset"), slog.LevelError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logger, logs := logtest.New()
				sh := startShellWith(t, func(c *ring.Config) { c.Role, c.Logger = messages.RoleMaster, logger }, "PublishRing")
				sh.store.mu.Lock()
				sh.store.fail = tc.err
				sh.store.mu.Unlock()
				sh.store.release()
				time.Sleep(3500 * time.Millisecond)
				synctest.Wait()
				got := logs.Records(t, "publishing the ring assignment failed; trying again")
				if len(got) < 3 {
					t.Fatalf("%d failed publications logged in 3.5 s, want one a second: %s", len(got), logs)
				}
				for _, r := range got {
					if r["level"] != tc.want.String() {
						t.Fatalf("failed publications logged as %v, want at %v", got, tc.want)
					}
				}
			})
		})
	}
}

// TestCoordinatorDropsAMemberGraceAfterItsPollIsGone: a slave killed in the
// middle of its subscription call (its connection closed, the handler
// withdraws the poll) is dropped its grace later, min(publish interval,
// 5 s), as docs/ring.md says, not when the master next happens to look
// (its other subscriptions' deadlines or the next republish, up to a
// publish interval later).
func TestCoordinatorDropsAMemberGraceAfterItsPollIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := startShell(t, messages.RoleMaster, nil, "")
		synctest.Wait()
		poll := sh.subscribe(t)
		time.Sleep(publish / 3) // i-1 is subscribed well past its join
		synctest.Wait()

		// i-1 dies: its call's connection closes and the poll is withdrawn.
		sh.sys.Root.Send(sh.pid, &messages.RingPollGone{Request: poll})
		grace := min(publish, 5*time.Second)
		time.Sleep(grace + time.Second)
		synctest.Wait()
		if st := sh.status(t); len(st.Members) != 1 || st.Epoch != 3 {
			t.Fatalf("status %v after i-1's subscription call was gone: epoch %d, members %+v (want i-1 dropped, epoch 3)",
				grace+time.Second, st.Epoch, st.Members)
		}
	})
}

// TestCoordinatorLoneMasterWaitingForItsLockIsNoMaster: an auto master
// that cannot call another (no Transport) and loses its lock waits for it
// with the reconnect policy, neither master nor slave (its status's role
// is empty). switchboard_ring_role kept saying master meanwhile, so a
// dashboard and the coverage alert, which selects the master by it, took
// it for a master for the whole wait.
func TestCoordinatorLoneMasterWaitingForItsLockIsNoMaster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := &elector{}
		reg := prometheus.NewRegistry()
		sh := startShellWith(t, func(c *ring.Config) {
			c.Role, c.Elector, c.Transport = messages.RoleAuto, el, nil
			m, err := ring.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			c.Metrics = m
		})
		synctest.Wait()
		if err := wantRoles(reg, 1, 0); err != nil {
			t.Fatalf("switchboard_ring_role while leading: %v", err)
		}
		el.refuseAll()
		_ = el.granted()[0].Release(context.Background())
		synctest.Wait()
		if st := sh.status(t); st.Role != "" {
			t.Fatalf("status while waiting for the lock: role %q, want none", st.Role)
		}
		if err := wantRoles(reg, 0, 0); err != nil {
			t.Fatalf("switchboard_ring_role while waiting for the lock (status role \"\"), want master 0 and slave 0: %v", err)
		}
	})
}

// wantRoles compares switchboard_ring_role in reg with master and slave.
func wantRoles(reg *prometheus.Registry, master, slave int) error {
	return testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`# HELP switchboard_ring_role 1 on this instance's current ring role (master or slave).
# TYPE switchboard_ring_role gauge
switchboard_ring_role{role="master"} %d
switchboard_ring_role{role="slave"} %d
`, master, slave)), "switchboard_ring_role")
}
