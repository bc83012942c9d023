package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// A multi-instance site: its instances share one store (opened by the
// sim, given to each instance as Config.Store) and one in-memory elector
// (Config.Elector). Each incarnation of an instance sees the store through
// a storeView and the elector through a session; a crash kills both, as
// the death of a process ends its database connections: the crashed
// incarnation's actors, still winding down, write nothing more, and the
// master lock it held is free at once.

// errCrashed is what a crashed incarnation's store calls answer.
var errCrashed = fmt.Errorf("the instance crashed (sim): %w", persistence.ErrClosed)

// elector is the in-memory leader lock of one site (a Postgres advisory
// lock per name).
type elector struct {
	mu      sync.Mutex
	holders map[string]*leadership
}

func newElector() *elector { return &elector{holders: map[string]*leadership{}} }

// session is one incarnation's connection to the elector.
type session struct {
	el   *elector
	dead atomic.Bool
}

var _ persistence.Elector = (*session)(nil)

// leadership is a held lock.
type leadership struct {
	el   *elector
	name string
	s    *session
	lost chan struct{}
	once sync.Once
}

func (l *leadership) Lost() <-chan struct{} { return l.lost }

// held reports whether l still holds its lock (false once it lapsed:
// PauseMaster).
func (l *leadership) held() bool {
	l.el.mu.Lock()
	defer l.el.mu.Unlock()
	return l.el.holders[l.name] == l
}

func (l *leadership) Release(context.Context) error {
	l.el.mu.Lock()
	defer l.el.mu.Unlock()
	l.el.free(l)
	return nil
}

// free ends l (el.mu held).
func (el *elector) free(l *leadership) {
	if el.holders[l.name] == l {
		delete(el.holders, l.name)
	}
	l.once.Do(func() { close(l.lost) })
}

// TryLead implements persistence.Elector.
func (s *session) TryLead(ctx context.Context, name string) (persistence.Leadership, error) {
	if s.dead.Load() {
		return nil, errCrashed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.el.mu.Lock()
	defer s.el.mu.Unlock()
	if s.el.holders[name] != nil {
		return nil, nil
	}
	l := &leadership{el: s.el, name: name, s: s, lost: make(chan struct{})}
	s.el.holders[name] = l
	return l, nil
}

// end ends the session: every lock it holds is lost (Lost closes).
func (s *session) end() {
	s.dead.Store(true)
	s.el.mu.Lock()
	defer s.el.mu.Unlock()
	for _, l := range s.el.holders {
		if l.s == s {
			s.el.free(l)
		}
	}
}

// storeView is one incarnation's view of its site's shared store: every
// call of persistence.Store fails once it is killed, else meets the
// node's store faults (faultStore), and the claims, outcomes and lease
// releases it makes are logged for the claim check, the outcomes it
// could not record for the push frontends' labels (Cluster.handedBy). It holds the store in
// a field, not embedded: every method is its own, so a method added to
// persistence.Store does not compile until the view checks it too.
type storeView struct {
	Store *faultStore
	log   *claimLog
	dead  atomic.Bool
	// crash, set once the incarnation runs, is asked after every commit
	// that reaches crash points (Cluster.crashAfterCommit): when it
	// crashed the incarnation, the call answers errCrashed.
	crash atomic.Pointer[func([]CommitPoint) bool]
	// paused holds every write while the incarnation is paused
	// (PauseMaster): a stopped process makes its writes when it goes on.
	// Reads go through: they change nothing, and production code holds a
	// mutex across some (the node's stats cache), on which a goroutine is
	// not durably blocked: a held read would freeze the bubble's clock.
	paused freeze
}

var _ persistence.Store = (*storeView)(nil)

func (v *storeView) kill() {
	v.dead.Store(true)
	v.paused.end()
}

// crashed reports whether the incarnation crashed right after a commit
// that reached points.
func (v *storeView) crashed(points []CommitPoint) bool {
	f := v.crash.Load()
	return f != nil && len(points) > 0 && (*f)(points)
}

// use is the store a call that reads or writes goes on to, or why it may
// not: a killed incarnation's view refuses every call, and the node's
// store faults fail some.
func (v *storeView) use(a access) (persistence.Store, error) {
	if a == writing {
		v.paused.wait(context.Background())
	}
	if v.dead.Load() {
		return nil, errCrashed
	}
	if err := v.Store.fault(a); err != nil {
		return nil, err
	}
	return v.Store.Store, nil
}

// Kind names the store's implementation (no call of the store).
func (v *storeView) Kind() string { return v.Store.Store.Kind() }

// Close does nothing: the sim closes the shared store.
func (v *storeView) Close() error { return nil }

func (v *storeView) Ping(ctx context.Context) error {
	st, err := v.use(reading)
	if err != nil {
		return err
	}
	return st.Ping(ctx)
}

func (v *storeView) Ring(ctx context.Context) (persistence.RingState, error) {
	st, err := v.use(reading)
	if err != nil {
		return persistence.RingState{}, err
	}
	return st.Ring(ctx)
}

// PublishRing refuses a publication under a lock that lapsed, as the
// Postgres store does (it asks the database, in the publishing
// transaction, whether the session still holds the lock): the SQLite
// store has only the lock's Lost channel to go by, which a paused master
// closes late (PauseMaster).
func (v *storeView) PublishRing(ctx context.Context, lead persistence.Leadership, prev uint64, s persistence.RingState) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	if l, ok := lead.(*leadership); ok && !l.held() {
		return fmt.Errorf("sim: the ring master lock lapsed: %w", persistence.ErrLeadershipLost)
	}
	return st.PublishRing(ctx, lead, prev, s)
}

func (v *storeView) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	st, err := v.use(writing)
	if err != nil {
		v.log.unrecorded(w.Outcomes, nil, err)
		return persistence.Written{}, err
	}
	start := v.log.stamp()
	got, err := st.Write(ctx, now, w)
	end := v.log.stamp()
	v.log.unrecorded(w.Outcomes, got.Completions, err)
	if err == nil {
		for i, c := range got.Claims {
			if !c.Refused {
				v.log.claimed(w.Claims[i], c.Work, start, end)
			}
		}
		v.log.completed(w.Outcomes, got.Completions, start, end)
		for _, acc := range got.Accepted {
			if acc.Work != nil { // written leased: a claim made by the accepting commit
				req := persistence.ClaimRequest{Kind: acc.Work.Kind, Target: acc.Work.Target, Owner: acc.Work.LeaseOwner}
				v.log.claimed(req, []persistence.Work{*acc.Work}, start, end)
			}
		}
	}
	if len(w.Statuses) > 0 {
		v.log.reported(w.Statuses, got.Reported, err, start, end)
	}
	if err == nil && v.crashed(writePoints(w, got)) {
		return persistence.Written{}, errCrashed
	}
	return got, err
}

func (v *storeView) Accept(ctx context.Context, now time.Time, b []persistence.NewMessage) ([]persistence.Accepted, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	acc, err := st.Accept(ctx, now, b)
	if err == nil && v.crashed(acceptPoints(acc)) {
		return nil, errCrashed
	}
	return acc, err
}

func (v *storeView) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	st, err := v.use(reading)
	if err != nil {
		return messages.Message{}, err
	}
	return st.GetMessage(ctx, id)
}

func (v *storeView) ListMessages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	st, err := v.use(reading)
	if err != nil {
		return persistence.Page{}, err
	}
	return st.ListMessages(ctx, q)
}

func (v *storeView) Stats(ctx context.Context) (persistence.Stats, error) {
	st, err := v.use(reading)
	if err != nil {
		return persistence.Stats{}, err
	}
	return st.Stats(ctx)
}

func (v *storeView) OldestDue(ctx context.Context, now time.Time) (time.Time, error) {
	st, err := v.use(reading)
	if err != nil {
		return time.Time{}, err
	}
	return st.OldestDue(ctx, now)
}

func (v *storeView) ClaimWork(ctx context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	st, err := v.use(writing)
	if err != nil {
		return persistence.Claim{}, err
	}
	start := v.log.stamp()
	c, err := st.ClaimWork(ctx, req)
	if err == nil {
		v.log.claimed(req, c.Work, start, v.log.stamp())
		if v.crashed(claimPoints(req.Kind, c.Work)) {
			return persistence.Claim{}, errCrashed
		}
	}
	return c, err
}

func (v *storeView) CompleteWork(ctx context.Context, now time.Time, os []persistence.Outcome) ([]persistence.Completion, error) {
	st, err := v.use(writing)
	if err != nil {
		v.log.unrecorded(os, nil, err)
		return nil, err
	}
	start := v.log.stamp()
	cs, err := st.CompleteWork(ctx, now, os)
	end := v.log.stamp()
	v.log.unrecorded(os, cs, err)
	if err == nil {
		v.log.completed(os, cs, start, end)
		if v.crashed(outcomePoints(os, cs)) {
			return nil, errCrashed
		}
	}
	return cs, err
}

func (v *storeView) ReleaseLeases(ctx context.Context, owner string) (int64, error) {
	st, err := v.use(writing)
	if err != nil {
		return 0, err
	}
	start := v.log.stamp()
	n, err := st.ReleaseLeases(ctx, owner)
	v.log.released(owner, start, v.log.stamp()) // an error may still have released them
	return n, err
}

func (v *storeView) Ledger(ctx context.Context, k persistence.WorkKind, id, target string) (persistence.LedgerEntry, error) {
	st, err := v.use(reading)
	if err != nil {
		return persistence.LedgerEntry{}, err
	}
	return st.Ledger(ctx, k, id, target)
}

func (v *storeView) ApplyStatus(ctx context.Context, now time.Time, us []persistence.StatusUpdate) ([]persistence.Completion, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	start := v.log.stamp()
	cs, err := st.ApplyStatus(ctx, now, us)
	v.log.reported(us, cs, err, start, v.log.stamp())
	if err == nil && v.crashed(statusPoints(cs)) {
		return nil, errCrashed
	}
	return cs, err
}

func (v *storeView) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.QueueForwards(ctx, now, peer, detail, limit)
}

func (v *storeView) FailForwards(ctx context.Context, req persistence.ForwardExpiry) ([]messages.Message, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.FailForwards(ctx, req)
}

func (v *storeView) ForwardTargets(ctx context.Context) ([]string, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.ForwardTargets(ctx)
}

func (v *storeView) PeerRegistries(ctx context.Context) ([]persistence.PeerRegistry, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.PeerRegistries(ctx)
}

func (v *storeView) PutPeerRegistry(ctx context.Context, r persistence.PeerRegistry) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.PutPeerRegistry(ctx, r)
}

func (v *storeView) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.ExpireMessages(ctx, req)
}

func (v *storeView) Purgeable(ctx context.Context, req persistence.PurgeRequest) ([]messages.Message, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.Purgeable(ctx, req)
}

func (v *storeView) CountPurgeable(ctx context.Context, req persistence.PurgeRequest) (int64, error) {
	st, err := v.use(reading)
	if err != nil {
		return 0, err
	}
	return st.CountPurgeable(ctx, req)
}

func (v *storeView) Purge(ctx context.Context, req persistence.PurgeRequest, ids []string) ([]persistence.Purged, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.Purge(ctx, req, ids)
}

func (v *storeView) Compact(ctx context.Context, short bool) (int64, error) {
	st, err := v.use(writing)
	if err != nil {
		return 0, err
	}
	return st.Compact(ctx, short)
}

func (v *storeView) RelayWork(ctx context.Context, req persistence.RelayRequest) ([]persistence.Relay, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.RelayWork(ctx, req)
}

func (v *storeView) Unrelay(ctx context.Context, rows []int64) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.Unrelay(ctx, rows)
}

func (v *storeView) OldestUnrelayed(ctx context.Context) (time.Time, error) {
	st, err := v.use(reading)
	if err != nil {
		return time.Time{}, err
	}
	return st.OldestUnrelayed(ctx)
}

func (v *storeView) RelayAgain(ctx context.Context, after int64, limit int) (int64, error) {
	st, err := v.use(writing)
	if err != nil {
		return 0, err
	}
	return st.RelayAgain(ctx, after, limit)
}

func (v *storeView) Resubmit(ctx context.Context, now time.Time, rs []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.Resubmit(ctx, now, rs)
}

func (v *storeView) Routes(ctx context.Context) ([]persistence.Route, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.Routes(ctx)
}

func (v *storeView) PutRoute(ctx context.Context, r persistence.Route) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.PutRoute(ctx, r)
}

func (v *storeView) DeleteRoute(ctx context.Context, prefix string) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.DeleteRoute(ctx, prefix)
}

func (v *storeView) Frontends(ctx context.Context) ([]persistence.Frontend, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.Frontends(ctx)
}

func (v *storeView) PutFrontend(ctx context.Context, f persistence.Frontend) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.PutFrontend(ctx, f)
}

func (v *storeView) DeleteFrontend(ctx context.Context, name string) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.DeleteFrontend(ctx, name)
}

func (v *storeView) Credentials(ctx context.Context) ([]messages.Credential, error) {
	st, err := v.use(reading)
	if err != nil {
		return nil, err
	}
	return st.Credentials(ctx)
}

func (v *storeView) AddCredential(ctx context.Context, c messages.Credential, audit messages.AuditEntry) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.AddCredential(ctx, c, audit)
}

func (v *storeView) RevokeCredential(ctx context.Context, name string, audit messages.AuditEntry) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.RevokeCredential(ctx, name, audit)
}

func (v *storeView) AppendAudit(ctx context.Context, entries []messages.AuditEntry) error {
	st, err := v.use(writing)
	if err != nil {
		return err
	}
	return st.AppendAudit(ctx, entries)
}

func (v *storeView) ListAudit(ctx context.Context, q persistence.AuditQuery) (persistence.AuditPage, error) {
	st, err := v.use(reading)
	if err != nil {
		return persistence.AuditPage{}, err
	}
	return st.ListAudit(ctx, q)
}

func (v *storeView) PurgeAudit(ctx context.Context, before time.Time, limit int) (int64, error) {
	st, err := v.use(writing)
	if err != nil {
		return 0, err
	}
	return st.PurgeAudit(ctx, before, limit)
}

func (v *storeView) RecordReceipts(ctx context.Context, now time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	st, err := v.use(writing)
	if err != nil {
		return nil, err
	}
	return st.RecordReceipts(ctx, now, rs)
}

// workKey names the work on one message (an outbox row's kind, target and
// message).
type workKey struct {
	kind          persistence.WorkKind
	target, msgID string
}

// claimRec is one claim of one outbox row: its lease [now, until) and the
// stamps of the start and end of the call that took it (claimLog.stamp).
type claimRec struct {
	row            int64
	owner          string
	epoch          uint64
	now, until     time.Time
	callLo, callHi int64
}

// endRec is an event that ends a lease: an outcome recorded (not refused
// as stale), a peer's status for a forward, or the owner's leases
// released; lo and hi stamp the start and end of its call (it committed
// in between).
type endRec struct {
	lo, hi int64
}

// claimLog is the record of one site's claims, for the claim check made
// after the run: no outbox row is claimed by a second owner while the
// lease of the first has not ended and no outcome of it was recorded.
// It also counts, per work, the outcomes the site's store did not record.
type claimLog struct {
	mu       sync.Mutex
	claims   map[workKey][]claimRec
	ends     map[workKey][]endRec
	releases map[string][]endRec // by owner
	statuses map[string][]endRec // forward rows ended by a peer's status, by message
	lost     map[workKey]int     // outcomes not recorded
	// seq is the last stamp given (stamp).
	seq int64
	// delivered are the messages a peer's report moved to delivered
	// (applied), with the peers that reported it.
	delivered map[string][]string
	n         int64
}

func newClaimLog() *claimLog {
	return &claimLog{claims: map[workKey][]claimRec{}, ends: map[workKey][]endRec{},
		releases: map[string][]endRec{}, statuses: map[string][]endRec{}, lost: map[workKey]int{}, delivered: map[string][]string{}}
}

// stamp is a point in the order of the calls the log records, taken
// before and after each: stamps increase with every one taken. The
// bubble's clock cannot order the calls: it moves only when every
// goroutine is blocked, so the calls of a burst of work (a claim, another
// instance's claim, an outcome) all happen at one instant.
func (l *claimLog) stamp() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return l.seq
}

// unrecorded counts the outcomes of os that a write did not record: all
// of them when it failed (err), else those refused as stale (cs). A
// crashed incarnation's are not counted: it hands nothing over again.
func (l *claimLog) unrecorded(os []persistence.Outcome, cs []persistence.Completion, err error) {
	if errors.Is(err, errCrashed) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range os {
		if err != nil || (i < len(cs) && refused(cs[i])) {
			l.lost[workKey{o.Kind, o.Target, o.MessageID}]++
		}
	}
}

// refused reports whether a completion left the work's lease as it was:
// a fenced outcome whose row was claimed again since, or a pull ack naming
// an attempt older than the one offered since.
func refused(c persistence.Completion) bool {
	return c == persistence.StaleEpoch || c == persistence.Stale
}

// unrecordedOf is how many outcomes of k the site's store did not record.
func (l *claimLog) unrecordedOf(k workKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[k]
}

func (l *claimLog) claimed(req persistence.ClaimRequest, ws []persistence.Work, lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range ws {
		k := workKey{w.Kind, w.Target, w.MessageID}
		l.claims[k] = append(l.claims[k], claimRec{row: w.ID, owner: w.LeaseOwner, epoch: w.LeaseEpoch,
			now: req.Now, until: w.LeaseUntil, callLo: lo, callHi: hi})
		l.n++
	}
}

func (l *claimLog) completed(os []persistence.Outcome, cs []persistence.Completion, lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range os {
		if i < len(cs) && refused(cs[i]) {
			continue // refused: the lease stands
		}
		k := workKey{o.Kind, o.Target, o.MessageID}
		l.ends[k] = append(l.ends[k], endRec{lo: lo, hi: hi})
	}
}

func (l *claimLog) released(owner string, lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releases[owner] = append(l.releases[owner], endRec{lo: lo, hi: hi})
}

// reported logs a call that wrote peers' status updates us (cs their
// completions, err the call's error): each may have ended its forward
// row; those applied as delivered moved their message to delivered.
func (l *claimLog) reported(us []persistence.StatusUpdate, cs []persistence.Completion, err error, lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, u := range us {
		l.statuses[u.ID] = append(l.statuses[u.ID], endRec{lo: lo, hi: hi})
		if err == nil && i < len(cs) && cs[i] == persistence.Applied && u.Result == persistence.ResultDelivered {
			l.delivered[u.ID] = append(l.delivered[u.ID], u.From)
		}
	}
}

// reportedBy reports whether the site applied a report of peer that
// message id was delivered.
func (l *claimLog) reportedBy(id, peer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.delivered[id], peer)
}

// ended reports whether some end event's call overlapped the window of
// stamps [lo, hi], both ends included: it may have committed inside it.
// (Until 2026-12-06 the window and the ends were the bubble's instants,
// and every call of one instant was in every window of that instant: a
// double claim whose calls and a later outcome shared an instant, as a
// burst of work does on virtual time, was never flagged.)
func ended(es []endRec, lo, hi int64) bool {
	for _, e := range es {
		if e.lo <= hi && e.hi >= lo {
			return true
		}
	}
	return false
}

// check returns the claims made while another owner's lease on the same
// work was live and not ended: for two claims by different owners whose
// leases overlap, the later one (in commit order) must follow an end of
// the earlier one. The log cannot tell which of two overlapping calls
// committed first, so an end event anywhere between the first call's
// start and the second call's end clears the pair (no false alarm, at the
// price of missing a few).
func (l *claimLog) check(site string) (claims int64, doubles []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, cs := range l.claims {
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				a, b := cs[i], cs[j]
				if a.row != b.row || a.owner == b.owner {
					continue
				}
				if !(a.now.Before(b.until) && b.now.Before(a.until)) {
					continue // the leases do not overlap
				}
				lo, hi := min(a.callLo, b.callLo), max(a.callHi, b.callHi)
				if ended(l.ends[k], lo, hi) || ended(l.releases[a.owner], lo, hi) || ended(l.releases[b.owner], lo, hi) ||
					(k.kind == persistence.WorkForward && ended(l.statuses[k.msgID], lo, hi)) {
					continue
				}
				doubles = append(doubles, fmt.Sprintf("double claim at %s: %s row %d (%s -> %s) leased to %s (epoch %d) until %s, claimed by %s (epoch %d) at %s",
					site, k.msgID, a.row, k.kind, k.target, a.owner, a.epoch, a.until.Format("15:04:05.000"),
					b.owner, b.epoch, b.now.Format("15:04:05.000")))
			}
		}
	}
	return l.n, doubles
}
