package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func ringCases() []testCase {
	return []testCase{
		{"PublishCompareAndSet", publishCompareAndSet},
		{"PublishValidates", publishValidates},
		{"PublishUnderALeadership", publishUnderALeadership},
		{"FencedClaimTakesItsRanges", fencedClaimTakesItsRanges},
		{"FencedClaimRefused", fencedClaimRefused},
		{"FencedClaimNextDue", fencedClaimNextDue},
		{"FencedOutcomes", fencedOutcomes},
		{"FencedOutcomeNewerEpochSameOwner", fencedOutcomeNewerEpochSameOwner},
		{"FencedOutcomePrecedence", fencedOutcomePrecedence},
		{"EpochZeroOutcomeRefusedOverAnotherClaim", epochZeroOutcomeRefusedOverAnotherClaim},
		{"ClaimsRacePublish", claimsRacePublish},
	}
}

// Token ring landmarks: quarter is 2^62, half 2^63 (where the stored bit
// pattern turns negative).
const (
	quarter = uint64(1) << 62
	half    = uint64(1) << 63
	top     = uint64(math.MaxUint64)
)

// tr is the token range [lo, hi].
func tr(lo, hi uint64) persistence.TokenRange { return persistence.TokenRange{Lo: lo, Hi: hi} }

var wholeRing = tr(0, top)

// idsIn returns n message ids, prefix-0, prefix-1, ... skipped until their
// tokens fall in r. r must not be tiny: about 1/len(r) tries per id.
func idsIn(prefix string, r persistence.TokenRange, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if r.Contains(messages.TokenOf(id)) {
			out = append(out, id)
		}
	}
	return out
}

// idIn is one id whose token falls in r.
func idIn(prefix string, r persistence.TokenRange) string { return idsIn(prefix, r, 1)[0] }

// owner is the range owner {service, r, who}.
func owner(service string, r persistence.TokenRange, who string) persistence.RangeOwner {
	return persistence.RangeOwner{Service: service, Range: r, Owner: who}
}

// layout is the suite's assignment under epoch: delivery split in three,
// A [0, 2^62), B [2^62, 3*2^62) (across 2^63), C [3*2^62, MaxUint64]; A
// forwards for the whole ring.
func layout(epoch uint64) persistence.RingState {
	return persistence.RingState{
		Epoch: epoch, Master: ownerA, MasterAddress: "10.0.0.1:8443",
		Owners: []persistence.RangeOwner{
			owner(messages.ServiceDelivery, tr(0, quarter-1), ownerA),
			owner(messages.ServiceDelivery, tr(quarter, 3*quarter-1), ownerB),
			owner(messages.ServiceDelivery, tr(3*quarter, top), ownerC),
			owner(messages.ServiceForward, wholeRing, ownerA),
		},
		Members: []messages.RingMember{
			{InstanceID: ownerA, Address: "10.0.0.1:8443", Zone: "z1", Services: []string{messages.ServiceDelivery, messages.ServiceForward},
				Ranges: []messages.TokenRange{tr(0, quarter-1)}},
			{InstanceID: ownerB, Address: "10.0.0.2:8443", Services: []string{messages.ServiceDelivery},
				Ranges: []messages.TokenRange{tr(quarter, 3*quarter-1)}},
			{InstanceID: ownerC, Address: "10.0.0.3:8443", Services: []string{messages.ServiceDelivery},
				Ranges: []messages.TokenRange{tr(3*quarter, top)}},
		},
		PublishedAt: base,
	}
}

// alone is an assignment under epoch in which who owns the whole ring for
// both services.
func alone(epoch uint64, who string) persistence.RingState {
	return persistence.RingState{Epoch: epoch, Master: who, Owners: []persistence.RangeOwner{
		owner(messages.ServiceDelivery, wholeRing, who), owner(messages.ServiceForward, wholeRing, who),
	}, PublishedAt: base}
}

func (f *fixture) publish(prev uint64, s persistence.RingState) {
	f.Helper()
	if err := f.store.PublishRing(f.ctx, nil, prev, s); err != nil {
		f.Fatalf("PublishRing(%d, epoch %d): %v", prev, s.Epoch, err)
	}
}

func (f *fixture) ring() persistence.RingState {
	f.Helper()
	s, err := f.store.Ring(f.ctx)
	if err != nil {
		f.Fatalf("Ring: %v", err)
	}
	return s
}

// wantRing fails unless the stored assignment is want as a store keeps it:
// owners by service and range, the time normalized.
func (f *fixture) wantRing(want persistence.RingState) {
	f.Helper()
	got := f.ring()
	want.Owners = append([]persistence.RangeOwner(nil), want.Owners...)
	persistence.SortOwners(want.Owners)
	if !want.PublishedAt.IsZero() {
		want.PublishedAt = norm(want.PublishedAt)
		if msg := timeDiff(got.PublishedAt, want.PublishedAt); msg != "" {
			f.Errorf("Ring().PublishedAt: %s", msg)
		}
	} else if !got.PublishedAt.IsZero() {
		f.Errorf("Ring().PublishedAt = %v, want zero", got.PublishedAt)
	}
	got.PublishedAt, want.PublishedAt = time.Time{}, time.Time{}
	if want.Absent != nil {
		want.Absent = append([]persistence.AbsentMember(nil), want.Absent...)
		for i := range want.Absent {
			want.Absent[i].LastSeen = norm(want.Absent[i].LastSeen)
		}
	}
	if !reflect.DeepEqual(got, want) {
		f.Errorf("Ring() = %+v\nwant %+v", got, want)
	}
}

// fenced is a delivery claim on feA under epoch for ranges, at now.
func fenced(kind persistence.WorkKind, target, who string, now time.Time, epoch uint64, ranges ...persistence.TokenRange) persistence.ClaimRequest {
	return persistence.ClaimRequest{Kind: kind, Target: target, Owner: who, Limit: 100, Now: now, Lease: lease,
		Ring: &persistence.RingClaim{Epoch: epoch, Ranges: ranges}}
}

// wantStale fails unless the claim is refused with ErrStaleEpoch.
func (f *fixture) wantStale(what string, req persistence.ClaimRequest) {
	f.Helper()
	c, err := f.store.ClaimWork(f.ctx, req)
	if !errors.Is(err, persistence.ErrStaleEpoch) {
		f.Errorf("%s: ClaimWork = %d rows, %v; want ErrStaleEpoch", what, len(c.Work), err)
	}
}

// fencedOutcome is a delivery outcome on feA fenced by (epoch, who).
func fencedOutcome(id string, r persistence.Result, epoch uint64, who string) persistence.Outcome {
	o := outcome(persistence.WorkDelivery, feA, id, r)
	o.Epoch, o.Owner = epoch, who
	if r == persistence.ResultFailed {
		o.Reason = messages.ReasonRejected
	}
	return o
}

func publishCompareAndSet(f *fixture) {
	f.wantRing(persistence.RingState{})
	// Nothing was published: only prev 0 is current.
	if err := f.store.PublishRing(f.ctx, nil, 1, layout(2)); !errors.Is(err, persistence.ErrStaleEpoch) {
		f.Fatalf("PublishRing(1) on an empty ring = %v, want ErrStaleEpoch", err)
	}
	f.wantRing(persistence.RingState{})

	// With members a master saw lately and no longer lists, kept with
	// what they announced and when.
	first := layout(1)
	first.Absent = []persistence.AbsentMember{{InstanceID: "old", LastSeen: base},
		{InstanceID: "new", Capabilities: []string{messages.CapMessageClass}, LastSeen: at(time.Second)}}
	f.publish(0, first)
	f.wantRing(first)

	// An old master that still thinks the ring is at 0 changes nothing.
	if err := f.store.PublishRing(f.ctx, nil, 0, alone(5, ownerB)); !errors.Is(err, persistence.ErrStaleEpoch) {
		f.Fatalf("PublishRing(0) at epoch 1 = %v, want ErrStaleEpoch", err)
	}
	f.wantRing(first)

	// The next epoch replaces owners, members and absent members; epochs need not be
	// consecutive, and may use the whole uint64.
	second := alone(5, ownerB)
	second.MasterAddress = "10.0.0.2:8443"
	f.publish(1, second)
	f.wantRing(second)
	third := layout(half + 7)
	third.PublishedAt = at(time.Minute)
	f.publish(5, third)
	f.wantRing(third)
	if err := f.store.PublishRing(f.ctx, nil, 5, layout(half+8)); !errors.Is(err, persistence.ErrStaleEpoch) {
		f.Errorf("PublishRing(5) at epoch 2^63+7 = %v, want ErrStaleEpoch", err)
	}
	f.wantRing(third)
}

// outsideLead is a Leadership of an elector outside the store (the sim's
// in-memory one): held until released.
type outsideLead struct {
	lost chan struct{}
	once sync.Once
}

func newOutsideLead() *outsideLead { return &outsideLead{lost: make(chan struct{})} }

func (l *outsideLead) Lost() <-chan struct{} { return l.lost }

func (l *outsideLead) Release(context.Context) error {
	l.once.Do(func() { close(l.lost) })
	return nil
}

// wantPublish fails unless PublishRing(lead, prev, s) returns an error
// that is want (nil: none).
func (f *fixture) wantPublish(lead persistence.Leadership, prev uint64, s persistence.RingState, want error) {
	f.Helper()
	err := f.store.PublishRing(f.ctx, lead, prev, s)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		f.Fatalf("PublishRing(%d, epoch %d) = %v, want %v", prev, s.Epoch, err, want)
	}
}

// publishUnderALeadership: a publication that names its publisher's lock
// is stored only while the lock is held; under a held lock a stale
// compare-and-set is ErrStaleEpoch, under a lost one the publication is
// ErrLeadershipLost whatever its previous epoch. A store that elects
// confirms a lock of its own elector in its database.
func publishUnderALeadership(f *fixture) {
	lead := newOutsideLead()
	f.wantPublish(lead, 0, layout(1), nil)
	f.wantRing(layout(1))
	f.wantPublish(lead, 0, alone(2, ownerB), persistence.ErrStaleEpoch)
	f.wantRing(layout(1))

	_ = lead.Release(f.ctx)
	f.wantPublish(lead, 1, alone(2, ownerB), persistence.ErrLeadershipLost)
	f.wantPublish(lead, 0, alone(2, ownerB), persistence.ErrLeadershipLost)
	f.wantRing(layout(1))

	el, ok := f.store.(persistence.Elector)
	if !ok {
		return
	}
	own, err := el.TryLead(f.ctx, "ring-master")
	if err != nil || own == nil {
		f.Fatalf("TryLead = %v, %v; want the free lock", own, err)
	}
	f.wantPublish(own, 1, alone(2, ownerB), nil)
	f.wantPublish(own, 1, alone(3, ownerB), persistence.ErrStaleEpoch)
	if err := own.Release(f.ctx); err != nil {
		f.Fatal(err)
	}
	f.wantPublish(own, 2, alone(3, ownerC), persistence.ErrLeadershipLost)
	f.wantRing(alone(2, ownerB))
}

func publishValidates(f *fixture) {
	f.publish(0, layout(3))
	bad := []struct {
		name string
		prev uint64
		s    persistence.RingState
	}{
		{"epoch not above prev", 3, layout(3)},
		{"unknown service", 3, func() persistence.RingState {
			s := alone(4, ownerA)
			s.Owners[0].Service = "status"
			return s
		}()},
		{"lo above hi", 3, func() persistence.RingState {
			s := alone(4, ownerA)
			s.Owners[0].Range = tr(10, 9)
			return s
		}()},
		{"overlapping ranges", 3, func() persistence.RingState {
			s := alone(4, ownerA)
			s.Owners = append(s.Owners, owner(messages.ServiceDelivery, tr(half, half), ownerB))
			return s
		}()},
		{"empty owner", 3, func() persistence.RingState {
			s := alone(4, ownerA)
			s.Owners[1].Owner = ""
			return s
		}()},
	}
	for _, b := range bad {
		err := f.store.PublishRing(f.ctx, nil, b.prev, b.s)
		if err == nil || errors.Is(err, persistence.ErrStaleEpoch) {
			f.Errorf("%s: PublishRing = %v, want a validation error", b.name, err)
		}
	}
	f.wantRing(layout(3))
}

func fencedClaimTakesItsRanges(f *fixture) {
	f.publish(0, layout(1))
	a := idsIn("a", tr(0, quarter-1), 2)
	below := idIn("b-low", tr(quarter, half-1)) // B's range below 2^63 ...
	above := idIn("b-high", tr(half, 3*quarter-1))
	c := idIn("c", tr(3*quarter, top))
	topmost := idIn("c-top", tr(top-top/16, top)) // the last 16th, up to MaxUint64
	for _, id := range []string{a[0], a[1], below, above, c, topmost} {
		f.accept(base, newMsg(id))
	}

	check := func(who string, claim persistence.Claim, want ...string) {
		f.Helper()
		f.wantIDSet(who+"'s fenced claim", workIDs(claim.Work), want...)
		for _, w := range claim.Work {
			if w.LeaseEpoch != 1 || w.LeaseOwner != who || w.Token != messages.TokenOf(w.MessageID) {
				f.Errorf("%s claimed %s with epoch %d owner %q token %d", who, w.MessageID, w.LeaseEpoch, w.LeaseOwner, w.Token)
			}
		}
	}
	check(ownerB, f.claim(fenced(persistence.WorkDelivery, feA, ownerB, base, 1, tr(quarter, 3*quarter-1))), below, above)
	check(ownerC, f.claim(fenced(persistence.WorkDelivery, feA, ownerC, base, 1, tr(3*quarter, top))), c, topmost)
	// Two ranges inside one owned range.
	check(ownerA, f.claim(fenced(persistence.WorkDelivery, feA, ownerA, base, 1, tr(0, quarter/2), tr(quarter/2+1, quarter-1))), a...)

	// An unfenced claim finds everything leased, and its own rows carry
	// epoch 0.
	if got := f.claimDelivery(feA, ownerA, base, 10); len(got.Work) != 0 {
		f.Errorf("unfenced claim after the fenced ones = %q", workIDs(got.Work))
	}
	f.accept(base, newMsg("unfenced"))
	got := f.claimDelivery(feA, ownerA, base, 10)
	if len(got.Work) != 1 || got.Work[0].LeaseEpoch != 0 {
		f.Errorf("unfenced claim = %+v, want one row with lease epoch 0", got.Work)
	}
}

func fencedClaimRefused(f *fixture) {
	ids := []string{idIn("a", tr(0, quarter-1)), idIn("b", tr(quarter, 3*quarter-1)), idIn("c", tr(3*quarter, top))}
	for _, id := range ids {
		f.accept(base, newMsg(id))
	}
	f.accept(base, msgFor("fwd", persistence.WorkForward, peerP))

	f.wantStale("nothing published", fenced(persistence.WorkDelivery, feA, ownerA, base, 1, tr(0, quarter-1)))
	f.publish(0, layout(1))
	f.wantStale("epoch ahead of the ring", fenced(persistence.WorkDelivery, feA, ownerB, base, 2, tr(quarter, 3*quarter-1)))
	f.wantStale("a range across two owners", fenced(persistence.WorkDelivery, feA, ownerB, base, 1, tr(quarter-1, quarter)))
	f.wantStale("one owned range and one not", fenced(persistence.WorkDelivery, feA, ownerB, base, 1, tr(quarter, quarter), tr(0, 5)))
	f.wantStale("the range of another service", fenced(persistence.WorkDelivery, feA, ownerA, base, 1, wholeRing))
	f.wantStale("no forward range", fenced(persistence.WorkForward, peerP, ownerB, base, 1, tr(quarter, 3*quarter-1)))
	f.wantStale("status work is the forward service's", fenced(persistence.WorkStatus, peerP, ownerB, base, 1, tr(quarter, quarter)))
	f.wantStale("no ranges under a stale epoch", fenced(persistence.WorkDelivery, feA, ownerA, base, 2))
	f.publish(1, layout(2))
	f.wantStale("an epoch that passed", fenced(persistence.WorkDelivery, feA, ownerB, base, 1, tr(quarter, 3*quarter-1)))

	// No ranges: valid, and nothing to claim or wait for.
	if c := f.claim(fenced(persistence.WorkDelivery, feA, ownerA, base, 2)); len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("fenced claim without ranges = %q, NextDue %v", workIDs(c.Work), c.NextDue)
	}
	// Epoch 0 is no epoch.
	if _, err := f.store.ClaimWork(f.ctx, fenced(persistence.WorkDelivery, feA, ownerA, base, 0)); err == nil || errors.Is(err, persistence.ErrStaleEpoch) {
		f.Errorf("fenced claim under epoch 0 = %v, want a validation error", err)
	}
	// Status work is worked by the forward service's owner.
	if c := f.claim(fenced(persistence.WorkStatus, peerP, ownerA, base, 2, wholeRing)); len(c.Work) != 0 {
		f.Errorf("status claim = %q", workIDs(c.Work))
	}

	// The refused claims took nothing.
	f.wantIDSet("unfenced claim after the refusals", workIDs(f.claimDelivery(feA, ownerA, base, 10).Work), ids...)
	f.wantIDs("forward claim after the refusals", workIDs(f.claim(fenced(persistence.WorkForward, peerP, ownerA, base, 2, wholeRing)).Work), "fwd")
}

func fencedClaimNextDue(f *fixture) {
	f.publish(0, layout(1))
	b := idsIn("b", tr(quarter, 3*quarter-1), 2)
	a, c := idIn("a", tr(0, quarter-1)), idIn("c", tr(3*quarter, top))
	f.accept(base, msgDue(b[0], base), msgDue(b[1], at(secs(20))), msgDue(c, at(secs(5))), msgDue(a, at(secs(1))))
	inB, inC := tr(quarter, 3*quarter-1), tr(3*quarter, top)

	req := fenced(persistence.WorkDelivery, feA, ownerB, base, 1, inB)
	req.Limit = 1
	got := f.claim(req)
	f.wantIDs("B's claim", workIDs(got.Work), b[0])
	f.wantTime("B's NextDue (its next row, not C's or A's)", got.NextDue, at(secs(20)))

	got = f.claim(fenced(persistence.WorkDelivery, feA, ownerC, base, 1, inC))
	f.wantIDs("C's early claim", workIDs(got.Work))
	f.wantTime("C's NextDue", got.NextDue, at(secs(5)))

	got = f.claim(fenced(persistence.WorkDelivery, feA, ownerB, at(secs(20)), 1, inB))
	f.wantIDs("B's second claim", workIDs(got.Work), b[1])
	f.wantTime("B's NextDue: its first lease's end", got.NextDue, at(lease))

	got = f.claim(fenced(persistence.WorkDelivery, feA, ownerC, at(secs(30)), 1, inC))
	f.wantIDs("C's claim", workIDs(got.Work), c)
	if !got.NextDue.IsZero() {
		f.Errorf("C's NextDue = %v, want zero (A's row is not C's)", got.NextDue)
	}
}

func fencedOutcomes(f *fixture) {
	f.publish(0, alone(1, ownerA))
	ids := []string{"fo-1", "fo-2", "fo-3", "fo-4"}
	for _, id := range ids {
		f.accept(base, newMsg(id))
	}
	req := fenced(persistence.WorkDelivery, feA, ownerA, base, 1, wholeRing)
	req.Lease = time.Minute
	f.wantIDSet("A's claim", workIDs(f.claim(req).Work), ids...)

	// While leased to A under 1.
	f.completeOne(at(secs(1)), fencedOutcome("fo-1", persistence.ResultDelivered, 1, ownerA), persistence.Applied)
	f.wantState("fo-1", messages.StateDelivered)
	// The lease ran out, but nobody claimed the row since: still A's.
	f.completeOne(at(2*time.Minute), fencedOutcome("fo-3", persistence.ResultFailed, 1, ownerA), persistence.Applied)
	f.wantState("fo-3", messages.StateFailed)

	// B takes the ring and the lapsed rows.
	f.publish(1, alone(2, ownerB))
	f.wantIDSet("B's claim", workIDs(f.claim(fenced(persistence.WorkDelivery, feA, ownerB, at(2*time.Minute), 2, wholeRing)).Work), "fo-2", "fo-4")

	// A's late outcome changes nothing; B's, in the same batch, applies
	// (and a later item sees it recorded).
	histLen := f.historyLen("fo-2")
	f.completeAll(at(3*time.Minute), []persistence.Completion{persistence.StaleEpoch, persistence.Applied, persistence.AlreadyRecorded},
		fencedOutcome("fo-2", persistence.ResultFailed, 1, ownerA),
		fencedOutcome("fo-4", persistence.ResultDelivered, 2, ownerB),
		fencedOutcome("fo-4", persistence.ResultDelivered, 2, ownerA))
	m := f.get("fo-2")
	if m.State != messages.StatePending || m.Attempts != 2 || len(m.History) != histLen {
		f.Errorf("fo-2 after the stale outcome: state %s attempts %d history %d", m.State, m.Attempts, len(m.History))
	}
	f.noLedger("fo-2", feA)
	f.wantState("fo-4", messages.StateDelivered)
	// The row is still B's: A's stale outcome did not unlease it.
	if got := f.claimDelivery(feA, ownerC, at(4*time.Minute), 10); len(got.Work) != 0 {
		f.Errorf("claim after the stale outcome = %q, want nothing (B's lease stands)", workIDs(got.Work))
	}

	// An unfenced outcome (a pull frontend's ack) applies whoever holds it.
	f.completeOne(at(5*time.Minute), persistence.Outcome{MessageID: "fo-2", Result: persistence.ResultDelivered, Detail: "acked"}, persistence.Applied)
	f.wantState("fo-2", messages.StateDelivered)
	f.wantOutbox(0)
}

func fencedOutcomeNewerEpochSameOwner(f *fixture) {
	f.publish(0, alone(1, ownerA))
	f.accept(base, newMsg("x"), newMsg("y"))
	req := fenced(persistence.WorkDelivery, feA, ownerA, base, 1, wholeRing)
	req.Lease = time.Minute
	f.wantIDSet("claim under 1", workIDs(f.claim(req).Work), "x", "y")

	f.publish(1, alone(2, ownerA))
	req = fenced(persistence.WorkDelivery, feA, ownerA, at(2*time.Minute), 2, wholeRing)
	got := f.claim(req)
	f.wantIDSet("claim under 2", workIDs(got.Work), "x", "y")
	for _, w := range got.Work {
		if w.LeaseEpoch != 2 {
			f.Errorf("%s: lease epoch %d, want 2", w.MessageID, w.LeaseEpoch)
		}
	}
	f.completeAll(at(3*time.Minute), []persistence.Completion{persistence.StaleEpoch, persistence.Applied},
		fencedOutcome("x", persistence.ResultDelivered, 1, ownerA),
		fencedOutcome("y", persistence.ResultRetry, 2, ownerA))
	f.wantState("x", messages.StatePending)
	f.wantState("y", messages.StateRetry)
	// The retry unleased y: no claim stands behind a second outcome.
	f.completeAll(at(3*time.Minute), []persistence.Completion{persistence.Applied, persistence.StaleEpoch},
		fencedOutcome("x", persistence.ResultDelivered, 2, ownerA),
		fencedOutcome("y", persistence.ResultDelivered, 2, ownerA))
	f.wantState("x", messages.StateDelivered)
	f.wantState("y", messages.StateRetry)
}

// epochZeroOutcomeRefusedOverAnotherClaim: work leased under epoch 0 (handed
// over by the intake, or claimed by id for the bus) whose lease ran out is
// claimed by the ring's owner under its epoch; the first holder's late
// verdict, naming its owner and epoch 0, changes nothing (StaleEpoch), and
// the new claim's verdict applies. A verdict under its own epoch-0 lease
// (a single instance's claims) applies, its lease run out or not.
func epochZeroOutcomeRefusedOverAnotherClaim(f *fixture) {
	f.publish(0, alone(1, ownerB))
	handed := newMsg("ez-handed")
	handed.Lease = &persistence.Lease{Owner: ownerA, Until: at(10 * time.Second)}
	own := newMsg("ez-own")
	own.Lease = &persistence.Lease{Owner: ownerA, Until: at(10 * time.Second)}
	res := f.accept(base, handed, own, newMsg("ez-named"))
	for _, r := range res[:2] {
		if r.Work == nil || r.Work.LeaseOwner != ownerA || r.Work.LeaseEpoch != 0 {
			f.Fatalf("accepted work = %+v, want a row leased to %s under epoch 0", r.Work, ownerA)
		}
	}
	named := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA,
		Limit: 1, Now: base, Lease: 10 * time.Second, IDs: []string{"ez-named"}})
	f.wantIDSet("A's claim by id", workIDs(named.Work), "ez-named")
	// A's own lease, run out, nobody claimed since: A's verdict stands.
	f.completeOne(at(11*time.Second), fencedOutcome("ez-own", persistence.ResultDelivered, 0, ownerA), persistence.Applied)

	// A paused past its leases; B, the ring's owner, claims the rows.
	f.wantIDSet("B's claim", workIDs(f.claim(fenced(persistence.WorkDelivery, feA, ownerB, at(11*time.Second), 1, wholeRing)).Work),
		"ez-handed", "ez-named")
	// A resumes with its attempts' verdicts, as its dispatcher fences
	// them: its owner and the work's lease epoch, 0.
	late := func(id string, r persistence.Result) persistence.Outcome {
		o := fencedOutcome(id, r, 0, ownerA)
		o.Attempt = 1
		return o
	}
	for _, o := range []persistence.Outcome{late("ez-handed", persistence.ResultRetry), late("ez-named", persistence.ResultFailed)} {
		if got := f.complete(at(12*time.Second), o); got[0] != persistence.StaleEpoch {
			f.Errorf("A's late %s of %s (epoch 0) over B's claim under epoch 1 = %s, want %s", o.Result, o.MessageID, got[0], persistence.StaleEpoch)
		}
	}
	// B's claims still stand: nothing claims the rows again, and B's
	// verdicts apply.
	if c := f.claimDelivery(feA, ownerA, at(13*time.Second), 10); len(c.Work) != 0 {
		f.Errorf("claim after A's late verdicts took %v, want nothing (leased to B)", workIDs(c.Work))
	}
	f.completeAll(at(14*time.Second), []persistence.Completion{persistence.Applied, persistence.Applied},
		fencedOutcome("ez-handed", persistence.ResultDelivered, 1, ownerB),
		fencedOutcome("ez-named", persistence.ResultDelivered, 1, ownerB))
	for _, id := range []string{"ez-handed", "ez-named", "ez-own"} {
		f.wantState(id, messages.StateDelivered)
	}
}

func fencedOutcomePrecedence(f *fixture) {
	f.publish(0, alone(1, ownerA))
	f.accept(base, newMsg("done"), newMsg("open"))
	f.wantIDSet("claim", workIDs(f.claim(fenced(persistence.WorkDelivery, feA, ownerA, base, 1, wholeRing)).Work), "done", "open")
	f.deliver(at(secs(1)), "done")

	fwd := fencedOutcome("open", persistence.ResultDelivered, 1, ownerA)
	fwd.Kind, fwd.Target = persistence.WorkForward, peerP
	f.completeAll(at(secs(2)),
		[]persistence.Completion{persistence.AlreadyRecorded, persistence.NoWork, persistence.NoWork, persistence.StaleEpoch},
		fencedOutcome("done", persistence.ResultFailed, 9, ownerB), // recorded: the ledger answers first
		fencedOutcome("missing", persistence.ResultDelivered, 9, ownerB),
		fwd, // no forward row
		fencedOutcome("open", persistence.ResultDelivered, 9, ownerA))
	f.wantState("open", messages.StatePending)
}

// claimsRacePublish races fenced claims under epoch e against the publish
// of e+1, round after round. A claim either commits before the publish
// does or fails with ErrStaleEpoch: right after PublishRing returns, the
// new owner's claim gets every row (none is held by a late claim under e),
// and no claim that starts after it returns rows. Every lease is a
// microsecond long and every call's Now is later than the last, so each
// claim may take any row that is not locked at that moment.
func claimsRacePublish(f *fixture) {
	const (
		rows     = 40
		claimers = 4
		rounds   = 4
	)
	ctx, s := f.ctx, f.store
	batch := make([]persistence.NewMessage, rows)
	for i := range batch {
		batch[i] = newMsg(fmt.Sprintf("race-%02d", i))
	}
	f.accept(base, batch...)
	ownerOf := func(e uint64) string { return fmt.Sprintf("ring-owner-%d", e) }
	var clock atomic.Int64
	tick := func() time.Time { return base.Add(time.Duration(clock.Add(2)) * time.Microsecond) }
	claim := func(e uint64, limit int) (persistence.Claim, error) {
		return s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerOf(e),
			Limit: limit, Now: tick(), Lease: time.Microsecond, Ring: &persistence.RingClaim{Epoch: e, Ranges: []persistence.TokenRange{wholeRing}}})
	}
	f.publish(0, alone(1, ownerOf(1)))

	for e := uint64(1); e <= rounds; e++ {
		var (
			publishing, published atomic.Bool
			claims                atomic.Int64
			wg                    sync.WaitGroup
		)
		for range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					after := published.Load()
					c, err := claim(e, 3)
					if errors.Is(err, persistence.ErrStaleEpoch) {
						if !publishing.Load() {
							f.Errorf("epoch %d: claim refused before the next was published: %v", e, err)
						}
						return
					}
					if err != nil {
						f.Errorf("epoch %d: ClaimWork: %v", e, err)
						return
					}
					if after {
						f.Errorf("epoch %d: a claim that started after epoch %d was published took %q", e, e+1, workIDs(c.Work))
						return
					}
					for _, w := range c.Work {
						if w.LeaseEpoch != e {
							f.Errorf("epoch %d: %s leased under %d", e, w.MessageID, w.LeaseEpoch)
						}
					}
					claims.Add(1)
				}
			}()
		}
		// Publish while the claimers are busy.
		deadline := time.Now().Add(10 * time.Second)
		for claims.Load() < 2*claimers && time.Now().Before(deadline) && !f.Failed() {
			runtime.Gosched()
		}
		publishing.Store(true)
		err := s.PublishRing(ctx, nil, e, alone(e+1, ownerOf(e+1)))
		published.Store(true)
		if err != nil {
			wg.Wait()
			f.Fatalf("PublishRing(%d): %v", e, err)
		}
		c, err := claim(e+1, 2*rows)
		if err != nil {
			f.Errorf("epoch %d: the new owner's claim: %v", e+1, err)
		} else if len(c.Work) != rows {
			f.Errorf("epoch %d: the new owner claimed %d rows right after the publish, want all %d", e+1, len(c.Work), rows)
		}
		wg.Wait()
		if f.Failed() {
			return
		}
	}
}
