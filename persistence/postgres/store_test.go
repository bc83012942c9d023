package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the base of every time the tests hand the store.
var t0 = time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)

// open opens a store on dsn and closes it when the test ends.
func open(t testing.TB, dsn string) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DSN = dsn
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// withFE registers frontend fe on s, the one the tests' messages are for:
// a store creates a message for local delivery only while its frontend is
// registered (persistence.LocalFrontend).
func withFE(t testing.TB, s *Store) *Store {
	t.Helper()
	now := time.Now()
	if err := s.PutFrontend(t.Context(), persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatalf("PutFrontend: %v", err)
	}
	return s
}

// delivery is a pending message with delivery work on target, due at t0.
func delivery(id, target string) persistence.NewMessage {
	return persistence.NewMessage{
		ID: id, SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "body of " + id,
		Frontend: target, State: messages.StatePending, Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target, DueAt: t0},
	}
}

func deliveries(prefix, target string, n int) []persistence.NewMessage {
	out := make([]persistence.NewMessage, n)
	for i := range out {
		out[i] = delivery(fmt.Sprintf("%s-%04d", prefix, i), target)
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	valid := DefaultConfig()
	valid.DSN = "postgres://u@localhost/db"
	cases := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"keyword DSN", func(c *Config) { c.DSN = "host=localhost dbname=db" }, nil},
		{"empty DSN", func(c *Config) { c.DSN = "" }, []string{"empty DSN"}},
		{"bad DSN", func(c *Config) { c.DSN = "postgres://u@localhost:notaport/db" }, []string{"does not parse"}},
		{"nil logger", func(c *Config) { c.Logger = nil }, []string{"nil Logger"}},
		{"zero MaxConns", func(c *Config) { c.MaxConns = 0 }, []string{"MaxConns 0"}},
		{"every problem at once", func(c *Config) { *c = Config{} }, []string{"empty DSN", "nil Logger", "MaxConns 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.change(&cfg)
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	if _, err := Open(t.Context(), Config{}); err == nil {
		t.Fatal("Open(Config{}) succeeded")
	}
}

func TestLoadMigrations(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("migrations %+v: want the first to be version 1", ms)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].version <= ms[i-1].version {
			t.Errorf("migration %d after %d", ms[i].version, ms[i-1].version)
		}
	}
}

// appliedVersions reads schema_migrations.
func appliedVersions(t *testing.T, s *Store) []int32 {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int32
	for rows.Next() {
		var v int32
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantAllVersions(t *testing.T, s *Store) {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for _, m := range ms {
		want = append(want, int32(m.version))
	}
	if got := appliedVersions(t, s); !slices.Equal(got, want) {
		t.Errorf("schema_migrations = %v, want each of %v once", got, want)
	}
}

// With NoMigrate, Open takes a database whose migrations up to this
// package's latest are exactly this package's, and a newer node's after
// them (nodes of this version run on that schema in a rolling upgrade).
// It refuses one that lacks any of them, the latest or one in the middle
// (ErrSchemaBehind, naming it: a node of this version applies it), and
// one that records another migration under one of their versions
// (ErrSchemaForeign: another build migrated it, and no node of this
// version would change that).
func TestOpenWithoutMigratingChecksEveryMigration(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	latest, mid := ms[len(ms)-1], ms[len(ms)/2]
	named := func(m migration) string { return fmt.Sprintf("%04d_%s", m.version, m.name) }
	for _, c := range []struct {
		name  string
		alter []string // run on a migrated schema
		want  error    // nil: it opens
		says  []string // in the error
	}{
		{"migrated", nil, nil, nil},
		{"a newer node's migration after", []string{fmt.Sprintf(
			"INSERT INTO schema_migrations (version, name) VALUES (%d, 'from_a_newer_node')", latest.version+1)}, nil, nil},
		{"the latest missing", []string{fmt.Sprintf("DELETE FROM schema_migrations WHERE version = %d", latest.version)},
			ErrSchemaBehind, []string{named(latest)}},
		{"one in the middle missing", []string{fmt.Sprintf("DELETE FROM schema_migrations WHERE version = %d", mid.version)},
			ErrSchemaBehind, []string{named(mid)}},
		{"another build's under a version", []string{fmt.Sprintf("UPDATE schema_migrations SET name = 'other_build' WHERE version = %d", mid.version)},
			ErrSchemaForeign, []string{fmt.Sprintf(`%04d is "other_build"`, mid.version), fmt.Sprintf("%q", mid.name)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			s := open(t, dsn)
			for _, q := range c.alter {
				if _, err := s.pool.Exec(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.DSN, cfg.NoMigrate = dsn, true
			s, err := Open(t.Context(), cfg)
			if err == nil {
				_ = s.Close()
			}
			if c.want == nil {
				if err != nil {
					t.Fatalf("Open without migrating: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Open without migrating: %v, want %v", err, c.want)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %s", err, w)
				}
			}
		})
	}
}

func TestReopenAppliesNothingTwiceAndKeepsData(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := withFE(t, open(t, dsn))
	wantAllVersions(t, s)
	if _, err := s.Accept(t.Context(), t0, []persistence.NewMessage{delivery("kept", "fe")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s = withFE(t, open(t, dsn))
		wantAllVersions(t, s)
		if _, err := s.GetMessage(t.Context(), "kept"); err != nil {
			t.Fatalf("after re-open: GetMessage: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Instances of a site start at once: each opens, on a schema that is
// there or on one the DSN's search_path names and none has made yet
// (one of them creates it).
func TestConcurrentOpensOnOneSchemaAllSucceed(t *testing.T) {
	t.Run("existing", func(t *testing.T) { concurrentOpens(t, pgtest.DSN(t)) })
	t.Run("missing", func(t *testing.T) {
		dsn, _ := pgtest.Absent(t, "")
		concurrentOpens(t, dsn)
	})
}

func concurrentOpens(t *testing.T, dsn string) {
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			cfg := DefaultConfig()
			cfg.DSN = dsn
			stores[i], errs[i] = Open(t.Context(), cfg)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	if t.Failed() {
		return
	}
	wantAllVersions(t, stores[0])
	withFE(t, stores[n-1])
	// Every store works on the same tables.
	if _, err := stores[n-1].Accept(t.Context(), t0, []persistence.NewMessage{delivery("shared", "fe")}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].GetMessage(t.Context(), "shared"); err != nil {
		t.Fatalf("a message accepted through one store is not visible through another: %v", err)
	}
}

func TestSchemasAreIsolated(t *testing.T) {
	a, b := withFE(t, open(t, pgtest.DSN(t))), open(t, pgtest.DSN(t))
	if _, err := a.Accept(t.Context(), t0, []persistence.NewMessage{delivery("only-in-a", "fe")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetMessage(t.Context(), "only-in-a"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("GetMessage in another schema: %v, want ErrNotFound", err)
	}
}

// TestClaimsFromTwoStoresNeverOverlap has several claimers on two stores (two
// instances of one site) drain one outbox at once: SKIP LOCKED must give
// every row to exactly one of them.
func TestClaimsFromTwoStoresNeverOverlap(t *testing.T) {
	dsn := pgtest.DSN(t)
	stores := []*Store{withFE(t, open(t, dsn)), open(t, dsn)}
	const total = 600
	batch := deliveries("c", "fe", total)
	for i := 0; i < total; i += 100 {
		if _, err := stores[0].Accept(t.Context(), t0, batch[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}

	const claimersPerStore = 4
	var (
		mu      sync.Mutex
		claimed = map[string]string{} // message id -> owner
		dups    []string
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	errs := make(chan error, 2*claimersPerStore)
	for si, s := range stores {
		for c := range claimersPerStore {
			owner := fmt.Sprintf("store-%d/claimer-%d", si, c)
			wg.Go(func() {
				<-start
				for {
					claim, err := s.ClaimWork(t.Context(), persistence.ClaimRequest{
						Kind: persistence.WorkDelivery, Target: "fe", Owner: owner,
						Limit: 7, Now: t0, Lease: time.Hour,
					})
					if err != nil {
						errs <- err
						return
					}
					if len(claim.Work) == 0 {
						return
					}
					mu.Lock()
					for _, w := range claim.Work {
						if prev, ok := claimed[w.MessageID]; ok {
							dups = append(dups, fmt.Sprintf("%s by %s and %s", w.MessageID, prev, owner))
						}
						claimed[w.MessageID] = owner
						if w.Message.Attempts != 1 {
							dups = append(dups, fmt.Sprintf("%s has attempts %d after one claim", w.MessageID, w.Message.Attempts))
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ClaimWork: %v", err)
	}
	for _, d := range dups {
		t.Errorf("claimed twice: %s", d)
	}
	if len(claimed) != total {
		t.Errorf("%d of %d messages claimed", len(claimed), total)
	}
	owners := map[string]bool{}
	for _, o := range claimed {
		owners[o] = true
	}
	t.Logf("%d rows claimed by %d claimers", len(claimed), len(owners))
}

// TestConcurrentBatchesDoNotDeadlock runs batch transactions that touch the
// same messages in different orders at once. A lock-order cycle would make
// Postgres fail one of them (deadlock detected) after deadlock_timeout.
func TestConcurrentBatchesDoNotDeadlock(t *testing.T) {
	dsn := pgtest.DSN(t)
	s1, s2 := withFE(t, open(t, dsn)), open(t, dsn)
	stores := []*Store{s1, s2}
	const n, workers = 200, 6
	all := deliveries("d", "fe", n)

	// Accept: every worker accepts all ids, shuffled; each id is created once.
	created := make([]int, workers)
	run(t, workers, func(w int, rng *rand.Rand) error {
		batch := slices.Clone(all)
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		res, err := stores[w%2].Accept(t.Context(), t0, batch)
		for _, r := range res {
			if r.Created {
				created[w]++
			}
		}
		return err
	})
	total := 0
	for _, c := range created {
		total += c
	}
	if total != n {
		t.Fatalf("%d messages created by concurrent overlapping accepts, want %d", total, n)
	}

	// CompleteWork: every worker records outcomes for all messages,
	// shuffled, some retries first; each final outcome is applied once.
	applied := make([]int, workers)
	run(t, workers, func(w int, rng *rand.Rand) error {
		var outcomes []persistence.Outcome
		for _, m := range all {
			result := persistence.ResultDelivered
			if rng.IntN(4) == 0 {
				outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: m.ID,
					Result: persistence.ResultRetry, RetryAt: t0.Add(time.Minute)})
			}
			outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: m.ID, Result: result})
		}
		rng.Shuffle(len(outcomes), func(i, j int) { outcomes[i], outcomes[j] = outcomes[j], outcomes[i] })
		// Claims and expiry run alongside.
		if _, err := stores[w%2].ClaimWork(t.Context(), persistence.ClaimRequest{
			Kind: persistence.WorkDelivery, Target: "fe", Owner: fmt.Sprint(w), Limit: 50, Now: t0, Lease: time.Second,
		}); err != nil {
			return err
		}
		if _, err := stores[w%2].ExpireMessages(t.Context(), persistence.ExpireRequest{
			Now: t0.Add(time.Hour), SubmittedBefore: t0.Add(-time.Hour), Limit: 50,
		}); err != nil {
			return err
		}
		res, err := stores[w%2].CompleteWork(t.Context(), t0.Add(time.Second), outcomes)
		for i, c := range res {
			if c == persistence.Applied && outcomes[i].Result == persistence.ResultDelivered {
				applied[w]++
			}
		}
		return err
	})
	total = 0
	for _, a := range applied {
		total += a
	}
	if total != n {
		t.Errorf("%d delivered outcomes applied, want %d (one per message)", total, n)
	}
	st, err := s1.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByState[messages.StateDelivered] != n || st.OutboxDepth != 0 {
		t.Errorf("after the outcomes: delivered %d, outbox %d; want %d and 0", st.ByState[messages.StateDelivered], st.OutboxDepth, n)
	}
}

// run runs fn in workers goroutines started together, each with its own
// seeded rand, and fails the test with their errors.
func run(t *testing.T, workers int, fn func(w int, rng *rand.Rand) error) {
	t.Helper()
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			errs[w] = fn(w, rand.New(rand.NewPCG(uint64(w), 42)))
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", w, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func TestAcceptSeqFollowsInputOrder(t *testing.T) {
	s := withFE(t, open(t, pgtest.DSN(t)))
	// Inserted in id order (a, b, c), numbered in input order.
	res, err := s.Accept(t.Context(), t0, []persistence.NewMessage{delivery("c", "fe"), delivery("a", "fe"), delivery("b", "fe")})
	if err != nil {
		t.Fatal(err)
	}
	if !(res[0].Message.Seq < res[1].Message.Seq && res[1].Message.Seq < res[2].Message.Seq) {
		t.Errorf("seqs c=%d a=%d b=%d, want increasing in input order", res[0].Message.Seq, res[1].Message.Seq, res[2].Message.Seq)
	}
	claim, err := s.ClaimWork(t.Context(), persistence.ClaimRequest{
		Kind: persistence.WorkDelivery, Target: "fe", Owner: "o", Limit: 10, Now: t0, Lease: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range claim.Work {
		got = append(got, w.MessageID)
	}
	if want := []string{"c", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("claimed %q, want input order %q", got, want)
	}
}

func TestClosedStoreReturnsErrClosed(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := map[string]error{
		"Ping":  s.Ping(ctx),
		"Close": s.Close(),
	}
	_, calls["Accept"] = s.Accept(ctx, t0, []persistence.NewMessage{delivery("x", "fe")})
	_, calls["GetMessage"] = s.GetMessage(ctx, "x")
	_, calls["ClaimWork"] = s.ClaimWork(ctx, persistence.ClaimRequest{
		Kind: persistence.WorkDelivery, Target: "fe", Owner: "o", Limit: 1, Now: t0, Lease: time.Minute,
	})
	_, calls["Routes"] = s.Routes(ctx)
	for name, err := range calls {
		if !errors.Is(err, persistence.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{delivery("x", "fe")}); !errors.Is(err, context.Canceled) {
		t.Errorf("Accept with a canceled context: %v, want context.Canceled", err)
	}
	if _, err := s.ClaimWork(ctx, persistence.ClaimRequest{
		Kind: persistence.WorkDelivery, Target: "fe", Owner: "o", Limit: 1, Now: t0, Lease: time.Minute,
	}); !errors.Is(err, context.Canceled) {
		t.Errorf("ClaimWork with a canceled context: %v, want context.Canceled", err)
	}
}

// TestMigration0002KeepsLedger upgrades a schema written at version 0001:
// its ledger entries become delivery entries and its messages are neither
// queued nor owed a report.
func TestMigration0002KeepsLedger(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema1, err := migrationFiles.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		string(schema1),
		`INSERT INTO schema_migrations (version, name) VALUES (1, 'init')`,
		`INSERT INTO messages (id, token, source_msisdn, destination_msisdn, body, state, source_smsc, dest_smsc,
			frontend, created_at, updated_at, submitted_at, history_len)
			VALUES ('old', 1, '', '', 'b', 'delivered', '', '', 'fe', now(), now(), now(), 0)`,
		`INSERT INTO ledger (message_id, target, result, at, detail) VALUES ('old', 'fe', 'delivered', now(), 'acked')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s := open(t, dsn)
	wantAllVersions(t, s)
	storetest.CheckUpgradeFrom0001(t, s, "old", "fe")
	var reportTo string
	if err := s.pool.QueryRow(ctx, "SELECT report_to FROM messages WHERE id = 'old'").Scan(&reportTo); err != nil || reportTo != "" {
		t.Errorf("report_to = %q, %v; want ''", reportTo, err)
	}
}

// TestFederationBatchesDoNotDeadlock runs the federation writes on one peer's
// messages from two stores at once: claims, forward outcomes, status
// reports, queueing and timing out. None may deadlock or fail, and at the
// end every message that still waits for the peer has exactly its one
// forward row, and no other message has one.
func TestFederationBatchesDoNotDeadlock(t *testing.T) {
	dsn := pgtest.DSN(t)
	stores := []*Store{open(t, dsn), open(t, dsn)}
	const n, workers, peer = 200, 6, "p"
	all := make([]persistence.NewMessage, n)
	for i := range all {
		all[i] = delivery(fmt.Sprintf("f-%04d", i), "far")
		all[i].DestSMSC = peer
		all[i].Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peer, DueAt: t0}
		if i%3 == 0 {
			all[i].State = messages.StateForwardQueued
		}
	}
	if _, err := stores[0].Accept(t.Context(), t0, all); err != nil {
		t.Fatal(err)
	}
	run(t, workers, func(w int, rng *rand.Rand) error {
		s := stores[w%2]
		now := t0.Add(time.Duration(w) * time.Second)
		if _, err := s.ClaimWork(t.Context(), persistence.ClaimRequest{
			Kind: persistence.WorkForward, Target: peer, Owner: fmt.Sprint(w), Limit: 30, Now: now, Lease: time.Second,
		}); err != nil {
			return err
		}
		var outcomes []persistence.Outcome
		var updates []persistence.StatusUpdate
		for _, m := range all {
			switch rng.IntN(6) {
			case 0:
				outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkForward, Target: peer, MessageID: m.ID,
					Result: persistence.ResultRetry, RetryAt: now.Add(time.Minute)})
			case 1:
				outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkForward, Target: peer, MessageID: m.ID,
					Result: persistence.ResultDelivered})
			case 2:
				updates = append(updates, persistence.StatusUpdate{ID: m.ID, From: peer, Result: persistence.ResultDelivered, At: now})
			}
		}
		rng.Shuffle(len(outcomes), func(i, j int) { outcomes[i], outcomes[j] = outcomes[j], outcomes[i] })
		rng.Shuffle(len(updates), func(i, j int) { updates[i], updates[j] = updates[j], updates[i] })
		if _, err := s.QueueForwards(t.Context(), now, peer, "down", 40); err != nil {
			return err
		}
		if _, err := s.CompleteWork(t.Context(), now, outcomes); err != nil {
			return err
		}
		if _, err := s.ApplyStatus(t.Context(), now, updates); err != nil {
			return err
		}
		_, err := s.FailForwards(t.Context(), persistence.ForwardExpiry{Now: now.Add(time.Hour), QueuedBefore: now.Add(-time.Duration(rng.IntN(3)) * time.Second), Limit: 20})
		return err
	})
	st, err := stores[0].Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waiting := st.ByState[messages.StatePending] + st.ByState[messages.StateForwardQueued]
	if st.ForwardQueue[peer] != waiting || st.OutboxDepth != waiting {
		t.Errorf("forward rows %d, outbox %d; want one per waiting message (%d): %v", st.ForwardQueue[peer], st.OutboxDepth, waiting, st.ByState)
	}
	var total int64
	for _, c := range st.ByState {
		total += c
	}
	if total != n {
		t.Errorf("%d messages counted, want %d", total, n)
	}
	t.Logf("states after the run: %v", st.ByState)
}

// TestDiskFullIsNoSpace: the server's disk_full error (raised for real by
// the server, from a trigger: the shared server's disk is never filled) is
// persistence.ErrNoSpace, Config.OnNoSpace is told of it, nothing of the
// write stays, and the store writes again once the server can.
func TestDiskFullIsNoSpace(t *testing.T) {
	s := withFE(t, open(t, pgtest.DSN(t)))
	var told []error
	s.onNoSpace = func(err error) { told = append(told, err) }
	ctx := t.Context()
	for _, q := range []string{
		`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`,
		`CREATE TRIGGER disk_full BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION disk_full()`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Accept(ctx, t0, deliveries("full", "fe", 3))
	if !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("Accept on a full disk: %v, want ErrNoSpace", err)
	}
	if len(told) != 1 || told[0].Error() != err.Error() {
		t.Errorf("OnNoSpace was told %v, want the Accept's error once", told)
	}
	if st, err := s.Stats(ctx); err != nil || st.ByState[messages.StatePending] != 0 || st.OutboxDepth != 0 {
		t.Fatalf("after the refused write: %+v, %v", st, err)
	}
	if _, err := s.pool.Exec(ctx, `DROP TRIGGER disk_full ON messages`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Accept(ctx, t0, deliveries("full", "fe", 3)); err != nil || !res[0].Created {
		t.Fatalf("Accept once the server can write: %v", err)
	}
}

// TestAcceptOfAnIDPurgedMeanwhile: a submission whose id was taken when it
// was inserted, by a message another instance's cleaner purged before the
// id's message was read back (its retention ended), is accepted anew, as
// a submission after its idempotency window is; the write does not fail
// with "neither created nor found" (which failed every submit of its
// group commit).
func TestAcceptOfAnIDPurgedMeanwhile(t *testing.T) {
	s := withFE(t, open(t, pgtest.DSN(t)))
	ctx := context.Background()
	nm := persistence.NewMessage{ID: "again", SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "b",
		Frontend: "fe", State: messages.StatePending, Detail: "accepted"}
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{nm}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE messages SET state = 'delivered', finalized_at = $2 WHERE id = $1`, nm.ID, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(48 * time.Hour)
	other := delivery("fresh", "fe")
	var out []persistence.Accepted
	p := s.acceptPart(later, []persistence.NewMessage{nm, other}, &out)
	b := &pgx.Batch{}
	p.queue(b)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil { // the insert: "again" is taken
		t.Fatal(err)
	}
	purged, err := s.Purge(ctx, persistence.PurgeRequest{Now: later, Limit: 10,
		Before: map[messages.State]time.Time{messages.StateDelivered: later.Add(-24 * time.Hour)}}, nil)
	if err != nil || len(purged) != 1 {
		t.Fatalf("purge: %v %v", purged, err)
	}
	if err := p.run(ctx, s.pool); err != nil {
		t.Fatalf("the accept whose taken id was purged meanwhile: %v", err)
	}
	if len(out) != 2 || !out[0].Created || out[0].Message.ID != "again" || !out[1].Created {
		t.Fatalf("accepted %+v, want both created", out)
	}
	m, err := s.GetMessage(ctx, "again")
	if err != nil || m.State != messages.StatePending {
		t.Fatalf("the message accepted anew: %+v %v", m, err)
	}
}

// TestAcceptReportsWhatItStoredWhenTheReadFails: a Write of new messages
// alone commits its insert in its first round trip and reads the ids that
// were taken in a second. When the second fails (here the server ends the
// connection just before it), the messages the insert created are stored
// and their work is due: the Write reports them created, and only the
// entry it could not read as Unread (a PartialAccept), instead of failing
// every entry as if nothing was stored. The same batch again finds every
// id stored.
func TestAcceptReportsWhatItStoredWhenTheReadFails(t *testing.T) {
	s := withFE(t, open(t, pgtest.DSN(t)))
	ctx := t.Context()
	taken := delivery("taken", "fe")
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{taken}); err != nil {
		t.Fatal(err)
	}
	endBefore(t, s, messagesByIDSQL)
	batch := []persistence.NewMessage{delivery("new-1", "fe"), taken, delivery("new-2", "fe")}
	w, err := s.Write(ctx, t0, persistence.Write{Accept: batch})
	var partial *persistence.PartialAccept
	if !errors.As(err, &partial) {
		t.Fatalf("Write whose read failed: %+v, %v; want a PartialAccept", w, err)
	}
	if partial.Err == nil || len(w.Accepted) != 0 {
		t.Fatalf("PartialAccept without its error (%v), or Written %+v set beside it", partial.Err, w)
	}
	got := partial.Accepted
	if len(got) != 3 || !got[0].Created || got[0].Message.ID != "new-1" || !got[1].Unread || got[1].Created ||
		!got[2].Created || got[2].Message.ID != "new-2" || got[0].Unread || got[2].Unread {
		t.Fatalf("partial results %+v; want new-1 and new-2 created, taken unread", got)
	}
	for _, id := range []string{"new-1", "new-2"} {
		if m, err := s.GetMessage(ctx, id); err != nil || m.State != messages.StatePending {
			t.Fatalf("%s reported created: %+v, %v", id, m, err)
		}
	}
	res, err := s.Accept(ctx, t0, batch)
	if err != nil || len(res) != 3 || res[0].Created || res[1].Created || res[2].Created || res[1].Message.ID != "taken" {
		t.Fatalf("the batch again: %+v, %v; want every id found stored", res, err)
	}
}

// endBefore makes the server end the connection of the first batch s
// sends that begins with the statement sql, just before it is sent (as a
// broken connection or a restarted server would): s gets a pool of its
// own that traces its batches, and the store's first pool ends it.
func endBefore(t *testing.T, s *Store, sql string) {
	t.Helper()
	cfg := s.pool.Config()
	admin := s.pool
	cfg.ConnConfig.Tracer = &ender{t: t, admin: admin, sql: sql}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.pool = pool
	t.Cleanup(admin.Close)
}

// ender is a pgx tracer that ends the backend of the first batch that
// begins with sql, and waits until it is gone.
type ender struct {
	t     *testing.T
	admin *pgxpool.Pool
	sql   string
	done  atomic.Bool
}

func (e *ender) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if len(data.Batch.QueuedQueries) == 0 || data.Batch.QueuedQueries[0].SQL != e.sql || e.done.Swap(true) {
		return ctx
	}
	var ended bool
	// With a timeout, pg_terminate_backend waits until the backend is gone.
	if err := e.admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", conn.PgConn().PID()).Scan(&ended); err != nil || !ended {
		e.t.Errorf("ending backend %d: %v, %v", conn.PgConn().PID(), ended, err)
	}
	return ctx
}

func (*ender) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*ender) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (*ender) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*ender) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPoolSessionsEndOrphanedTransactions: the pool's sessions have the
// server end a transaction left idle for 10 s, and probe a silent client,
// unless the DSN says otherwise (orphanSettings, sessionKeepalives). Without
// them a claim left open by a paused or cut-off instance held its share
// lock on ring_state until the pause ended or TCP noticed (two hours), and
// no master could publish meanwhile: the ring froze at its epoch. The last
// part shows the mechanism (with 1 s from the DSN): the orphan ends, and
// the publication's UPDATE, which waited for it, goes through.
func TestPoolSessionsEndOrphanedTransactions(t *testing.T) {
	dsn := pgtest.DSN(t)
	setting := func(s *Store, name string) string {
		t.Helper()
		var got string
		if err := s.pool.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	s := open(t, dsn)
	if got := setting(s, "idle_in_transaction_session_timeout"); got != "10s" {
		t.Errorf("idle_in_transaction_session_timeout = %s on the pool's session, want 10s", got)
	}
	var tcp bool
	if err := s.pool.QueryRow(t.Context(), "SELECT inet_client_addr() IS NOT NULL").Scan(&tcp); err != nil {
		t.Fatal(err)
	}
	for name, want := range sessionKeepalives {
		if !tcp {
			want = "0" // Postgres ignores them on a Unix socket and shows 0
		}
		if got := setting(s, name); got != want {
			t.Errorf("%s = %s on the pool's session, want %s (tcp %v)", name, got, want, tcp)
		}
	}

	own := open(t, dsn+"&idle_in_transaction_session_timeout=1s&tcp_keepalives_idle=7")
	if got := setting(own, "idle_in_transaction_session_timeout"); got != "1s" {
		t.Errorf("idle_in_transaction_session_timeout = %s with 1s in the DSN, want the DSN's", got)
	}
	if got := setting(own, "tcp_keepalives_idle"); tcp && got != "7" {
		t.Errorf("tcp_keepalives_idle = %s with 7 in the DSN, want the DSN's", got)
	}

	// A fenced claim's read of ring_state, left open by its client.
	orphan, err := own.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orphan.Rollback(context.Background()) }()
	if _, err := orphan.Exec(t.Context(), "SELECT epoch FROM ring_state WHERE id = 1 FOR SHARE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "UPDATE ring_state SET epoch = epoch + 1 WHERE id = 1"); err != nil {
		t.Fatalf("the publication's update behind an orphaned claim: %v", err)
	}
	if _, err := orphan.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Error("the orphaned transaction still runs after the server's timeout")
	}
}

// TestSessionsCarryTheApplicationName: every session of a store, its pool's
// and a leadership's, shows Config.ApplicationName in pg_stat_activity, so
// that an operator tells a site's instances apart there; a DSN that sets
// application_name keeps its own. Without it the sessions of all instances
// showed an empty application_name.
func TestSessionsCarryTheApplicationName(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := DefaultConfig()
	cfg.DSN, cfg.ApplicationName = dsn, "switchboard i-2 of "+t.Name()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var got string
	if err := s.pool.QueryRow(t.Context(), "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := cfg.ApplicationName; got != want {
		t.Errorf("the pool's session shows application_name %q, want %q", got, want)
	}
	l, err := s.TryLead(t.Context(), "ring-master")
	if err != nil || l == nil {
		t.Fatalf("TryLead: %v, %v", l, err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	var leaders int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity a
		WHERE application_name = $1 AND EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid = a.pid AND k.locktype = 'advisory')`,
		cfg.ApplicationName).Scan(&leaders); err != nil {
		t.Fatal(err)
	}
	if leaders != 1 {
		t.Errorf("%d sessions holding an advisory lock show the store's application_name, want the leadership's 1", leaders)
	}

	cfg.DSN = dsn + "&application_name=mine"
	own, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = own.Close() }()
	if err := own.pool.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "mine" {
		t.Errorf("application_name = %q with mine in the DSN, want the DSN's", got)
	}
}

// TestDSNSizesThePool: pgxpool's pool_max_conns in the DSN sizes the pool,
// the one way an operator has to size a node's (it has no flag); Open used
// to overwrite it with Config.MaxConns.
func TestDSNSizesThePool(t *testing.T) {
	dsn := pgtest.DSN(t)
	if got := open(t, dsn).pool.Config().MaxConns; got != DefaultConfig().MaxConns {
		t.Errorf("pool of %d connections without pool_max_conns, want Config.MaxConns %d", got, DefaultConfig().MaxConns)
	}
	if got := open(t, dsn+"&pool_max_conns=3").pool.Config().MaxConns; got != 3 {
		t.Errorf("pool of %d connections with pool_max_conns=3 in the DSN, want 3", got)
	}
}

// TestRingReadOutlivesSessionsTheServerEnded: the read of the stored ring
// assignment that a node makes when it has just taken the master lock
// again (the lock's session was ended with the others: pg_terminate_backend
// of the node's sessions, a failover) goes through on a fresh session. It
// took a pooled connection the server had ended, failed with 57P01, and
// the node, which cannot lead without it, stopped.
func TestRingReadOutlivesSessionsTheServerEnded(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := DefaultConfig()
	cfg.DSN, cfg.ApplicationName = dsn, "switchboard ended of "+t.Name()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	// Three sessions in the pool, used a moment ago (none is pinged).
	var held []*pgxpool.Conn
	for range 3 {
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	admin, err := pgx.Connect(t.Context(), pgtest.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	const sessions = "FROM pg_stat_activity WHERE application_name = $1"
	if _, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend(pid) "+sessions, cfg.ApplicationName); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var left int
		if err := admin.QueryRow(t.Context(), "SELECT count(*) "+sessions, cfg.ApplicationName).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left after pg_terminate_backend", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Ring(t.Context()); err != nil {
		t.Fatalf("Ring after the server ended the pool's sessions: %v", err)
	}
	if _, err := s.Ring(t.Context()); err != nil {
		t.Fatalf("the second Ring after the server ended the pool's sessions: %v", err)
	}
}

// TestDriverErrorSaysItsCauseOnce: a driver error that already ends with
// the text of the error it is kept matchable for (pgconn's "timeout:
// context deadline exceeded") keeps its text as it is. The log of every
// call that timed out read "timeout: context deadline exceeded: context
// deadline exceeded".
func TestDriverErrorSaysItsCauseOnce(t *testing.T) {
	for _, cause := range []error{context.DeadlineExceeded, context.Canceled, persistence.ErrNotFound} {
		in := fmt.Errorf("error preprocessing batch (prepare): timeout: %w", cause)
		got := driverError(in)
		if got.Error() != in.Error() || !errors.Is(got, cause) {
			t.Errorf("driverError(%q) = %q (errors.Is %v), want the same text, matching %v", in, got, errors.Is(got, cause), cause)
		}
	}
	in := fmt.Errorf("lookup: %w", fmt.Errorf("%w (no row)", persistence.ErrNotFound))
	if got := driverError(in); got.Error() != in.Error()+": "+persistence.ErrNotFound.Error() || !errors.Is(got, persistence.ErrNotFound) {
		t.Errorf("driverError(%q) = %q, want its text and the sentinel's", in, got)
	}
}
