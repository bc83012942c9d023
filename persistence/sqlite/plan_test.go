package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestHotQueriesUseIndexes fails when a statement that runs per claim,
// completion, expiry or page reads a whole table. The plans are checked on
// an empty database and again after ANALYZE on a populated one, because
// statistics can change SQLite's choice.
func TestHotQueriesUseIndexes(t *testing.T) {
	ctx := context.Background()
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "plan.db"), nil))
	// ClaimWork gives every statement all its parameters (see claimable).
	claimArgs := []any{"delivery", "fe", 5, 10, "o", 9, 0}
	ringArgs := append(append([]any{}, claimArgs...), -5, 5, 10, 20)
	statements := []struct {
		name string
		sql  string
		args []any
	}{
		{"lease end", leaseEndSQL(0), claimArgs},
		{"claim", claimSQL(0), claimArgs},
		{"next due", nextDueSQL(0), claimArgs},
		{"ring: lease end", leaseEndSQL(2), ringArgs},
		{"ring: claim", claimSQL(2), ringArgs},
		{"ring: next due", nextDueSQL(2), ringArgs},
		{"ring: owners", ringOwnersSQL, []any{"delivery", "o"}},
		{"reschedule", rescheduleSQL(2), []any{1, 2, 1, 3, 4, 0}},
		{"move", moveSQL(2), []any{9, "a", "delivered", "", nil, 2, 9, 1, "delivered", 9, "acked", 1, 0, nil, 0, "b", "forward_queued", "x", 3, 3, nil, 0, nil, nil, nil, nil, nil, nil, nil}},
		{"restart", restartSQL(2), []any{9, "a", "pending", "", nil, 2, nil, 0, nil, nil, nil, nil, nil, nil, nil, "fe", "s", 1, "b", "forward_queued", "", 3, 3, nil, 0, nil, nil, nil, nil, nil, nil, nil, "fe", "s", 1}},
		{"load", loadSQL(decisionColumns, 2), []any{"a", "b"}},
		{"load whole", loadSQL(rowColumns, 2), []any{"a", "b"}},
		{"fold", foldSQL(2), []any{"a", 3, "d", 2, 9, 0, "b", 4, "d", 2, 9, 0}},
		{"expirable", expirableSQL, []any{5, 6, 10}},
		{"release leases", releaseSQL, []any{"o"}},
		{"oldest due", oldestDueSQL, []any{5}},
		{"failable", failableSQL, []any{"forward_queued", 5, "forward", 6, 10}},
		{"queueable", queueableSQL, []any{"pending", "forward", "peer", 5, 10}},
		{"purgeable", purgeableSQL, []any{"delivered", 5, 10}},
		{"forward targets", forwardTargetsSQL, nil},
		{"relay", relaySQL, []any{5, 10, 0, 0}},
		{"relay after a row", relaySQL, []any{5, 10, 3, 7}},
		{"oldest unrelayed", oldestUnrelayedSQL, nil},
		{"seq bounds", seqBoundsSQL, nil},
	}
	t5 := time.Date(2030, 1, 1, 0, 0, 5, 0, time.UTC)
	for name, q := range map[string]persistence.ListQuery{
		"list":                      {Limit: 10, Before: 5},
		"list by state":             {State: messages.StatePending, Limit: 10, Before: 5},
		"search destination":        {Destination: persistence.NumberMatch{Key: "447700"}, Limit: 10, Before: 5},
		"search destination prefix": {Destination: persistence.NumberMatch{Key: "4477", Prefix: true}, State: messages.StatePending, Limit: 10},
		"search source":             {Source: persistence.NumberMatch{Key: "ACME"}, Since: t5, Limit: 10},
		"search time":               {Since: t5, Until: t5.Add(time.Hour), Frontend: "fe", Limit: 10, Before: 5, BeforeAt: t5},
		"search time and state":     {Until: t5, State: messages.StateFailed, Peer: "b", Limit: 10},
		"a client's own":            {SubmittedBy: "app", Limit: 10, Before: 5},
		"a client's own by state":   {SubmittedBy: "app", State: messages.StateFailed, Limit: 10},
		// Not messages_created: it holds every client's messages.
		"a client's own since":      {SubmittedBy: "app", Since: t5, Limit: 10, Before: 5},
		"a client's own in a range": {SubmittedBy: "app", Since: t5, Until: t5.Add(time.Hour), State: messages.StateFailed, Limit: 10},
		// Windowed: a frontend or a peer alone reads a window of seqs
		// below the cursor, a range of the rowid, also with a state.
		"window: frontend":         {Frontend: "fe", Limit: 10, Before: 500_000},
		"window: frontend, newest": {Frontend: "fe", Limit: 10},
		"window: peer and state":   {Peer: "b", State: messages.StateFailed, Limit: 10, Before: 500_000},
	} {
		// A store of a million seqs: every window query gets a window.
		query, args := listQuery(q, persistence.ListWindow(q, persistence.SeqBounds{Min: 1, Max: 1_000_000}))
		statements = append(statements, struct {
			name string
			sql  string
			args []any
		}{name, query, args})
	}
	// The one scan a statement may make: of a partial index that holds
	// only the rows it wants, of the table in rowid order that stops at
	// the first row, or of a recursive CTE's own rows (one per peer).
	allowed := map[string]string{
		"forward targets": "SCAN t",
		"release leases":  "SCAN outbox USING INDEX outbox_lease",
		"oldest outbox":   "SCAN outbox",
		// The first row of outbox_relay: the earliest due.
		"oldest unrelayed": "SCAN outbox USING INDEX outbox_relay",
	}
	// Statements that must read one index in its order: the relay's take
	// reads outbox_relay from its start up to the rows due now (rows
	// scheduled ahead cost it nothing), in the order it takes them; the
	// oldest due reads outbox_claim the same way, per kind and target.
	uses := map[string]string{
		"a client's own since":      "SEARCH messages USING INDEX messages_submitted_by (submitted_by=? AND rowid<?)",
		"a client's own in a range": "SEARCH messages USING INDEX messages_submitted_by (submitted_by=?)",
		"relay":                     "SEARCH outbox USING INDEX outbox_relay (due_at>? AND due_at<?)",
		"relay after a row":         "SEARCH outbox USING INDEX outbox_relay (due_at>? AND due_at<?)",
		"oldest unrelayed":          "SCAN outbox USING INDEX outbox_relay",
		// The last history entry of a message in retry: one lookup.
		"load":       "SEARCH history USING PRIMARY KEY (message_id=? AND ordinal=?) LEFT-JOIN",
		"load whole": "SEARCH history USING PRIMARY KEY (message_id=? AND ordinal=?) LEFT-JOIN",
		// Per kind and target of work, outbox_claim from its earliest due
		// row: the first due and unleased row ends the seek.
		"oldest due":               "SEARCH o USING INDEX outbox_claim (kind=? AND target=? AND due_at<?)",
		"window: frontend":         "SEARCH messages USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
		"window: frontend, newest": "SEARCH messages USING INTEGER PRIMARY KEY (rowid>?)",
		"window: peer and state":   "SEARCH messages USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
	}
	check := func(when string) {
		for _, st := range statements {
			rows, err := s.wdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+st.sql, st.args...)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, st.name, err)
			}
			var plan []string
			err = scanEach(rows, func(r *sql.Rows) error {
				var id, parent, unused int
				var detail string
				err := r.Scan(&id, &parent, &unused, &detail)
				plan = append(plan, detail)
				return err
			})
			if err != nil {
				t.Fatalf("%s: %s: %v", when, st.name, err)
			}
			if testing.Verbose() && strings.HasPrefix(st.name, "search") {
				t.Logf("%s: %s", st.name, strings.Join(plan, " | "))
			}
			if want, ok := uses[st.name]; ok && (!slices.Contains(plan, want) || slices.ContainsFunc(plan, func(line string) bool {
				return strings.Contains(line, "TEMP B-TREE")
			})) {
				t.Errorf("%s: %s does not read %q in its order:\n\t%s", when, st.name, want, strings.Join(plan, "\n\t"))
			}
			for _, line := range plan {
				// A scan of a VALUES list or of a bounded subquery (w, or
				// the LIMITed halves of a UNION) is fine; a scan of a
				// table is not.
				if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "VALUES") && line != "SCAN w" &&
					!strings.HasPrefix(line, "SCAN (subquery-") && line != "SCAN CONSTANT ROW" && line != allowed[st.name] {
					t.Errorf("%s: %s scans a table:\n\t%s", when, st.name, strings.Join(plan, "\n\t"))
					break
				}
			}
		}
	}
	check("empty database")

	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for b := range 20 {
		batch := make([]persistence.NewMessage, 100)
		for i := range batch {
			batch[i] = persistence.NewMessage{ID: fmt.Sprintf("p-%02d-%03d", b, i), State: messages.StatePending, Frontend: "fe",
				Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: fmt.Sprintf("fe-%d", i%4), DueAt: now.Add(time.Duration(i) * time.Second)}}
		}
		if _, err := s.Accept(ctx, now, batch); err != nil {
			t.Fatal(err)
		}
	}
	// A forward queue: most messages wait for an unhealthy peer, a few are
	// pending for a healthy one.
	for b := range 5 {
		batch := make([]persistence.NewMessage, 100)
		for i := range batch {
			state, peer := messages.StateForwardQueued, "peer-down"
			if i%10 == 0 {
				state, peer = messages.StatePending, "peer-up"
			}
			batch[i] = persistence.NewMessage{ID: fmt.Sprintf("f-%02d-%03d", b, i), State: state, Frontend: "far", DestSMSC: peer,
				Work: &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peer, DueAt: now}}
		}
		if _, err := s.Accept(ctx, now.Add(time.Duration(b)*time.Second), batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "fe-1", Owner: "o", Limit: 100, Now: now.Add(time.Minute), Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	check("2500 messages, analyzed")
}

// TestStatementsKeepTheirPlans checks the two statement shapes that make
// SQLite re-prepare a statement on every run (see statements.go): a bound
// LIMIT in this package's SQL, and a partial index whose condition compares
// a bare column with a literal.
func TestStatementsKeepTheirPlans(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	bound := regexp.MustCompile(`(?i)\b(LIMIT|OFFSET)\s+\?`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if bound.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: a bound LIMIT or OFFSET (write +?): %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "plan.db"), nil))
	rows, err := s.wdb.Query(`SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql LIKE '% WHERE %'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	literal := regexp.MustCompile(`(^|[^+.\w])\w+\s*=\s*'`)
	partial := 0
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			t.Fatal(err)
		}
		partial++
		cond := q[strings.Index(strings.ToUpper(q), " WHERE ")+7:]
		if literal.MatchString(cond) {
			t.Errorf("partial index %s compares a bare column with a literal (write +column): %s", name, cond)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if partial == 0 {
		t.Fatal("no partial index found: the check reads nothing")
	}
}
