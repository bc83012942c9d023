package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// LedgerSeeder writes a ledger entry directly, without touching the outbox.
//
// The suite needs it for one rule only: "work whose outcome the ledger
// already holds is never returned (it is removed)". Through the Store
// interface alone a ledger entry and outbox work for the same message and
// target never coexist (CompleteWork deletes the row in the transaction that
// writes the entry, Resubmit removes the message's entries before writing new work),
// so the suite cannot build that state without help. It is the state a
// future writer of the ledger, or a bug, would leave behind, and ClaimWork is
// the barrier against it.
//
// The value open returns must implement it. Production stores need not: a
// test-only wrapper that embeds the store and reaches its database is enough
// (persistence/sqlite's test does that).
type LedgerSeeder interface {
	SeedLedger(ctx context.Context, e persistence.LedgerEntry) error
}

// Recounter counts, from the tables themselves, what a store's counters
// maintain (persistence.Counts), and reads the counters. The value open
// returns must implement it too (a test-only wrapper, like LedgerSeeder):
// after every case of the suite, the two must agree, so that no path of a
// store can change a state or an outbox row without its count.
type Recounter interface {
	Recount(ctx context.Context) (counted, maintained persistence.Counts, err error)
}

// ReferenceChecker lists the rows whose message is gone: history, work,
// ledger and SMSC id rows without their message (OrphansSQL). Neither store
// enforces these references as it writes (a probe of the parent per row
// written, and per child table per message deleted, on the hot paths:
// docs/performance.md); the decision core writes a message's rows with it
// and deletes them before it, and after every case of the suite the store
// must hold no orphan. The value open returns must implement it (a
// test-only wrapper, like Recounter).
type ReferenceChecker interface {
	// Orphans returns OrphansSQL's lines, one per orphan row.
	Orphans(ctx context.Context) ([]string, error)
}

// OrphansSQL selects one line per row of the tables that name a message
// whose message is not there ("history of <id>"). Both stores' schemas
// share these names, so their wrappers run it as it is.
var OrphansSQL = orphansSQL("history", "outbox", "ledger", "smsc_refs")

// orphansSQL is OrphansSQL over the child tables named.
func orphansSQL(tables ...string) string {
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = "SELECT '" + t + " of ' || c.message_id FROM " + t + " c WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.message_id)"
	}
	return strings.Join(parts, "\nUNION ALL ")
}

// Run runs the whole suite against stores made by open. open must return a
// fresh, empty store each time it is called (once per subtest) and register
// its own cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) persistence.Store) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					f := newFixture(t, open(t))
					c.run(f)
					if !t.Failed() {
						f.checkCounts()
						f.checkReferences()
					}
				})
			}
		})
	}
}

// checkCounts fails the case when the store's counters disagree with what
// its tables hold (a closed store is not checked).
func (f *fixture) checkCounts() {
	f.Helper()
	r, ok := f.store.(Recounter)
	if !ok {
		f.Fatalf("the store under test does not implement storetest.Recounter")
	}
	counted, maintained, err := r.Recount(context.Background())
	if errors.Is(err, persistence.ErrClosed) {
		return
	}
	if err != nil {
		f.Fatalf("Recount: %v", err)
	}
	if fmt.Sprint(counted.Sorted()) != fmt.Sprint(maintained.Sorted()) {
		f.Errorf("the maintained counters drifted from the tables:\n counted    %v\n maintained %v", counted.Sorted(), maintained.Sorted())
	}
}

// checkReferences fails the case when a row names a message that is gone
// (a closed store is not checked).
func (f *fixture) checkReferences() {
	f.Helper()
	r, ok := f.store.(ReferenceChecker)
	if !ok {
		f.Fatalf("the store under test does not implement storetest.ReferenceChecker")
	}
	orphans, err := r.Orphans(context.Background())
	if errors.Is(err, persistence.ErrClosed) {
		return
	}
	if err != nil {
		f.Fatalf("Orphans: %v", err)
	}
	if len(orphans) > 0 {
		f.Errorf("%d rows name a message that is gone: %s", len(orphans), strings.Join(orphans, "; "))
	}
}

type group struct {
	name  string
	cases []testCase
}

type testCase struct {
	name string
	run  func(f *fixture)
}

func groups() []group {
	return []group{
		{"Accept", acceptCases()},
		{"Trace", traceCases()},
		{"GetMessage", getMessageCases()},
		{"ListMessages", listMessagesCases()},
		{"Stats", statsCases()},
		{"ClaimWork", claimWorkCases()},
		{"CompleteWork", completeWorkCases()},
		{"ReleaseLeases", releaseLeasesCases()},
		{"Ledger", ledgerCases()},
		{"ExpireMessages", expireCases()},
		{"ForwardOutcomes", forwardOutcomeCases()},
		{"StatusWork", statusWorkCases()},
		{"ReceiptWork", receiptWorkCases()},
		{"ApplyStatus", applyStatusCases()},
		{"QueueForwards", queueForwardsCases()},
		{"FailForwards", failForwardsCases()},
		{"ForwardTargets", forwardTargetsCases()},
		{"PeerRegistries", peerRegistryCases()},
		{"Resubmit", resubmitCases()},
		{"Routes", routeCases()},
		{"Frontends", frontendCases()},
		{"Lifecycle", lifecycleCases()},
		{"Concurrency", concurrencyCases()},
		{"Ring", ringCases()},
		{"Write", writeCases()},
		{"Drift", driftCases()},
		{"Retention", retentionCases()},
		{"APIv2", apiCases()},
		{"Search", searchCases()},
		{"Bus", busCases()},
		{"History", historyCases()},
		{"Security", securityCases()},
		{"Receipts", receiptCases()},
		{"Upgrade", upgradeCases()},
	}
}

// base is the instant every test time derives from. It is deliberately not
// UTC and carries nanoseconds, so every comparison below also checks that the
// store normalizes (UTC, microseconds).
var base = time.Date(2031, time.March, 14, 15, 9, 26, 535_897_932, time.FixedZone("IST", 5*3600+1800))

// at is base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// norm is the time as a store must return it.
func norm(t time.Time) time.Time { return persistence.Normalize(t) }

// Targets and owners used throughout.
const (
	feA    = "fe-a"
	feB    = "fe-b"
	peerP  = "peer-p"
	ownerA = "instance-a"
	ownerB = "instance-b"
	ownerC = "instance-c"
	// lease is long enough that no test's clock runs past it unless the test
	// says so.
	lease = time.Hour
)

// newMsg is a message for feA with delivery work due at base.
func newMsg(id string) persistence.NewMessage {
	return persistence.NewMessage{
		ID:                id,
		SourceMSISDN:      "+15550100" + fmt.Sprint(len(id)),
		DestinationMSISDN: "+447700900123",
		Body:              "body of " + id,
		SourceSMSC:        "smsc-in",
		DestSMSC:          "smsc-out",
		Frontend:          feA,
		State:             messages.StatePending,
		Detail:            "accepted",
		Work:              &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA, DueAt: base},
	}
}

// msgDue is newMsg with its work due at due.
func msgDue(id string, due time.Time) persistence.NewMessage {
	m := newMsg(id)
	m.Work.DueAt = due
	return m
}

// msgFor is newMsg with work of kind for target, due at base.
func msgFor(id string, kind persistence.WorkKind, target string) persistence.NewMessage {
	m := newMsg(id)
	m.Work = &persistence.WorkSpec{Kind: kind, Target: target, DueAt: base}
	return m
}

// msgNoWork is newMsg without outbox work.
func msgNoWork(id string) persistence.NewMessage {
	m := newMsg(id)
	m.Work = nil
	return m
}

// expected is the message a store must hold right after accepting nm at now.
func expected(nm persistence.NewMessage, now time.Time) messages.Message {
	var queued *time.Time
	if nm.State == messages.StateForwardQueued {
		t := norm(now)
		queued = &t
	}
	return messages.Message{
		ID:                nm.ID,
		SourceMSISDN:      nm.SourceMSISDN,
		DestinationMSISDN: nm.DestinationMSISDN,
		Body:              nm.Body,
		Options:           nm.Options,
		State:             nm.State,
		SourceSMSC:        nm.SourceSMSC,
		DestSMSC:          nm.DestSMSC,
		Frontend:          nm.Frontend,
		SubmittedBy:       nm.SubmittedBy,
		CreatedAt:         norm(now),
		UpdatedAt:         norm(now),
		SubmittedAt:       norm(now),
		QueuedAt:          queued,
		Token:             messages.TokenOf(nm.ID),
	}
}

// fixture is one subtest's store with helpers that fail the test on error.
// Helpers are for the test goroutine only (they call t.Fatalf).
type fixture struct {
	*testing.T
	store persistence.Store
	ctx   context.Context
	// registered are the frontends register registered.
	registered map[string]bool
}

// register registers, if it has not yet, every frontend that batch's local
// deliveries name: a store creates a message for local delivery only while
// its frontend is registered (persistence.LocalFrontend).
func (f *fixture) register(batch []persistence.NewMessage) {
	f.Helper()
	for _, nm := range batch {
		name, ok := persistence.LocalFrontend(nm)
		if !ok || f.registered[name] {
			continue
		}
		if f.registered == nil {
			f.registered = map[string]bool{}
		}
		f.registered[name] = true
		f.putFrontend(persistence.Frontend{Name: name, Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	}
}

func newFixture(t *testing.T, s persistence.Store) *fixture {
	if s == nil {
		t.Fatal("storetest: open returned a nil store")
	}
	return &fixture{T: t, store: s, ctx: t.Context()}
}

func (f *fixture) accept(now time.Time, batch ...persistence.NewMessage) []persistence.Accepted {
	f.Helper()
	f.register(batch)
	res, err := f.store.Accept(f.ctx, now, batch)
	if err != nil {
		f.Fatalf("Accept: %v", err)
	}
	if len(res) != len(batch) {
		f.Fatalf("Accept returned %d results for %d messages", len(res), len(batch))
	}
	return res
}

func (f *fixture) get(id string) messages.Message {
	f.Helper()
	m, err := f.store.GetMessage(f.ctx, id)
	if err != nil {
		f.Fatalf("GetMessage(%q): %v", id, err)
	}
	return m
}

func (f *fixture) list(q persistence.ListQuery) persistence.Page {
	f.Helper()
	p, err := f.store.ListMessages(f.ctx, q)
	if err != nil {
		f.Fatalf("ListMessages(%+v): %v", q, err)
	}
	return p
}

// listAll pages through every message in state (all when empty), newest first.
func (f *fixture) listAll(state messages.State, pageSize int) []messages.Message {
	f.Helper()
	var all []messages.Message
	q := persistence.ListQuery{State: state, Limit: pageSize}
	for page := 0; ; page++ {
		if page > 100000 {
			f.Fatalf("ListMessages: paging does not end")
		}
		p := f.list(q)
		all = append(all, p.Messages...)
		if p.Next == 0 {
			return all
		}
		q.Before = p.Next
	}
}

func (f *fixture) stats() persistence.Stats {
	f.Helper()
	s, err := f.store.Stats(f.ctx)
	if err != nil {
		f.Fatalf("Stats: %v", err)
	}
	return s
}

func (f *fixture) claim(req persistence.ClaimRequest) persistence.Claim {
	f.Helper()
	c, err := f.store.ClaimWork(f.ctx, req)
	if err != nil {
		f.Fatalf("ClaimWork(%+v): %v", req, err)
	}
	return c
}

// claimDelivery claims up to limit delivery rows of target at now, leased for
// the suite's long lease.
func (f *fixture) claimDelivery(target, owner string, now time.Time, limit int) persistence.Claim {
	f.Helper()
	return f.claimOf(persistence.WorkDelivery, target, owner, now, limit)
}

func (f *fixture) complete(now time.Time, outcomes ...persistence.Outcome) []persistence.Completion {
	f.Helper()
	res, err := f.store.CompleteWork(f.ctx, now, outcomes)
	if err != nil {
		f.Fatalf("CompleteWork: %v", err)
	}
	if len(res) != len(outcomes) {
		f.Fatalf("CompleteWork returned %d completions for %d outcomes", len(res), len(outcomes))
	}
	return res
}

// completeOne records one outcome of delivery work on feA and requires want.
func (f *fixture) completeOne(now time.Time, o persistence.Outcome, want persistence.Completion) {
	f.Helper()
	if o.Kind == "" {
		o.Kind = persistence.WorkDelivery
	}
	if o.Target == "" {
		o.Target = feA
	}
	if got := f.complete(now, o); got[0] != want {
		f.Fatalf("CompleteWork(%s %s %s) = %s, want %s", o.MessageID, o.Target, o.Result, got[0], want)
	}
}

// deliver records a delivered outcome for id's delivery work on feA.
func (f *fixture) deliver(now time.Time, id string) {
	f.Helper()
	f.completeOne(now, persistence.Outcome{MessageID: id, Result: persistence.ResultDelivered, Detail: "delivered"}, persistence.Applied)
}

// fail records a failed outcome (reason rejected) for id's work on feA.
func (f *fixture) fail(now time.Time, id string) {
	f.Helper()
	f.completeOne(now, persistence.Outcome{MessageID: id, Result: persistence.ResultFailed, Reason: messages.ReasonRejected, Detail: "refused"}, persistence.Applied)
}

// retry records a retry outcome for id's work on feA, due again at retryAt.
func (f *fixture) retry(now time.Time, id string, retryAt time.Time) {
	f.Helper()
	f.completeOne(now, persistence.Outcome{MessageID: id, Result: persistence.ResultRetry, RetryAt: retryAt, Detail: "busy"}, persistence.Applied)
}

// ledger is the ledger entry of id's delivery work on target.
func (f *fixture) ledger(id, target string) persistence.LedgerEntry {
	f.Helper()
	return f.ledgerOf(persistence.WorkDelivery, id, target)
}

func (f *fixture) ledgerOf(kind persistence.WorkKind, id, target string) persistence.LedgerEntry {
	f.Helper()
	e, err := f.store.Ledger(f.ctx, kind, id, target)
	if err != nil {
		f.Fatalf("Ledger(%s, %q, %q): %v", kind, id, target, err)
	}
	if e.MessageID != id || e.Kind != kind || e.Target != target {
		f.Errorf("Ledger(%s, %q, %q) names %s %q %q", kind, id, target, e.Kind, e.MessageID, e.Target)
	}
	return e
}

// noLedger fails unless id's delivery work on target has no ledger entry.
func (f *fixture) noLedger(id, target string) {
	f.Helper()
	f.noLedgerOf(persistence.WorkDelivery, id, target)
}

func (f *fixture) noLedgerOf(kind persistence.WorkKind, id, target string) {
	f.Helper()
	e, err := f.store.Ledger(f.ctx, kind, id, target)
	if !errors.Is(err, persistence.ErrNotFound) {
		f.Fatalf("Ledger(%s, %q, %q) = %+v, %v; want ErrNotFound", kind, id, target, e, err)
	}
}

func (f *fixture) expire(req persistence.ExpireRequest) []messages.Message {
	f.Helper()
	res, err := f.store.ExpireMessages(f.ctx, req)
	if err != nil {
		f.Fatalf("ExpireMessages(%+v): %v", req, err)
	}
	return res
}

func (f *fixture) resubmit(now time.Time, reroutes ...persistence.Reroute) []persistence.ResubmitResult {
	f.Helper()
	res, err := f.store.Resubmit(f.ctx, now, reroutes)
	if err != nil {
		f.Fatalf("Resubmit: %v", err)
	}
	if len(res) != len(reroutes) {
		f.Fatalf("Resubmit returned %d results for %d reroutes", len(res), len(reroutes))
	}
	return res
}

// wantTime fails when got is not want as a store keeps it: the same instant
// truncated to microseconds, in UTC.
func (f *fixture) wantTime(what string, got, want time.Time) {
	f.Helper()
	if msg := timeDiff(got, want); msg != "" {
		f.Errorf("%s: %s", what, msg)
	}
}

func timeDiff(got, want time.Time) string {
	want = norm(want)
	if !got.Equal(want) {
		return fmt.Sprintf("time %v, want %v", got, want)
	}
	if got.Location() != time.UTC {
		return fmt.Sprintf("time %v is in %v, want UTC", got, got.Location())
	}
	return ""
}

// checkMessage compares every field but History (and Seq unless want.Seq is
// set).
func (f *fixture) checkMessage(what string, got, want messages.Message) {
	f.Helper()
	for _, d := range messageDiff(got, want) {
		f.Errorf("%s: message %s: %s", what, want.ID, d)
	}
}

func messageDiff(got, want messages.Message) []string {
	var d []string
	eq := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %#v, want %#v", name, g, w))
		}
	}
	tm := func(name string, g, w time.Time) {
		if msg := timeDiff(g, w); msg != "" {
			d = append(d, name+": "+msg)
		}
	}
	eq("ID", got.ID, want.ID)
	eq("SourceMSISDN", got.SourceMSISDN, want.SourceMSISDN)
	eq("DestinationMSISDN", got.DestinationMSISDN, want.DestinationMSISDN)
	eq("Body", got.Body, want.Body)
	eq("DataCoding", got.DataCoding, want.DataCoding)
	eq("Binary", string(got.Binary), string(want.Binary))
	if g, w := classString(got.MessageClass), classString(want.MessageClass); g != w {
		d = append(d, fmt.Sprintf("MessageClass = %s, want %s", g, w))
	}
	if got.Binary == nil != (want.Binary == nil) {
		d = append(d, fmt.Sprintf("Binary nil = %v, want %v", got.Binary == nil, want.Binary == nil))
	}
	if msg := queuedDiff(got.ValidityUntil, want.ValidityUntil); msg != "" {
		d = append(d, "ValidityUntil: "+msg)
	}
	if msg := queuedDiff(got.DeliverAfter, want.DeliverAfter); msg != "" {
		d = append(d, "DeliverAfter: "+msg)
	}
	eq("State", got.State, want.State)
	eq("SourceSMSC", got.SourceSMSC, want.SourceSMSC)
	eq("DestSMSC", got.DestSMSC, want.DestSMSC)
	eq("Frontend", got.Frontend, want.Frontend)
	eq("SubmittedBy", got.SubmittedBy, want.SubmittedBy)
	eq("Attempts", got.Attempts, want.Attempts)
	eq("Reason", got.Reason, want.Reason)
	eq("Token", got.Token, want.Token)
	tm("CreatedAt", got.CreatedAt, want.CreatedAt)
	tm("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	tm("SubmittedAt", got.SubmittedAt, want.SubmittedAt)
	if msg := queuedDiff(got.QueuedAt, want.QueuedAt); msg != "" {
		d = append(d, "QueuedAt: "+msg)
	}
	if want.Seq != 0 {
		eq("Seq", got.Seq, want.Seq)
	}
	return d
}

// queuedDiff compares two optional times (QueuedAt, ValidityUntil,
// DeliverAfter): both nil, or the same time as a store keeps it.
func queuedDiff(got, want *time.Time) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got == nil:
		return fmt.Sprintf("nil, want %v", norm(*want))
	case want == nil:
		return fmt.Sprintf("%v, want nil", *got)
	}
	return timeDiff(*got, *want)
}

// wantQueuedAt fails unless id's QueuedAt is want (nil for none).
func (f *fixture) wantQueuedAt(id string, want *time.Time) {
	f.Helper()
	if msg := queuedDiff(f.get(id).QueuedAt, want); msg != "" {
		f.Errorf("message %s: QueuedAt: %s", id, msg)
	}
}

// ptr is &t, for QueuedAt.
func ptr(t time.Time) *time.Time { return &t }

// classString shows a message class: its number, or "none".
func classString(c *int) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(*c)
}

// checkHistory compares a message's history with want, entry by entry.
func (f *fixture) checkHistory(id string, want ...messages.HistoryEntry) {
	f.Helper()
	got := f.get(id).History
	if len(got) != len(want) {
		f.Errorf("message %s: history has %d entries, want %d: %+v", id, len(got), len(want), got)
		return
	}
	for i := range want {
		if got[i].State != want[i].State || got[i].Detail != want[i].Detail {
			f.Errorf("message %s: history[%d] = {%s %q}, want {%s %q}", id, i, got[i].State, got[i].Detail, want[i].State, want[i].Detail)
		}
		if msg := timeDiff(got[i].At, want[i].At); msg != "" {
			f.Errorf("message %s: history[%d].At: %s", id, i, msg)
		}
	}
}

// historyLen is the number of history entries of id.
func (f *fixture) historyLen(id string) int {
	f.Helper()
	return len(f.get(id).History)
}

// wantState fails unless id is in state.
func (f *fixture) wantState(id string, state messages.State) {
	f.Helper()
	if got := f.get(id).State; got != state {
		f.Errorf("message %s: state %s, want %s", id, got, state)
	}
}

// ids lists the message ids of claimed work, in order.
func workIDs(ws []persistence.Work) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.MessageID
	}
	return out
}

// messageIDs lists the ids of msgs, in order.
func messageIDs(msgs []messages.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// wantIDs fails unless got lists exactly want, in order.
func (f *fixture) wantIDs(what string, got []string, want ...string) {
	f.Helper()
	if !equalStrings(got, want) {
		f.Errorf("%s = %q, want %q", what, got, want)
	}
}

// wantOutbox fails unless the outbox holds n rows.
func (f *fixture) wantOutbox(n int64) {
	f.Helper()
	if got := f.stats().OutboxDepth; got != n {
		f.Errorf("Stats.OutboxDepth = %d, want %d", got, n)
	}
}

// secs is i seconds.
func secs(i int) time.Duration { return time.Duration(i) * time.Second }

// wantIDSet fails unless got holds exactly want, in any order (for rows whose
// relative order the interface leaves open).
func (f *fixture) wantIDSet(what string, got []string, want ...string) {
	f.Helper()
	g := append([]string(nil), got...)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if !equalStrings(g, w) {
		f.Errorf("%s = %q, want %q in any order", what, got, want)
	}
}
