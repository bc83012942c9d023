package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"
	sqlitedriver "modernc.org/sqlite"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/space/spacetest"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
)

// seedingStore gives the suite its LedgerSeeder hook without putting a
// test-only method on the production type.
type seedingStore struct{ *Store }

func (s seedingStore) SeedLedger(ctx context.Context, e persistence.LedgerEntry) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO ledger (message_id, kind, target, result, at, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		e.MessageID, string(e.Kind), e.Target, string(e.Result), toDB(e.At), e.Detail)
	return err
}

// SeedCredential implements storetest.CredentialSeeder.
func (s seedingStore) SeedCredential(ctx context.Context, c messages.Credential) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO credentials (name, role, token_sha256, created_at) VALUES (?, ?, ?, ?)`,
		c.Name, string(c.Role), c.TokenHash, toDB(c.CreatedAt))
	return err
}

// Recount implements storetest.Recounter.
func (s seedingStore) Recount(ctx context.Context) (counted, maintained persistence.Counts, err error) {
	if s.closed.Load() {
		return nil, nil, persistence.ErrClosed
	}
	counted = persistence.Counts{}
	for _, q := range []string{`SELECT 'state', state, count(*) FROM messages GROUP BY state`,
		`SELECT kind, target, count(*) FROM outbox GROUP BY kind, target`} {
		rows, err := s.rdb.QueryContext(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		if err := scanEach(rows, func(r *sql.Rows) error {
			var k persistence.Counter
			var n int64
			err := r.Scan(&k.Of, &k.Key, &n)
			counted.Merge(persistence.Counts{k: n})
			return err
		}); err != nil {
			return nil, nil, err
		}
	}
	maintained, err = readCounts(ctx, s.rdb)
	return counted, maintained, err
}

// Orphans implements storetest.ReferenceChecker.
func (s seedingStore) Orphans(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, persistence.ErrClosed
	}
	return queryIDs(ctx, s.rdb, storetest.OrphansSQL)
}

// UnholdHistory implements storetest.HistoryRewinder.
func (s seedingStore) UnholdHistory(ctx context.Context, id string, keep int) error {
	for _, q := range storetest.UnholdHistorySQL(keep) {
		if _, err := s.wdb.ExecContext(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

func openAt(t testing.TB, path string, log *slog.Logger) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Path = path
	if log != nil {
		cfg.Logger = log
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, persistence.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return seedingStore{openAt(t, filepath.Join(t.TempDir(), "switchboard.db"), nil)}
	})
}

// recorder is a slog handler that keeps the messages it sees.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// TestOpenRefusesADatabaseOpenElsewhere: a store open in one place (here
// another open file of this process, as a second node's would be) makes a
// second Open of its database fail, naming the lock; once the first is
// closed the database opens. Two nodes on one data directory both ran and
// claimed, as one owner, the same work.
func TestOpenRefusesADatabaseOpenElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.db")
	first := openAt(t, path, nil)
	cfg := DefaultConfig()
	cfg.Path = path
	if s, err := Open(context.Background(), cfg); err == nil {
		_ = s.Close()
		t.Fatal("a second Open of a database open elsewhere succeeded")
	} else if !strings.Contains(err.Error(), "is in use by another running process (it holds "+path+LockSuffix+")") {
		t.Fatalf("second Open: %v, want it in use, naming the lock", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, nil)
}

// TestOpenHoldsATakenLock: the lock TakeLock took refuses TakeLock and
// Open elsewhere until the store Open made with it (Config.Lock) is
// closed. A node takes it before it writes its certificate beside the
// store.
func TestOpenHoldsATakenLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "switchboard.db")
	l, err := TakeLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if other, err := TakeLock(path); err == nil {
		_ = other.Close()
		t.Fatal("TakeLock of a lock taken succeeded")
	}
	cfg := DefaultConfig()
	cfg.Path, cfg.Lock = path+"-other", l
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "is the lock of") {
		t.Fatalf("Open of another path with the lock: %v, want it refused", err)
	}
	if l, err = TakeLock(path); err != nil { // the failed Open released it
		t.Fatal(err)
	}
	cfg.Path, cfg.Lock = path, l
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if other, err := TakeLock(path); err == nil {
		_ = other.Close()
		t.Fatal("TakeLock of an open store's lock succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, nil)
}

func TestReopenKeepsDataAndDoesNotReapplyMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "switchboard.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

	embeddedMigrations, err := fs.Glob(migrationFiles(), "*.sql")
	if err != nil || len(embeddedMigrations) == 0 {
		t.Fatalf("embedded migrations: %v, %v", embeddedMigrations, err)
	}

	first := &recorder{}
	s := withFE(t, openAt(t, path, slog.New(first)))
	if n := first.count("migration applied"); n != len(embeddedMigrations) {
		t.Errorf("fresh database: %d migrations applied, want %d", n, len(embeddedMigrations))
	}
	nm := persistence.NewMessage{ID: "keep-me", Body: "still here", State: messages.StatePending, Frontend: "fe", Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: now}}
	if _, err := s.Accept(ctx, now, []persistence.NewMessage{nm}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRoute(ctx, persistence.Route{Prefix: "44", Frontend: "fe", UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	second := &recorder{}
	s = withFE(t, openAt(t, path, slog.New(second)))
	if n := second.count("migration applied"); n != 0 {
		t.Errorf("reopen applied %d migrations, want 0", n)
	}
	var recorded int
	if err := s.rdb.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != len(embeddedMigrations) {
		t.Errorf("schema_migrations has %d rows, want %d", recorded, len(embeddedMigrations))
	}
	m, err := s.GetMessage(ctx, "keep-me")
	if err != nil || m.Body != "still here" || len(m.History) != 1 {
		t.Errorf("after reopen: %+v, %v", m, err)
	}
	c, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "fe", Owner: "o", Limit: 10, Now: now, Lease: time.Minute})
	if err != nil || len(c.Work) != 1 {
		t.Errorf("work after reopen: %+v, %v", c, err)
	}
	if rs, err := s.Routes(ctx); err != nil || len(rs) != 1 {
		t.Errorf("routes after reopen: %+v, %v", rs, err)
	}
}

func TestMigrateAppliesOnlyNewOnes(t *testing.T) {
	ctx := context.Background()
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "m.db"), nil))
	db, log := s.wdb, slog.New(slog.DiscardHandler)

	// Versions above the embedded ones, so they run on top of the real schema.
	v1 := fstest.MapFS{"0901_alpha.sql": {Data: []byte("CREATE TABLE alpha (x INTEGER);")}}
	v2 := fstest.MapFS{
		"0901_alpha.sql": v1["0901_alpha.sql"],
		"0902_beta.sql":  {Data: []byte("CREATE TABLE beta (y TEXT); INSERT INTO beta VALUES ('one');")},
	}
	withEmbedded := func(m fstest.MapFS) fstest.MapFS {
		out := fstest.MapFS{}
		names, _ := fs.Glob(migrationFiles(), "*.sql")
		for _, n := range names {
			b, _ := fs.ReadFile(migrationFiles(), n)
			out[n] = &fstest.MapFile{Data: b}
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, step := range []struct {
		fsys fstest.MapFS
		want []int
	}{
		{withEmbedded(v1), []int{901}},
		{withEmbedded(v2), []int{902}}, // 0901 again would fail: alpha exists
		{withEmbedded(v2), nil},
	} {
		got, err := migrate(ctx, db, step.fsys, log)
		if err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("applied %v, want %v", got, step.want)
		}
	}

	// A failing migration leaves nothing behind: no table, no record.
	bad := withEmbedded(v2)
	bad["0903_gamma.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE gamma (z); SELECT no_such_column FROM beta;")}
	if _, err := migrate(ctx, db, bad, log); err == nil {
		t.Fatal("a failing migration returned no error")
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name = 'gamma'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("failed migration left table gamma (%d, %v)", n, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE version = 903`).Scan(&n); err != nil || n != 0 {
		t.Errorf("failed migration recorded (%d, %v)", n, err)
	}

	// A database newer than the binary is refused.
	if _, err := migrate(ctx, db, withEmbedded(v1), log); err == nil || !strings.Contains(err.Error(), "schema version 902") {
		t.Errorf("older migration set on a newer database: err %v", err)
	}
	// Badly named files are refused.
	if _, err := loadMigrations(fstest.MapFS{"init.sql": {}}); err == nil {
		t.Error("a migration without a version was accepted")
	}
	if _, err := loadMigrations(fstest.MapFS{"0001_a.sql": {}, "01_b.sql": {}}); err == nil {
		t.Error("two migrations with one version were accepted")
	}
}

func TestConnectionSettings(t *testing.T) {
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "p.db"), nil))
	for _, c := range []struct {
		db    string
		query string
		want  string
	}{
		{"writer", "PRAGMA journal_mode", "wal"},
		{"writer", "PRAGMA auto_vacuum", "2"}, // INCREMENTAL: Compact gives pages back
		{"writer", "PRAGMA synchronous", "1"}, // NORMAL: the syncer syncs the WAL
		{"writer", "PRAGMA wal_autocheckpoint", "0"},
		{"writer", "PRAGMA temp_store", "2"},   // MEMORY: statement journals and temporary b-trees
		{"writer", "PRAGMA foreign_keys", "0"}, // the suite looks for orphans after every case (Orphans)
		{"writer", "PRAGMA busy_timeout", fmt.Sprint(busyTimeout)},
		{"writer", "PRAGMA query_only", "0"},
		{"reader", "PRAGMA journal_mode", "wal"},
		{"reader", "PRAGMA query_only", "1"},
	} {
		db := s.wdb
		if c.db == "reader" {
			db = s.rdb
		}
		var got string
		if err := db.QueryRow(c.query).Scan(&got); err != nil || got != c.want {
			t.Errorf("%s %s = %q, %v; want %q", c.db, c.query, got, err, c.want)
		}
	}
	if n := s.wdb.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("writer pool allows %d connections, want 1", n)
	}
	if n := s.rdb.Stats().MaxOpenConnections; n != readConns {
		t.Errorf("reader pool allows %d connections, want %d", n, readConns)
	}
	if _, err := s.rdb.Exec(`DELETE FROM routes`); err == nil {
		t.Error("the reader pool can write")
	}
}

func TestOpenCreatesParentDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	openAt(t, filepath.Join(dir, "switchboard.db"), nil)
	if _, err := os.Stat(filepath.Join(dir, "switchboard.db")); err != nil {
		t.Errorf("database file: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil {
		t.Error("DefaultConfig without a path validated")
	}
	ok := DefaultConfig()
	ok.Path = "/var/lib/switchboard/switchboard.db"
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	for _, path := range []string{"", "x.db?mode=ro", ":memory:", "file:x.db"} {
		c := DefaultConfig()
		c.Path = path
		if err := c.Validate(); err == nil {
			t.Errorf("path %q validated", path)
		}
	}
	both := Config{}
	err := both.Validate()
	if err == nil || !strings.Contains(err.Error(), "path") || !strings.Contains(err.Error(), "logger") {
		t.Errorf("Validate reports %v, want every problem", err)
	}
	if _, err := Open(context.Background(), both); err == nil {
		t.Error("Open accepted an invalid config")
	}
}

func TestDriverErrorsDoNotLeak(t *testing.T) {
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "e.db"), nil))
	ctx := context.Background()
	_, raw := s.wdb.ExecContext(ctx, `SELECT * FROM no_such_table`)
	var se *sqlitedriver.Error
	if !errors.As(raw, &se) {
		t.Fatalf("the driver's error is %T, the test expects *sqlitedriver.Error", raw)
	}
	err := s.fail(ctx, "op", raw)
	if errors.As(err, &se) {
		t.Errorf("fail kept the driver type in the chain: %v", err)
	}
	if !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("fail lost the message: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Ping(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with a cancelled context: %v, want context.Canceled in the chain", err)
	}
	if _, err := s.GetMessage(cctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetMessage with a cancelled context: %v, want context.Canceled in the chain", err)
	}
}

// BenchmarkAccept measures group commit: each iteration is one Accept (one
// transaction, one fsync of the WAL) of a batch of new messages with
// delivery work.
func BenchmarkAccept(b *testing.B) {
	for _, size := range []int{1, 16, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := withFE(b, openAt(b, filepath.Join(b.TempDir(), "bench.db"), nil))
			ctx := context.Background()
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			batch := make([]persistence.NewMessage, size)
			n := 0
			for b.Loop() {
				for i := range batch {
					n++
					id := fmt.Sprintf("bench-%09d", n)
					batch[i] = persistence.NewMessage{
						ID: id, SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123",
						Body: "a message body of a typical length, about sixty characters.", SourceSMSC: "smsc-in",
						DestSMSC: "smsc-out", Frontend: "fe", State: messages.StatePending, Detail: "accepted",
						Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: now},
					}
				}
				if _, err := s.Accept(ctx, now, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// TestMain checks that closing stores leaves no goroutine behind (both
// database/sql pools must be closed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWritesReuseCachedStatements: a write's statements are prepared once,
// after the transaction that first ran them, and reused by later writes.
func TestWritesReuseCachedStatements(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(name string) {
		if err := s.PutFrontend(ctx, persistence.Frontend{Name: name, Mode: persistence.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	s.stmts.mu.Lock()
	cached := len(s.stmts.stmts)
	s.stmts.mu.Unlock()
	if cached == 0 {
		t.Fatal("no statement cached after a write")
	}
	put("b")
	s.stmts.mu.Lock()
	again := len(s.stmts.stmts)
	s.stmts.mu.Unlock()
	if again != cached {
		t.Fatalf("the same write cached %d more statements", again-cached)
	}
	fes, err := s.Frontends(ctx)
	if err != nil || len(fes) != 2 {
		t.Fatalf("frontends %v %v", fes, err)
	}
}

// TestMigration0002KeepsLedger upgrades a database written at schema 0001:
// its ledger entries become delivery entries and its messages are neither
// queued nor owed a report.
func TestMigration0002KeepsLedger(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", dsn(path, roleWriter))
	if err != nil {
		t.Fatal(err)
	}
	schema1, err := fs.ReadFile(migrationFiles(), "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(ctx, db, fstest.MapFS{"0001_init.sql": {Data: schema1}}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO messages (id, token, source_msisdn, destination_msisdn, body, state, source_smsc, dest_smsc,
			frontend, created_at, updated_at, submitted_at) VALUES ('old', 1, '', '', 'b', 'delivered', '', '', 'fe', 1, 2, 1)`,
		`INSERT INTO ledger (message_id, target, result, at, detail) VALUES ('old', 'fe', 'delivered', 2, 'acked')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := withFE(t, openAt(t, path, nil))
	storetest.CheckUpgradeFrom0001(t, s, "old", "fe")
	var reportTo string
	if err := s.rdb.QueryRow(`SELECT report_to FROM messages WHERE id = 'old'`).Scan(&reportTo); err != nil || reportTo != "" {
		t.Errorf("report_to = %q, %v; want ''", reportTo, err)
	}
}

// TestCompactGivesSpaceBack: after a purge, Compact frees the pages beyond
// its reserve and the checkpoint shrinks the database file.
func TestCompactGivesSpaceBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s := withFE(t, openAt(t, path, nil))
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for b := range 10 {
		batch := make([]persistence.NewMessage, 200)
		for i := range batch {
			id := fmt.Sprintf("c-%d-%d", b, i)
			ids = append(ids, id)
			batch[i] = persistence.NewMessage{ID: id, State: messages.StatePending, Frontend: "fe", Body: strings.Repeat("x", 2000),
				Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
		}
		if _, err := s.Accept(ctx, now, batch); err != nil {
			t.Fatal(err)
		}
	}
	for lo := 0; lo < len(ids); lo += 500 {
		var out []persistence.Outcome
		for _, id := range ids[lo:min(lo+500, len(ids))] {
			out = append(out, persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: id, Result: persistence.ResultDelivered})
		}
		if _, err := s.CompleteWork(ctx, now, out); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	full := size()
	req := persistence.PurgeRequest{Now: now.Add(time.Hour), Limit: 5000,
		Before: map[messages.State]time.Time{messages.StateDelivered: now.Add(time.Minute)}}
	if got, err := s.Purge(ctx, req, nil); err != nil || len(got) != len(ids) {
		t.Fatalf("Purge: %d, %v", len(got), err)
	}
	var freed int64
	for range 10 {
		n, err := s.Compact(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		freed += n
	}
	if freed == 0 {
		t.Fatalf("Compact gave nothing back after purging %d messages of 2 kB", len(ids))
	}
	if after := size(); after > full-freed/2 || after >= full {
		t.Errorf("database file %d bytes before the purge, %d after Compact said it freed %d", full, after, freed)
	}
	if st, err := s.Stats(ctx); err != nil || st.StoreBytes <= 0 {
		t.Errorf("Stats.StoreBytes = %d, %v", st.StoreBytes, err)
	}
}

// TestCompactStep: a step gives back the free pages beyond the reserve
// (1/16 of the file, at least 1 MiB), at most 8 MiB; short of space, all
// but 1 MiB, the file's own slack too.
func TestCompactStep(t *testing.T) {
	for _, tc := range []struct {
		free, pages int64
		short       bool
		want        int64
	}{
		{100, 1000, false, 0},
		{1000, 2000, false, 1000 - reservePages},
		{1000, 10000, false, 1000 - 10000/16},
		{20000, 160000, false, compactPages},
		{11000, 160000, false, 11000 - 160000/16},
		{5000, 160000, false, 0},
		{2000, 160000, true, 2000 - reservePages},
		{5000, 160000, true, compactPages},
		{100, 160000, true, 0},
	} {
		if got := compactStep(tc.free, tc.pages, tc.short); got != tc.want {
			t.Errorf("compactStep(free %d, pages %d, short %v) = %d, want %d", tc.free, tc.pages, tc.short, got, tc.want)
		}
	}
}

// TestFullDiskIsNoSpaceAndRecovers: on a file system that fills up, a
// write fails with persistence.ErrNoSpace and changes nothing, and
// Config.OnNoSpace is told of each such failure, an outcome's too; once
// space is back the same store writes again, with nothing answered lost.
func TestFullDiskIsNoSpaceAndRecovers(t *testing.T) {
	ctx := context.Background()
	dir := spacetest.Tmpfs(t, 24<<20)
	filler := spacetest.Fill(t, dir, 12<<20) // the space an operator adds later
	s := withFE(t, openAt(t, filepath.Join(dir, "full.db"), nil))
	var told, refused []error // what OnNoSpace was told; the calls' ErrNoSpace
	s.onNoSpace = func(err error) { told = append(told, err) }
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := func(id string) persistence.NewMessage {
		return persistence.NewMessage{ID: id, State: messages.StatePending, Frontend: "fe", Body: strings.Repeat("x", 4000),
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
	}
	var accepted []string
	var full error
	for i := 0; full == nil && i < 100000; i++ {
		id := fmt.Sprintf("m-%06d", i)
		if _, err := s.Accept(ctx, now, []persistence.NewMessage{msg(id)}); err != nil {
			full = err
			break
		}
		accepted = append(accepted, id)
	}
	if !errors.Is(full, persistence.ErrNoSpace) || len(accepted) == 0 {
		t.Fatalf("filling the disk ended with %v, want ErrNoSpace (after %d messages)", full, len(accepted))
	}
	refused = append(refused, full)
	if _, err := s.GetMessage(ctx, "m-refused"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("reads on a full disk: %v", err)
	}
	// Nothing commits on a disk this full, outcomes included (that is what
	// a reserve is for); the store is not broken by it.
	if _, err := s.CompleteWork(ctx, now, []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "fe",
		MessageID: accepted[0], Result: persistence.ResultDelivered}}); err != nil && !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("an outcome on the full disk: %v", err)
	} else if err != nil {
		refused = append(refused, err)
	}
	if !reflect.DeepEqual(told, refused) {
		t.Errorf("OnNoSpace was told %v; the calls that found no room: %v", told, refused)
	}
	// Room again (the operator removes a file): the writes that were
	// answered are all there, and new ones go through, in the same store.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	req := persistence.PurgeRequest{Now: now.Add(time.Hour), Limit: 100000, Before: map[messages.State]time.Time{messages.StateDelivered: now.Add(time.Minute)}}
	var outcomes []persistence.Outcome
	for _, id := range accepted[:len(accepted)/2] {
		outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: id, Result: persistence.ResultDelivered})
	}
	if _, err := s.CompleteWork(ctx, now, outcomes); err != nil {
		t.Fatalf("outcomes once space is back: %v", err)
	}
	if _, err := s.Purge(ctx, req, nil); err != nil {
		t.Fatalf("purge: %v", err)
	}
	for range 5 {
		if _, err := s.Compact(ctx, false); err != nil {
			t.Fatalf("compact: %v", err)
		}
	}
	if _, err := s.Accept(ctx, now, []persistence.NewMessage{msg("after")}); err != nil {
		t.Fatalf("accept after the purge freed space: %v", err)
	}
	for _, id := range accepted[len(accepted)/2:] {
		if _, err := s.GetMessage(ctx, id); err != nil {
			t.Fatalf("accepted message %s: %v", id, err)
		}
	}
}

// TestBackupWhileWriting: a backup taken while writes go on holds every
// message committed before it began, passes its check, and opens as a
// store; it never overwrites a file.
func TestBackupWhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	s := withFE(t, openAt(t, path, nil))
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := func(prefix string, n int) []persistence.NewMessage {
		out := make([]persistence.NewMessage, n)
		for i := range out {
			out[i] = persistence.NewMessage{ID: fmt.Sprintf("%s-%04d", prefix, i), State: messages.StatePending, Frontend: "fe",
				Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
		}
		return out
	}
	if _, err := s.Accept(ctx, now, batch("before", 500)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { // writes go on during the backup
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := s.Accept(ctx, now, batch(fmt.Sprintf("during-%d", i), 20)); err != nil {
				done <- err
				return
			}
		}
	}()
	to := filepath.Join(t.TempDir(), "backup.db")
	info, err := Backup(ctx, path, to)
	close(stop)
	if werr := <-done; werr != nil {
		t.Fatalf("writes during the backup: %v", werr)
	}
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if info.Messages < 500 || info.Bytes <= 0 || info.Path != to {
		t.Errorf("Backup = %+v", info)
	}
	if _, err := Backup(ctx, path, to); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second backup to the same file: %v", err)
	}
	restored := withFE(t, openAt(t, to, nil))
	var mode int
	if err := restored.rdb.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 2 {
		t.Errorf("the backup's auto_vacuum is %d (%v), want 2 (incremental)", mode, err)
	}
	st, err := restored.Stats(ctx)
	if err != nil || st.ByState[messages.StatePending] != info.Messages {
		t.Fatalf("the restored store counts %+v (%v), the backup held %d", st.ByState, err, info.Messages)
	}
	for i := range 500 {
		if _, err := restored.GetMessage(ctx, fmt.Sprintf("before-%04d", i)); err != nil {
			t.Fatalf("message committed before the backup: %v", err)
		}
	}
	if _, err := Backup(ctx, filepath.Join(dir, "missing.db"), filepath.Join(t.TempDir(), "x.db")); err == nil {
		t.Error("a backup of a missing store worked")
	}
}

// TestBackupConvertsToIncremental: a database created without
// auto_vacuum (before this store created them incremental) keeps working,
// and its backup is incremental: restoring it converts the store.
func TestBackupConvertsToIncremental(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE predates_us (a)`); err != nil {
		t.Fatal(err)
	}
	_ = raw.Close()
	s := withFE(t, openAt(t, path, nil))
	var mode int
	if err := s.rdb.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 0 {
		t.Fatalf("the old database's auto_vacuum is %d (%v), want 0", mode, err)
	}
	if n, err := s.Compact(ctx, false); err != nil || n != 0 {
		t.Errorf("Compact on a database without auto_vacuum: %d, %v; want 0, nil", n, err)
	}
	to := filepath.Join(t.TempDir(), "new.db")
	if _, err := Backup(ctx, path, to); err != nil {
		t.Fatal(err)
	}
	restored := withFE(t, openAt(t, to, nil))
	if err := restored.rdb.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 2 {
		t.Errorf("the backup's auto_vacuum is %d (%v), want 2", mode, err)
	}
}

// TestBackupWritesNothingLive: a backup of a store commits nothing to the
// live database (a write there would take the write lock beside the
// node's writer): another connection's data_version does not move.
func TestBackupWritesNothingLive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	s := withFE(t, openAt(t, path, nil))
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{{ID: "a", State: messages.StatePending, Frontend: "fe"}}); err != nil {
		t.Fatal(err)
	}
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	version := func() int64 {
		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()
	if _, err := Backup(ctx, path, filepath.Join(dir, "copy.db")); err != nil {
		t.Fatal(err)
	}
	if after := version(); after != before {
		t.Errorf("data_version %d -> %d across a backup: it committed to the live database", before, after)
	}
}

// TestBackupIsPrivateAndNamedAsGiven: the backup is readable by its owner
// only (it holds bodies and frontend secrets, like the 0700 data
// directory), and a name holding '#', '%' or '?' is the file written and
// checked: the check once opened the name cut at '#', which an older
// backup there made pass with its own count.
func TestBackupIsPrivateAndNamedAsGiven(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	s := withFE(t, openAt(t, path, nil))
	msgs := make([]persistence.NewMessage, 3)
	for i := range msgs {
		msgs[i] = persistence.NewMessage{ID: fmt.Sprintf("m%d", i), State: messages.StatePending, Frontend: "fe",
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
	}
	if _, err := s.Accept(ctx, time.Now(), msgs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nightly"), nil, 0o600); err != nil { // what a cut name would open
		t.Fatal(err)
	}
	for _, name := range []string{"nightly#1.db", "nightly%41.db", "nightly?x=1.db"} {
		to := filepath.Join(dir, name)
		info, err := Backup(ctx, path, to)
		if err != nil || info.Messages != 3 {
			t.Errorf("Backup to %s: %+v, %v; want 3 messages", name, info, err)
			continue
		}
		fi, err := os.Stat(to)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("backup %s: mode %v (%v), want 0600", name, fi.Mode().Perm(), err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("files in the backup directory: %d, want the three backups and nightly", len(ents))
	}
}

// withFE registers frontend fe on s, the one the tests' messages are for:
// a store creates a message for local delivery only while its frontend is
// registered (persistence.LocalFrontend).
func withFE(t testing.TB, s *Store) *Store {
	t.Helper()
	now := time.Now()
	if err := s.PutFrontend(context.Background(), persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatalf("PutFrontend: %v", err)
	}
	return s
}

// TestCompactBesideAReader: a read transaction open beside the cleaner's
// compaction (a backup's VACUUM INTO, a long list) keeps the pages a
// step moves in the WAL: the file does not shrink, and the WAL grows by
// the step. Compact said it gave the step back all the same, so the
// cleaner, short of space, repeated it (64 steps an upkeep, every second):
// the store's files grew by what it reported (a review: 46 MiB in one
// upkeep) and ate the reserve. A step reports what the file gave back as
// measured, and none is taken while a reader holds frames of the WAL; once
// the reader is gone the space comes back.
func TestCompactBesideAReader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s := openAt(t, path, nil)
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE f1(b BLOB)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 6000) INSERT INTO f1 SELECT randomblob(3900) FROM n",
		"CREATE TABLE f2(b BLOB)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 6000) INSERT INTO f2 SELECT randomblob(3900) FROM n",
		"DROP TABLE f1", // ~24 MiB free at the start of the file, live pages at its end: a purge's result
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	files := func() int64 {
		var n int64
		for _, p := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// upkeep is the cleaner's compaction short of space: steps while one
	// gives something back.
	upkeep := func() (given int64, steps int) {
		for range 64 {
			freed, err := s.Compact(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			steps++
			if given += freed; freed == 0 {
				break
			}
		}
		return given, steps
	}
	rd, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	tx, err := rd.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM f2").Scan(&n); err != nil {
		t.Fatal(err)
	}
	start := files()
	for round := range 3 {
		given, steps := upkeep()
		grew := files() - start
		if given != 0 || steps != 1 || grew > compactPages*(4096+24)+1<<16 { // a WAL frame is a page and its 24-byte header
			t.Fatalf("upkeep %d beside a reader: %d bytes reported given back in %d steps, the files grew by %d; want nothing reported, one step, at most one step's growth",
				round, given, steps, grew)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if given, _ := upkeep(); given == 0 || files() >= start {
		t.Errorf("once the reader is gone: %d bytes given back, the files %d bytes (%d before); want the space back", given, files(), start)
	}
}

// TestBackupRefusesAPathWithAQuestionMark: the source is opened as a
// path the driver reads parameters after '?' of: a store under a
// directory named so would be read from another file (a directory "a"
// for "a?b/switchboard.db"). It is refused, naming it, and nothing is
// written.
func TestBackupRefusesAPathWithAQuestionMark(t *testing.T) {
	src := filepath.Join(t.TempDir(), "switchboard.db")
	s := openAt(t, src, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "a?b")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "switchboard.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "copy.db")
	if info, err := Backup(context.Background(), filepath.Join(dir, "switchboard.db"), to); err == nil || !strings.Contains(err.Error(), "holds a '?'") {
		t.Errorf("Backup of a store under %s: %+v, %v; want it refused for its '?'", dir, info, err)
		return
	}
	if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused backup left %s: %v", to, err)
	}
}

// TestBackupLeavesItsFileSystemRoom: a backup written to a file system
// without room for the copy and BackupReserve beside it is refused before
// it writes anything: it filled the file system (the data's own, as often
// as not) and failed there, and a node on it, short of space, refused its
// traffic meanwhile. With room, it is made.
func TestBackupLeavesItsFileSystemRoom(t *testing.T) {
	src := filepath.Join(t.TempDir(), "switchboard.db")
	openAt(t, src, nil)
	disk := spacetest.Tmpfs(t, BackupReserve+(16<<20))
	if _, err := Backup(context.Background(), src, filepath.Join(disk, "room.db")); err != nil {
		t.Fatalf("a backup with room for it: %v", err)
	}
	spacetest.Fill(t, disk, 32<<20)
	to := filepath.Join(disk, "short.db")
	if _, err := Backup(context.Background(), src, to); err == nil || !strings.Contains(err.Error(), "write it elsewhere") {
		t.Errorf("a backup leaving less than %d bytes free: %v, want it refused", BackupReserve, err)
	}
	if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused backup left %s: %v", to, err)
	}
}

// TestCompactShortGivesTheWALBack: a reader's snapshot held while writes
// came (a backup's VACUUM INTO, a long list) let the WAL grow; SQLite
// writes from its start again once the reader is gone, but the file keeps
// its size (journal_size_limit lets 64 MiB stay). Short of space, the
// node then stayed full for good once the cleaner had purged everything:
// the WAL kept the space. Compact short of space ends with a TRUNCATE
// checkpoint, which gives it back; not short, the WAL is left for the
// next writes.
func TestCompactShortGivesTheWALBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	s := openAt(t, path, nil)
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	rd, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := raw.ExecContext(ctx, "CREATE TABLE f(b BLOB)"); err != nil {
		t.Fatal(err)
	}
	tx, err := rd.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM f").Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 2 { // ~8 MiB of WAL the reader holds
		if _, err := raw.ExecContext(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000) INSERT INTO f SELECT randomblob(3900) FROM n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, "DELETE FROM f"); err != nil { // the cleaner's purge
		t.Fatal(err)
	}
	wal := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	grown := wal()
	if grown < 6<<20 {
		t.Fatalf("the WAL grew to %d bytes only; the test needs it large", grown)
	}
	for range 3 {
		if _, err := s.Compact(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := wal(); got < grown {
		t.Errorf("not short of space, Compact shrank the WAL from %d to %d bytes; want it left for the next writes", grown, got)
	}
	var given int64
	for range 64 {
		freed, err := s.Compact(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if given += freed; freed == 0 {
			break
		}
	}
	if got := wal(); got > 1<<20 {
		t.Errorf("short of space, after the reader is gone: the WAL is %d bytes (%d before), Compact gave back %d; want the WAL given back", got, grown, given)
	}
	if given < grown/2 {
		t.Errorf("Compact reported %d bytes given back; the WAL alone was %d", given, grown)
	}
}
