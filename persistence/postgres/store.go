package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Store is the Postgres persistence.Store. It is safe for concurrent use, and
// several Stores (instances of one site) may share one database schema.
type Store struct {
	// Calls are the one-part forms of Write (Accept, ClaimWork, ...).
	persistence.Calls
	pool *pgxpool.Pool
	log  *slog.Logger
	// customPlans makes every transaction plan each statement for its own
	// arguments (see inTx); false when the DSN sets plan_cache_mode.
	customPlans bool
	closed      atomic.Bool
	onNoSpace   func(error) // Config.OnNoSpace

	// leaders are the leaderships TryLead handed out and not yet ended;
	// Close releases them.
	leadersMu sync.Mutex
	leaders   map[*leadership]bool
}

var _ persistence.Store = (*Store)(nil)

// Open validates cfg, applies pending migrations and connects the pool.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, errors.New("postgres: DSN does not parse as a connection string or URL")
	}
	// pgxpool's own pool_max_conns, when the DSN gives it, is the
	// operator's: a node has no flag for the pool's size.
	if cc, err := pgconn.ParseConfig(cfg.DSN); err != nil || cc.RuntimeParams["pool_max_conns"] == "" {
		pcfg.MaxConns = cfg.MaxConns
	}
	_, planModeSet := pcfg.ConnConfig.RuntimeParams["plan_cache_mode"]
	for _, settings := range []map[string]string{plannerSettings, sessionKeepalives, orphanSettings} {
		for name, value := range settings {
			if _, set := pcfg.ConnConfig.RuntimeParams[name]; !set {
				pcfg.ConnConfig.RuntimeParams[name] = value
			}
		}
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set && cfg.ApplicationName != "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	}
	log := cfg.Logger.With("component", "store", "store", "postgres")

	if !cfg.NoMigrate {
		if err := migrate(ctx, pcfg.ConnConfig.Copy(), log); err != nil {
			if errors.Is(err, ErrSearchPath) {
				return nil, err // its text says all, and it holds no driver type
			}
			return nil, fmt.Errorf("postgres: migrate: %w", driverError(err))
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", driverError(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", driverError(err))
	}
	if cfg.NoMigrate {
		if err := checkSchema(ctx, pool); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s := &Store{pool: pool, log: log, customPlans: !planModeSet, onNoSpace: cfg.OnNoSpace}
	s.Calls = persistence.Calls{Writer: s}
	return s, nil
}

// plannerSettings are the store's sessions' planner settings (a DSN that
// sets one keeps its own). Every statement of the store looks rows up by
// key, or joins a list of keys (unnest) to a table by key, out of a working
// set that is cached. On a young table, which autovacuum has not analyzed
// yet (it looks after a minute), the planner has no statistics and takes
// each key to match 0.5% of the table: it then reads the whole table in a
// merge or hash join where a few hundred index probes would do (a scan of
// the ledger per ack batch was most of the postgres-site figure's database
// time). Nested loops over the index are right for these statements
// whatever the statistics say, and a random page costs little more than a
// sequential one when the data is cached or on an SSD.
var plannerSettings = map[string]string{
	"enable_hashjoin":  "off",
	"enable_mergejoin": "off",
	"random_page_cost": "1.1",
}

// orphanSettings end a transaction its client left open: one whose process
// is paused (SIGSTOP, a VM frozen), or cut off from the server without its
// connection closing, stays "idle in transaction" with its locks held. A
// fenced claim holds a share lock on ring_state until it commits, and the
// master's publication of the next assignment waits for every such lock:
// one orphaned claim kept the ring at its epoch, and the ranges of a dead
// or cut-off instance with their owner, for as long as the pause lasted or
// until TCP noticed (two hours by the operating system's default; the
// sessions' keepalives, sessionKeepalives, bring that to ~11 s). Every
// transaction of this store is a few round trips with no waiting on the
// client's side in between, and each caller gives up on a store call after
// at most 10 s (the ring's DefaultStoreTimeout), so a session idle inside a
// transaction for 10 s has been left: the server ends it, with its locks,
// and the client's next statement on it fails. A DSN that sets it keeps
// its own.
var orphanSettings = map[string]string{
	"idle_in_transaction_session_timeout": "10s",
}

// PoolSize is the most connections the store's pool holds at once
// (Config.MaxConns, or the DSN's pool_max_conns).
func (s *Store) PoolSize() int { return int(s.pool.Config().MaxConns) }

// Kind implements persistence.Store.
func (s *Store) Kind() string { return "postgres" }

// ServerNow implements persistence.ServerClock: the server's
// clock_timestamp().
func (s *Store) ServerNow(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, s.fail("server clock", persistence.ErrClosed)
	}
	var t time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, s.fail("server clock", err)
	}
	return t.UTC(), nil
}

// Ping implements persistence.Store.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return s.fail("ping", persistence.ErrClosed)
	}
	return s.fail("ping", s.pool.Ping(ctx))
}

// Close implements persistence.Store. It releases every leadership still
// held and waits for calls in flight to give back their connections.
// Closing a closed store returns ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return s.fail("close", persistence.ErrClosed)
	}
	s.releaseLeaders()
	s.pool.Close()
	return nil
}

// precheck fails a call of op on a closed store, or with the validator's
// verdict on its input (an ErrInvalid).
func (s *Store) precheck(op string, invalid error) error {
	if s.closed.Load() {
		return s.fail(op, persistence.ErrClosed)
	}
	if invalid != nil {
		return fmt.Errorf("postgres: %w", persistence.Invalid(invalid))
	}
	return nil
}

// fail translates err from operation op for callers: nil stays nil, every
// error of a closed store is ErrClosed, the persistence sentinels and context
// errors stay matchable with errors.Is, and driver errors keep only their
// text. Every call's error passes here, so here Config.OnNoSpace is told.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, persistence.ErrClosed)
	}
	err = fmt.Errorf("postgres: %s: %w", op, driverError(err))
	if s.onNoSpace != nil && errors.Is(err, persistence.ErrNoSpace) {
		s.onNoSpace(err)
	}
	return err
}

// driverError keeps what callers may branch on and flattens the rest to
// text. The server's "no room" errors (disk_full, and a data directory
// that went read-only) are persistence.ErrNoSpace; its data exceptions
// (class 22: text that is not UTF-8 or holds NUL, a value out of range)
// are persistence.ErrInvalid: the same input fails the same way again.
func driverError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == pgDiskFull || pe.Code == pgReadOnlyTx) {
		return fmt.Errorf("%s: %w", err.Error(), persistence.ErrNoSpace)
	}
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, pgDataException) {
		return fmt.Errorf("%s: %w", err.Error(), persistence.ErrInvalid)
	}
	for _, keep := range []error{persistence.ErrNotFound, persistence.ErrClosed, persistence.ErrStaleEpoch,
		persistence.ErrLeadershipLost, persistence.ErrExists, persistence.ErrLastCredential, persistence.ErrFrontendInUse,
		persistence.ErrUnknownFrontend, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, keep) {
			if err == keep {
				return err
			}
			// Its text already ends with keep's (pgconn's "timeout:
			// context deadline exceeded") unless it was wrapped in more.
			if text := err.Error(); strings.HasSuffix(text, keep.Error()) {
				return fmt.Errorf("%s%w", strings.TrimSuffix(text, keep.Error()), keep)
			}
			return fmt.Errorf("%s: %w", err.Error(), keep)
		}
	}
	return errors.New(err.Error())
}

// The SQLSTATEs driverError maps to persistence.ErrNoSpace: disk_full
// (class 53, insufficient resources) and read_only_sql_transaction (a
// server whose storage went read-only, or a standby).
const (
	pgDiskFull   = "53100"
	pgReadOnlyTx = "25006"
	// pgDataException is the class of the SQLSTATEs driverError maps to
	// persistence.ErrInvalid (22021 character_not_in_repertoire: invalid
	// UTF-8 or a NUL in text).
	pgDataException = "22"
)

// messageColumns are the columns scanMessage reads, in its order.
var messageColumns = []string{
	"id", "seq", "token", "source_msisdn", "destination_msisdn", "body", "state",
	"source_smsc", "dest_smsc", "frontend", "attempts", "reason",
	"created_at", "updated_at", "submitted_at", "queued_at",
	"data_coding", "body_binary", "validity_until", "deliver_after", "submitted_by", "traceparent", "message_class",
}

// columns lists messageColumns, each prefixed with alias and a dot when
// alias is not empty.
func columns(alias string) string {
	if alias == "" {
		return strings.Join(messageColumns, ", ")
	}
	out := make([]string, len(messageColumns))
	for i, c := range messageColumns {
		out[i] = alias + "." + c
	}
	return strings.Join(out, ", ")
}

// apiColumns are read after the message columns of table t (its name or
// alias) for the API's list (ListMessages): when the message's work is
// next due (NextAttemptAt), one index lookup, and its last history entry's
// detail (LastDetail: held by the row when it is the first or second, else
// one index lookup; see persistence.HeldByRow).
func apiColumns(t string) string {
	return "(SELECT min(o.due_at) FROM outbox o WHERE o.message_id = " + t + ".id AND o.kind <> 'status'), " +
		"CASE WHEN " + t + ".history_len = 2 AND " + t + ".second_state <> '' THEN " + t + ".second_detail " +
		"ELSE COALESCE((SELECT h.detail FROM history h WHERE h.message_id = " + t + ".id AND h.ordinal = " + t + ".history_len), " + t + ".first_detail) END"
}

// scanAPIMessage reads the message columns, apiColumns and then extra.
func scanAPIMessage(row scanner, extra ...any) (messages.Message, error) {
	var (
		due  *time.Time
		last string
	)
	m, err := scanMessage(row, append([]any{&due, &last}, extra...)...)
	if due != nil {
		t := due.UTC()
		m.NextAttemptAt = &t
	}
	m.LastDetail = last
	return m, err
}

// scanner is a pgx.Row or pgx.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanMessage reads columns() and then extra, in that order.
func scanMessage(row scanner, extra ...any) (messages.Message, error) {
	var m messages.Message
	var token int64
	dest := append([]any{
		&m.ID, &m.Seq, &token, &m.SourceMSISDN, &m.DestinationMSISDN, &m.Body, &m.State,
		&m.SourceSMSC, &m.DestSMSC, &m.Frontend, &m.Attempts, &m.Reason,
		&m.CreatedAt, &m.UpdatedAt, &m.SubmittedAt, &m.QueuedAt,
		&m.DataCoding, &m.Binary, &m.ValidityUntil, &m.DeliverAfter, &m.SubmittedBy, &m.Trace, &m.MessageClass,
	}, extra...)
	if err := row.Scan(dest...); err != nil {
		return messages.Message{}, err
	}
	m.Token = uint64(token)
	m.SetTrace(m.Trace)
	m.CreatedAt, m.UpdatedAt, m.SubmittedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC(), m.SubmittedAt.UTC()
	for _, t := range []**time.Time{&m.QueuedAt, &m.ValidityUntil, &m.DeliverAfter} {
		if *t != nil {
			u := (**t).UTC()
			*t = &u
		}
	}
	return m, nil
}

// tokenOf is the ring token of id as stored: the uint64's bit pattern.
func tokenOf(id string) int64 { return int64(messages.TokenOf(id)) }

// norm is persistence.Normalize, short for the many call sites.
func norm(t time.Time) time.Time { return persistence.Normalize(t) }

// utcOrZero converts a nullable time read from the database.
func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// utcOrNil is a nullable time read from the database, in UTC.
func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
