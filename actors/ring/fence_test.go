package ring

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func half(lo, hi uint64) []messages.TokenRange { return []messages.TokenRange{{Lo: lo, Hi: hi}} }

// assignment: m (the master, every service) owns the low half, s (a
// delivery-only slave) the high half.
func assignment(epoch uint64) messages.RingAssignment {
	return messages.RingAssignment{Epoch: epoch, Master: "m", Members: []messages.RingMember{
		{InstanceID: "m", Services: messages.AllServices, Ranges: half(0, math.MaxUint64/2)},
		{InstanceID: "s", Services: []string{messages.ServiceDelivery}, Ranges: half(math.MaxUint64/2+1, math.MaxUint64)},
	}}
}

func TestSharesApplyAndClaim(t *testing.T) {
	var refused []string
	sh := NewShares(time.Second, func(s string) { refused = append(refused, s) })
	if _, ok := sh.Claim(persistence.WorkDelivery); ok {
		t.Fatal("claims before the first assignment")
	}
	if ch := sh.Apply(assignment(1), "s", []string{messages.ServiceDelivery}); !slices.Equal(ch, []string{messages.ServiceDelivery}) {
		t.Fatalf("changed %v", ch)
	}
	rc, ok := sh.Claim(persistence.WorkDelivery)
	if !ok || rc.Epoch != 1 || !slices.Equal(rc.Ranges, half(math.MaxUint64/2+1, math.MaxUint64)) {
		t.Fatalf("slave's delivery claim %+v %v", rc, ok)
	}
	if _, ok := sh.Claim(persistence.WorkForward); ok {
		t.Fatal("a delivery-only slave claims forward work")
	}
	if ch := sh.Apply(assignment(1), "s", []string{messages.ServiceDelivery}); len(ch) != 0 {
		t.Fatalf("the same assignment changed %v", ch)
	}
	if ch := sh.Apply(assignment(2), "s", []string{messages.ServiceDelivery}); !slices.Equal(ch, []string{messages.ServiceDelivery}) {
		t.Fatalf("a new epoch changed %v", ch)
	}

	// The master works the slave's ranges for the service it lacks.
	m := NewShares(0, nil)
	m.Apply(assignment(2), "m", messages.AllServices)
	if rc, ok := m.Claim(persistence.WorkStatus); !ok || !slices.Equal(rc.Ranges, Whole) {
		t.Fatalf("master's forward claim %+v %v, want the whole ring", rc, ok)
	}
	if rc, _ := m.Claim(persistence.WorkDelivery); !slices.Equal(rc.Ranges, half(0, math.MaxUint64/2)) {
		t.Fatalf("master's delivery claim %+v", rc)
	}
	m.SetMaster(true)
	m.Clear()
	if _, ok := m.Claim(persistence.WorkDelivery); ok || m.Master() {
		t.Fatal("claims (or leads) after Clear")
	}
	if sh.IdlePoll() != time.Second || m.IdlePoll() != 0 {
		t.Fatal("idle poll is not what the node asked for")
	}
	if len(refused) != 0 {
		t.Fatalf("refusals counted: %v", refused)
	}
}

// claimStore answers ClaimWork with err and records the requests.
type claimStore struct {
	persistence.Store
	err  error
	reqs []persistence.ClaimRequest
}

func (s *claimStore) ClaimWork(_ context.Context, r persistence.ClaimRequest) (persistence.Claim, error) {
	s.reqs = append(s.reqs, r)
	return persistence.Claim{}, s.err
}

func TestClaimThroughTheFence(t *testing.T) {
	var refused []string
	sh := NewShares(0, func(s string) { refused = append(refused, s) })
	st := &claimStore{}
	req := persistence.ClaimRequest{Kind: persistence.WorkForward, Target: "p", Owner: "s", Limit: 1, Lease: time.Second}
	if _, ok, err := Claim(context.Background(), st, sh, req); ok || err != nil || len(st.reqs) != 0 {
		t.Fatalf("without partitions: ok %v err %v, %d store calls", ok, err, len(st.reqs))
	}
	sh.Apply(assignment(3), "m", messages.AllServices)
	if _, ok, err := Claim(context.Background(), st, sh, req); !ok || err != nil || st.reqs[0].Ring == nil || st.reqs[0].Ring.Epoch != 3 {
		t.Fatalf("fenced claim: ok %v err %v req %+v", ok, err, st.reqs)
	}
	st.err = persistence.ErrStaleEpoch
	if _, ok, err := Claim(context.Background(), st, sh, req); ok || err != nil || !slices.Equal(refused, []string{messages.ServiceForward}) {
		t.Fatalf("stale: ok %v err %v refused %v", ok, err, refused)
	}
	st.err = errors.New("down")
	if _, _, err := Claim(context.Background(), st, sh, req); err == nil {
		t.Fatal("a store failure is not reported")
	}
	if _, ok, err := Claim(context.Background(), &claimStore{}, nil, req); !ok || err != nil {
		t.Fatalf("unfenced: %v %v", ok, err)
	}
}

// writeStore answers Write with the claims it is given, each refused when
// its epoch is refuse, and records what it was given.
type writeStore struct {
	persistence.Store
	refuse uint64
	got    []persistence.Write
}

func (s *writeStore) Write(_ context.Context, _ time.Time, w persistence.Write) (persistence.Written, error) {
	s.got = append(s.got, w)
	var out persistence.Written
	for _, c := range w.Claims {
		out.Claims = append(out.Claims, persistence.Claim{Refused: c.Ring != nil && c.Ring.Epoch == s.refuse})
	}
	return out, nil
}

// TestWriteFencesItsClaims: a store round's claims are fenced when asked
// (an unowned service's claim is not made), unfenced otherwise, and each
// result lands at its request's index; a refusal is counted; a round left
// empty is not written.
func TestWriteFencesItsClaims(t *testing.T) {
	var refused []string
	sh := NewShares(0, func(s string) { refused = append(refused, s) })
	sh.Apply(assignment(3), "s", []string{messages.ServiceDelivery}) // owns delivery, not forward
	named := persistence.ClaimRequest{Kind: persistence.WorkDelivery, IDs: []string{"m1"}}
	w := persistence.Write{Claims: []persistence.ClaimRequest{
		{Kind: persistence.WorkForward}, {Kind: persistence.WorkDelivery}, named,
	}}
	notNamed := func(r persistence.ClaimRequest) bool { return r.IDs == nil }
	st := &writeStore{}
	_, claims, err := Write(context.Background(), st, sh, time.Time{}, w, notNamed)
	if err != nil || len(st.got) != 1 {
		t.Fatalf("err %v, %d writes", err, len(st.got))
	}
	sent := st.got[0].Claims
	if len(sent) != 2 || sent[0].Ring == nil || sent[0].Ring.Epoch != 3 || sent[1].Ring != nil {
		t.Fatalf("claims written %+v, want the fenced delivery claim and the unfenced named one", sent)
	}
	if claims[0] != nil || claims[1] == nil || claims[2] == nil || len(claims) != 3 {
		t.Fatalf("claims %v, want none for the unowned forward claim", claims)
	}
	if w.Claims[1].Ring != nil {
		t.Fatal("the caller's request was changed")
	}
	st.refuse = 3
	if _, claims, _ = Write(context.Background(), st, sh, time.Time{}, w, notNamed); claims[1] != nil || claims[2] == nil ||
		!slices.Equal(refused, []string{messages.ServiceDelivery}) {
		t.Fatalf("after a refusal: claims %v, refused %v", claims, refused)
	}
	st.got = nil
	if _, claims, err = Write(context.Background(), st, sh, time.Time{}, persistence.Write{Claims: w.Claims[:1]}, nil); err != nil ||
		len(st.got) != 0 || claims[0] != nil {
		t.Fatalf("a round left empty: err %v, %d writes, claims %v", err, len(st.got), claims)
	}
}
