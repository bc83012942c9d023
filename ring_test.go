package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// siteToken is the --api-token every instance of site-a shares: without
// --tls-ca a master lets a member's ring calls in by it (docs/ring.md).
const siteToken = "site-a-admin-token-0123"

// siteConfig is instance id of site "site-a" on the Postgres database dsn.
func siteConfig(t *testing.T, dsn, id string) switchboard.Config {
	cfg := testConfig(t)
	cfg.Name, cfg.InstanceID, cfg.Postgres = "site-a", id, dsn
	cfg.InsecureSkipVerify = true // the instances serve self-signed certificates
	cfg.APIToken = siteToken
	cfg.RingPublishInterval = 500 * time.Millisecond
	cfg.RingReconnectBackoffMin = 50 * time.Millisecond
	cfg.RingReconnectBackoffMax = 200 * time.Millisecond
	cfg.RingReconnectMaxAttempts = 20
	return cfg
}

func (h *harness) ringStatus() messages.RingStatus {
	h.t.Helper()
	var st messages.RingStatus
	h.must(200, "GET", "/api/ring/status", nil, &st)
	return st
}

// waitRing waits until every instance holds one epoch covering the whole
// ring with exactly the members named, and returns the master's id.
func waitRing(t *testing.T, hs []*harness, members ...string) string {
	t.Helper()
	slices.Sort(members)
	return waitMembers(t, hs, "members", func(messages.RingMember) bool { return true }, members)
}

// waitMembers waits until every instance of hs holds one epoch whose
// members that pick takes are exactly want (sorted), the master's
// covering the whole ring, and returns the master's id; what names them
// in its errors.
func waitMembers(t *testing.T, hs []*harness, what string, pick func(messages.RingMember) bool, want []string) string {
	t.Helper()
	var master string
	polltest.Eventually(t, 20*time.Second, func() error {
		var epoch uint64
		for i, h := range hs {
			st := h.ringStatus()
			var ids []string
			for _, m := range st.Members {
				if pick(m) {
					ids = append(ids, m.InstanceID)
				}
			}
			switch {
			case !slices.Equal(ids, want):
				return fmt.Errorf("%s sees %s %v, want %v", h.cfg.InstanceID, what, ids, want)
			case i > 0 && st.Epoch != epoch:
				return fmt.Errorf("%s holds epoch %d, %s %d", h.cfg.InstanceID, st.Epoch, hs[0].cfg.InstanceID, epoch)
			case st.Role == messages.RoleMaster && st.Coverage != 1:
				return fmt.Errorf("master %s: coverage %v", h.cfg.InstanceID, st.Coverage)
			}
			epoch, master = st.Epoch, st.Master
		}
		return nil
	})
	return master
}

func fatalOf(t *testing.T, h *harness, within time.Duration) error {
	t.Helper()
	select {
	case err := <-h.node.Fatal():
		return err
	case <-time.After(within):
		t.Fatalf("%s did not stop", h.cfg.InstanceID)
		return nil
	}
}

// consume polls frontend "fe" at every instance of hs and acks what it gets
// as delivered, counting offers by id in got, until got holds want ids;
// then every id must have been offered once.
func consume(t *testing.T, hs []*harness, got map[string]int, want int) {
	t.Helper()
	polltest.Eventually(t, 30*time.Second, func() error {
		for _, h := range hs {
			for _, m := range h.poll("fe", 50, 100, 60_000) {
				got[m.ID]++
				h.ack("fe", messages.DeliveryResult{ID: m.ID, Status: messages.Delivered})
			}
		}
		if len(got) < want {
			return fmt.Errorf("%d of %d offered", len(got), want)
		}
		return nil
	})
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s offered %d times", id, n)
		}
	}
}

// TestRingSiteSplitsWorkAndFailsOver: three instances of one site on one
// Postgres elect a master, split the ring, deliver every message once
// whichever instance accepted it, and hand the master's work over when it
// stops.
func TestRingSiteSplitsWorkAndFailsOver(t *testing.T) {
	dsn := pgtest.DSN(t)
	var hs []*harness
	for _, id := range []string{"a1", "a2", "a3"} {
		hs = append(hs, startNode(t, siteConfig(t, dsn, id)))
	}
	master := waitRing(t, hs, "a1", "a2", "a3")
	if master != "a1" {
		t.Fatalf("master %q, want a1 (the first to take the lock)", master)
	}
	hs[1].pullFrontend("fe", "44")
	var ids []string
	for i := range 90 {
		ids = append(ids, hs[i%3].submit(fmt.Sprintf("m%03d", i), "4470000"+fmt.Sprint(i)))
	}
	// Poll every instance (a load balancer in front of the site would):
	// each offers the messages in its own ranges.
	got := map[string]int{}
	consume(t, hs, got, len(ids))
	for _, id := range ids {
		hs[2].waitState(id, messages.StateDelivered)
	}

	// The master stops: one of the others takes the lock and the ring.
	hs[0].stop()
	rest := hs[1:]
	master = waitRing(t, rest, "a2", "a3")
	if master == "a1" {
		t.Fatal("a1 is still the master after it stopped")
	}
	for i := range 30 {
		ids = append(ids, rest[i%2].submit(fmt.Sprintf("n%03d", i), "4480000"+fmt.Sprint(i)))
	}
	// A consumer connected to one instance gets every message, whichever
	// instance accepted it and whichever owns its token: a poll takes due
	// messages of the whole ring (the lease makes it their one owner).
	consume(t, rest[:1], got, len(ids))
}

// TestRingSiteDirectoryIsReadThrough: a frontend registered through one
// instance routes a submit to another at once, even when the change never
// spreads through the ring (here it is written straight into the store, as
// by an instance killed before it told the master), and a destination
// nobody routes is still refused with no_route.
func TestRingSiteDirectoryIsReadThrough(t *testing.T) {
	dsn := pgtest.DSN(t)
	var hs []*harness
	for _, id := range []string{"b1", "b2"} {
		cfg := siteConfig(t, dsn, id)
		cfg.RingPublishInterval = time.Minute // no periodic refresh in this test
		hs = append(hs, startNode(t, cfg))
	}
	waitRing(t, hs, "b1", "b2")
	st, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Logger: slog.New(slog.DiscardHandler), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 6 {
		fe, prefix := fmt.Sprintf("fe%d", i), fmt.Sprintf("46%d", i)
		if i%2 == 0 {
			hs[0].pullFrontend(fe, prefix)
		} else {
			now := time.Now()
			if err := st.PutFrontend(context.Background(), messages.Frontend{Name: fe, Mode: messages.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
				t.Fatal(err)
			}
			if err := st.PutRoute(context.Background(), messages.Route{Prefix: prefix, Frontend: fe, UpdatedAt: now}); err != nil {
				t.Fatal(err)
			}
		}
		id := hs[1].submit(fmt.Sprintf("r%d", i), prefix+"1234")
		if m := hs[1].message(id); m.Frontend != fe {
			t.Fatalf("%s went to frontend %q, want %s", id, m.Frontend, fe)
		}
	}
	hs[1].apiError(422, messages.CodeNoRoute, "POST", "/api/messages", map[string]string{
		"id": "nowhere", "source_msisdn": "15550001", "destination_msisdn": "479999", "message_body": "x"})
}

// TestRingInstanceIDInUse: a second process started with an instance id
// that a running one holds refuses to start (it would free the running
// one's leases and claim as the same owner); once that one has stopped,
// the id is free.
func TestRingInstanceIDInUse(t *testing.T) {
	dsn := pgtest.DSN(t)
	first := startNode(t, siteConfig(t, dsn, "c1"))
	waitRing(t, []*harness{first}, "c1")

	cfg := siteConfig(t, dsn, "c1")
	cfg.RingReconnectMaxAttempts = 3
	err := startRefused(t, cfg, "a second process with instance id c1 started")
	if want := `InstanceID: "c1" is in use`; !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: %v, want it to say %s", err, want)
	}
	if st := first.ringStatus(); st.Role != messages.RoleMaster || st.Coverage != 1 {
		t.Fatalf("the running c1 after the refused start: %+v", st)
	}

	first.stop()
	again := startNode(t, siteConfig(t, dsn, "c1"))
	waitRing(t, []*harness{again}, "c1")
}

// unreachableElector is the elector of a store that does not answer.
type unreachableElector struct{}

func (unreachableElector) TryLead(context.Context, string) (persistence.Leadership, error) {
	return nil, errors.New("failed to connect: connection refused")
}

// TestRingInstanceLockStoreFailureIsNotAnIDInUse: an instance whose store
// does not give it its instance lock (Postgres away: at start, or for
// longer than the reconnect policy while it runs) stopped saying
// `--instance-id: "c1" is in use`, which sent the operator looking for a
// second process instead of at the database. It says that the store
// failed to give it.
func TestRingInstanceLockStoreFailureIsNotAnIDInUse(t *testing.T) {
	cfg := siteConfig(t, pgtest.DSN(t), "c1")
	cfg.Elector = unreachableElector{}
	cfg.RingReconnectMaxAttempts = 2
	err := startRefused(t, cfg, "started without its instance lock")
	if strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Start: %v, want the store's failure, not an id in use", err)
	}
}

// TestRingInstanceLockTakenAgain: an instance whose lock's connection is
// ended by the server takes its lock again and goes on; the id stays
// refused to a second process.
func TestRingInstanceLockTakenAgain(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := startNode(t, siteConfig(t, dsn, "d1"))
	waitRing(t, []*harness{h}, "d1")
	sessions := pgtest.WatchSessions(t, dsn)
	// The session holding the advisory lock of instance/d1.
	key := postgres.LockKey(sessions.Schema, "instance/d1")
	holder := func() int32 { return sessions.Holder(key) }
	old := holder()
	if old == 0 {
		t.Fatal("no session holds the instance lock of d1")
	}
	sessions.End(old)
	polltest.Eventually(t, 20*time.Second, func() error {
		if pid := holder(); pid == 0 || pid == old {
			return fmt.Errorf("instance lock held by session %d (the ended one was %d)", pid, old)
		}
		return nil
	})
	select {
	case err := <-h.node.Fatal():
		t.Fatalf("the node stopped: %v", err)
	default:
	}
	cfg := siteConfig(t, dsn, "d1")
	cfg.RingReconnectMaxAttempts = 2
	_ = startRefused(t, cfg, "a second d1 started after the first took its lock again")
}

// TestRingLoneInstanceWithoutTLSCAOutlivesADatabaseBlip: an auto instance
// on Postgres without --tls-ca (a node run on Postgres alone: it has no way
// to follow another master) whose ring master lock is lost with its
// database session, as in a blip of the server or the network, takes the
// lock again and leads on, as one with --tls-ca does, rather than stopping
// the node.
func TestRingLoneInstanceWithoutTLSCAOutlivesADatabaseBlip(t *testing.T) {
	r := startLoneRing(t)
	if r.old == 0 {
		t.Fatal("no session holds the ring master lock")
	}
	r.sessions.End(r.old)
	r.leadsOn(t)
}

// TestRingLoneInstanceOutlivesTheEndOfAllItsSessions: the server ends
// every session of a lone auto instance (pg_terminate_backend of those
// its application_name names, as a DBA does before maintenance): it
// takes its ring master lock again and leads on. It read the stored
// assignment on a pooled session the server had ended too, and stopped.
func TestRingLoneInstanceOutlivesTheEndOfAllItsSessions(t *testing.T) {
	r := startLoneRing(t)
	name := "switchboard g1 of " + r.cfg.Name
	db, err := pgx.Connect(t.Context(), r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close(context.Background()) }()
	var ended int
	for range 3 {
		r.h.must(200, "GET", "/api/messages", nil, nil) // the pool's sessions, used a moment ago
	}
	if err := db.QueryRow(t.Context(), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended < 3 { // the locks' two and the pool's
		t.Fatalf("%d sessions show the application_name %q, want the instance's", ended, name)
	}
	r.leadsOn(t)
}

// loneRing is a lone auto instance g1 on Postgres without --tls-ca (a
// node run on Postgres alone: it has no way to follow another master),
// leading: old is the session of its ring master lock (key), first the
// epoch it leads at.
type loneRing struct {
	dsn      string
	cfg      switchboard.Config
	h        *harness
	sessions *pgtest.Sessions
	key      int64
	old      int32
	first    uint64
}

func startLoneRing(t *testing.T) *loneRing {
	t.Helper()
	r := &loneRing{dsn: pgtest.DSN(t)}
	r.cfg = siteConfig(t, r.dsn, "g1")
	r.cfg.InsecureSkipVerify = false // no --tls-ca either: no way to call a master
	r.h = startNode(t, r.cfg)
	waitRing(t, []*harness{r.h}, "g1")
	r.first = r.h.ringStatus().Epoch
	r.sessions = pgtest.WatchSessions(t, r.dsn)
	r.key = postgres.LockKey(r.sessions.Schema, "ring-master")
	r.old = r.sessions.Holder(r.key)
	return r
}

// leadsOn waits for the instance, whose lock's session the server ended,
// to hold the lock again on another session and lead on past its first
// epoch with every token, failing the test if the node stops.
func (r *loneRing) leadsOn(t *testing.T) {
	t.Helper()
	polltest.Eventually(t, 30*time.Second, func() error {
		select {
		case err := <-r.h.node.Fatal():
			t.Fatalf("the node stopped after its sessions ended: %v", err)
		default:
		}
		if pid := r.sessions.Holder(r.key); pid == 0 || pid == r.old {
			return fmt.Errorf("ring master lock held by session %d (the ended one was %d)", pid, r.old)
		}
		if st := r.h.ringStatus(); st.Role != messages.RoleMaster || st.Epoch <= r.first || st.Coverage != 1 {
			return fmt.Errorf("ring status %+v, want master past epoch %d with coverage 1", st, r.first)
		}
		return nil
	})
	select {
	case err := <-r.h.node.Fatal():
		t.Fatalf("the node stopped: %v", err)
	default:
	}
}

// TestRingRefusesForeignSlaves: a slave of another cluster or region, or
// with a service its master lacks, is refused with the code that says why
// and stops (the process exits non-zero); the master's ring is unchanged.
// So is one that cannot prove it is of the site: without --tls-ca, a
// slave without the site's admin token.
func TestRingRefusesForeignSlaves(t *testing.T) {
	dsn := pgtest.DSN(t)
	mcfg := siteConfig(t, dsn, "m")
	mcfg.RingRole, mcfg.Cluster, mcfg.Region = messages.RoleMaster, "c1", "r1"
	mcfg.RingServices = []string{messages.ServiceDelivery}
	m := startNode(t, mcfg)
	for _, tc := range []struct {
		name, cluster, region string
		services              []string
		token                 string
		code                  string
	}{
		{"cluster", "c2", "r1", []string{messages.ServiceDelivery}, siteToken, messages.CodeRingCluster},
		{"region", "c1", "r2", []string{messages.ServiceDelivery}, siteToken, messages.CodeRingRegion},
		{"services", "c1", "r1", messages.AllServices, siteToken, messages.CodeRingServices},
		{"token", "c1", "r1", []string{messages.ServiceDelivery}, "", messages.CodeUnauthorized},
		{"another token", "c1", "r1", []string{messages.ServiceDelivery}, "not-the-site-token-0123", messages.CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := siteConfig(t, dsn, "s-"+strings.ReplaceAll(tc.name, " ", "-"))
			cfg.RingRole, cfg.RingMaster = messages.RoleSlave, "https://"+m.node.Addr()
			cfg.Cluster, cfg.Region, cfg.RingServices = tc.cluster, tc.region, tc.services
			cfg.APIToken = tc.token
			s := startNode(t, cfg)
			err := fatalOf(t, s, 20*time.Second)
			if err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("slave stopped with %v, want %s", err, tc.code)
			}
		})
	}
	if st := m.ringStatus(); len(st.Members) != 1 || st.Coverage != 1 {
		t.Fatalf("master's ring changed: %+v", st)
	}
}

// TestRingSlaveGivesUpOnAnUnreachableMaster: after
// --ring-reconnect-max-attempts failed calls the slave stops.
func TestRingSlaveGivesUpOnAnUnreachableMaster(t *testing.T) {
	cfg := siteConfig(t, pgtest.DSN(t), "lonely")
	cfg.RingRole, cfg.RingMaster = messages.RoleSlave, "https://127.0.0.1:1"
	cfg.RingReconnectMaxAttempts = 3
	s := startNode(t, cfg)
	err := fatalOf(t, s, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "unreachable after 3 attempts") {
		t.Fatalf("slave stopped with %v", err)
	}
	if st := s.ringStatus(); st.Role != messages.RoleSlave || st.Epoch != 0 {
		t.Fatalf("status of a slave that never joined: %+v", st)
	}
}

// ownedBy is an id whose token is in the ranges of instance in st.
func ownedBy(t *testing.T, st messages.RingStatus, instance string) string {
	t.Helper()
	for i := range 1 << 16 {
		id := fmt.Sprintf("owned-%d", i)
		for _, mem := range st.Members {
			for _, r := range mem.Ranges {
				if mem.InstanceID == instance && r.Contains(messages.TokenOf(id)) {
					return id
				}
			}
		}
	}
	t.Fatalf("no id found in the ranges of %s: %+v", instance, st.Members)
	return ""
}

// TestRingSlaveWaitsForAStoppingMaster: a master's graceful stop can take
// up to its --shutdown-timeout (requests under way finish, deliveries
// drain) before it lets the lock go. Its slave, told that it is stopping,
// waits without counting its failures and then takes the lock (role auto),
// where it used to give up after --ring-reconnect-max-attempts and exit.
func TestRingSlaveWaitsForAStoppingMaster(t *testing.T) {
	dsn := pgtest.DSN(t)
	mcfg := siteConfig(t, dsn, "m1")
	mcfg.WebhookTimeout = time.Minute // the drain waits for the held call
	m := startNode(t, mcfg)
	scfg := siteConfig(t, dsn, "s1")
	scfg.RingReconnectMaxAttempts = 3 // at 50-200 ms apart: given up within a second
	s := startNode(t, scfg)
	if master := waitRing(t, []*harness{m, s}, "m1", "s1"); master != "m1" {
		t.Fatalf("master %q, want m1", master)
	}

	// s hears of m's stop from its open subscription call (a 503); between
	// two calls it would find m's listener closed, which counts as m being
	// unreachable. Its call is open once m lists it as subscribed.
	polltest.Until(t, 10*time.Second, "s1 subscribed at m", func() bool {
		return slices.Contains(m.ringStatus().Subscribed, "s1")
	})

	// A delivery under way holds m's stop in its drain, as a slow frontend
	// would (a request's body on its way no longer does: the stop cuts
	// it): a webhook that answers once released, called for a message m
	// delivers, one whose token is in m's ranges.
	release := make(chan struct{})
	called := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	answer := sync.OnceFunc(func() { close(release) })
	defer answer() // before hook.Close, which waits for the call
	m.webhookFrontend("held", hook.URL, "4470")
	m.submit(ownedBy(t, m.ringStatus(), "m1"), "4470000001")
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("m did not call the webhook")
	}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.stop()
	}()
	// m is stopping and holds the lock for as long as the slow submit
	// lasts: far longer than s's three attempts.
	select {
	case err := <-s.node.Fatal():
		t.Fatalf("the slave gave up while its master was stopping: %v", err)
	case <-stopped:
		t.Fatal("m stopped while a request was still under way")
	case <-time.After(3 * time.Second):
	}
	answer()
	<-stopped

	if master := waitRing(t, []*harness{s}, "s1"); master != "s1" {
		t.Fatalf("master %q after m stopped, want s1", master)
	}
	select {
	case err := <-s.node.Fatal():
		t.Fatalf("the slave stopped: %v", err)
	default:
	}
}

// TestRingSecondMasterWaitsForTheLockThenStops: --ring-role master on a
// site that has one waits for the lock (a restarted master's old session
// may still hold it) and stops when it stays taken.
func TestRingSecondMasterWaitsForTheLockThenStops(t *testing.T) {
	dsn := pgtest.DSN(t)
	first := siteConfig(t, dsn, "m1")
	first.RingRole = messages.RoleMaster
	startNode(t, first)
	second := siteConfig(t, dsn, "m2")
	second.RingRole, second.RingReconnectMaxAttempts = messages.RoleMaster, 3
	h := startNode(t, second)
	err := fatalOf(t, h, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "lock is still held after 3 attempts") {
		t.Fatalf("second master stopped with %v", err)
	}
}

// TestRingInstanceLockLostToAnotherProcessStops: a running instance whose
// instance lock's session ends while a second process with its id waits
// for that lock loses the lock to it. The second starts (and frees the
// first's leases: ReleaseLeases); the first, finding the lock held by
// another session, must stop at once: two processes running as one
// owner is what the lock is there to prevent. It kept running for its
// whole reconnect policy (here 40 tries, ~8 s; ~50 s by default).
func TestRingInstanceLockLostToAnotherProcessStops(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := siteConfig(t, dsn, "f1")
	cfg.RingReconnectMaxAttempts = 40
	var firstLogs *logtest.Buffer
	cfg.Logger, firstLogs = logtest.New()
	first := startNode(t, cfg)
	waitRing(t, []*harness{first}, "f1")

	sessions := pgtest.WatchSessions(t, dsn)
	key := postgres.LockKey(sessions.Schema, "instance/f1")
	holder := func() int32 { return sessions.Holder(key) }
	old := holder()
	if old == 0 {
		t.Fatal("no session holds the instance lock of f1")
	}

	// A second process with id f1 waits for the lock (tries 50..200 ms apart).
	cfg2 := siteConfig(t, dsn, "f1")
	cfg2.RingReconnectMaxAttempts = 200
	second, err := switchboard.New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- second.Start(context.Background()) }()
	t.Cleanup(func() { _ = second.Stop(context.Background()) })
	time.Sleep(500 * time.Millisecond) // it is waiting now

	// The first takes its lock again when its check of the connection
	// (every second) comes before the second's next try: no loss, and
	// nothing this test is about. Its session is ended again until the
	// second has the lock (its Start returns).
	retakes := func() int { return len(firstLogs.Records(t, "lock taken again")) }
	var secondErr error
	for ended := 0; ; ended++ {
		sessions.End(old)
		polltest.Eventually(t, 20*time.Second, func() error {
			select {
			case secondErr = <-started:
				return nil
			default:
			}
			if retakes() > ended {
				return nil
			}
			return fmt.Errorf("the lock ended with session %d is taken by neither process", old)
		})
		if retakes() == ended {
			break
		}
		if ended == 9 {
			t.Fatal("the first took its lock again ten times before the second's try")
		}
		t.Logf("the first took its lock again before the second's try; ending its session again")
		polltest.Eventually(t, 20*time.Second, func() error {
			if pid := holder(); pid == 0 || pid == old {
				return fmt.Errorf("instance lock held by session %d", pid)
			}
			return nil
		})
		old = holder()
	}
	if secondErr != nil {
		t.Fatalf("second Start: %v", secondErr)
	}
	at := time.Now()
	// The first notices the loss within its lock check (1 s) and finds the
	// lock held by another session: that is no loss to ride out.
	select {
	case err := <-first.node.Fatal():
		t.Logf("first stopped %v after the lock changed hands: %v", time.Since(at), err)
	case <-time.After(3 * time.Second):
		t.Errorf("the first f1 still runs %v after another process took its instance lock: two processes run as owner f1",
			time.Since(at))
		select {
		case err := <-first.node.Fatal():
			t.Logf("first stopped only %v after the lock changed hands: %v", time.Since(at), err)
		case <-time.After(20 * time.Second):
			t.Logf("first still running after %v", time.Since(at))
		}
	}
}
