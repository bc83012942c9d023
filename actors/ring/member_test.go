package ring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

var testReconnect = Reconnect{MaxAttempts: 3, Min: time.Second, Max: 4 * time.Second, Jitter: 0}

func newTestMember(role, masterAddr string) *Member {
	return NewMember(MemberConfig{Role: role, MasterAddr: masterAddr, Elects: true, CanCall: true,
		Reconnect: testReconnect, MasterStopGrace: time.Minute}, rand.New(rand.NewPCG(1, 2)))
}

// kinds names effects by type, with the fields that matter to a reader of
// the table: the call's kind and address, a schedule's offset from t0.
func kinds(effects []Effect) []string {
	var out []string
	for _, e := range effects {
		switch e := e.(type) {
		case CallMaster:
			what := "poll"
			if e.Join {
				what = "join"
			}
			out = append(out, fmt.Sprintf("call %s %s", what, e.Addr))
		case Schedule:
			out = append(out, fmt.Sprintf("schedule +%v", e.At.Sub(t0)))
		case GiveUp:
			out = append(out, "give up: "+e.Err.Error())
		case Log:
			out = append(out, "log "+e.Level.String())
		case LeaveMaster:
			out = append(out, "leave "+e.Addr)
		default:
			out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", e), "ring."))
		}
	}
	return out
}

// step is one event at t0+at and the effects expected of it.
type step struct {
	at   time.Duration
	ev   Event
	want []string
}

func runSteps(t *testing.T, m *Member, steps []step) {
	t.Helper()
	for i, s := range steps {
		got := kinds(m.Step(t0.Add(s.at), s.ev))
		if len(got) != len(s.want) {
			t.Fatalf("step %d (%T at +%v): effects\n  %q\nwant\n  %q", i, s.ev, s.at, got, s.want)
		}
		for j := range got {
			if !strings.HasPrefix(got[j], s.want[j]) {
				t.Fatalf("step %d (%T at +%v): effects\n  %q\nwant\n  %q", i, s.ev, s.at, got, s.want)
			}
		}
	}
}

func TestMemberStepTable(t *testing.T) {
	failed := errors.New("connection refused")
	cases := []struct {
		name       string
		role, addr string
		steps      []step
		wantRole   string
	}{
		{name: "auto takes the free lock", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{}, []string{"StepMaster"}},
			{time.Second, Wake{}, []string{"StepMaster"}},
		}, wantRole: messages.RoleMaster},
		{name: "auto finds the lock taken and follows the published master", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{Addr: "m:1"}, []string{"call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{OK: true}, []string{"call poll m:1"}},
			{time.Second, CallDone{Gen: 2}, []string{"PingStore"}},
		}, wantRole: messages.RoleSlave},
		{name: "slave with --ring-master joins it without reading the store", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{OK: false}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"PingStore"}},
		}, wantRole: messages.RoleSlave},
		{name: "an answer of an older call is dropped", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 7, Kind: CallFailed, Err: failed}, nil},
			{0, Wake{}, nil}, // the call in flight is awaited
		}, wantRole: messages.RoleSlave},
		{name: "slave backs off and gives up after the attempts", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{500 * time.Millisecond, Wake{}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"call join m:1"}},
			{time.Second, CallDone{Gen: 2, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"call join m:1"}},
			{3 * time.Second, CallDone{Gen: 3, Kind: CallFailed, Err: failed}, []string{"give up: Reconnect.MaxAttempts: the ring master is unreachable after 3 attempts"}},
			{4 * time.Second, Wake{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "a success resets the count", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"call join m:1"}},
			{time.Second, CallDone{Gen: 2, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"call join m:1"}},
			{3 * time.Second, CallDone{Gen: 3, Join: true}, []string{"PingStore"}},
			{3 * time.Second, StorePing{OK: true}, []string{"call poll m:1"}},
			{3 * time.Second, CallDone{Gen: 4, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +4s"}},
		}, wantRole: messages.RoleSlave},
		{name: "an auto slave whose call fails tries the lock and leads", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{Addr: "m:1"}, []string{"call join m:1"}},
			{0, CallDone{Gen: 1, Kind: CallFailed, Err: failed}, []string{"TryLead"}},
			{0, LeadResult{}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"ResolveMaster"}}, // no --ring-master: read it again
			{time.Second, MasterAddr{}, []string{"TryLead"}},
			{time.Second, LeadResult{Won: true}, []string{"log INFO", "BecomeMaster"}},
			{time.Second, MasterReady{}, []string{"StepMaster"}},
			{time.Second, CallDone{Gen: 2}, nil}, // a call of the slave it was is of no interest
		}, wantRole: messages.RoleMaster},
		{name: "not the master: follow the address in the store", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: CallNotMaster, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"ResolveMaster"}},
			{time.Second, MasterAddr{Addr: "m:2"}, []string{"call join m:2"}},
		}, wantRole: messages.RoleSlave},
		{name: "an unknown member joins again at once", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{OK: true}, []string{"call poll m:1"}},
			{0, CallDone{Gen: 2, Kind: CallUnknownMember, Err: failed}, []string{"call join m:1"}},
		}, wantRole: messages.RoleSlave},
		{name: "a refusal gives up at once", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: CallRefused, Err: errors.New("ring_foreign_node: wrong site")}, []string{"give up: the ring master at m:1 refused this instance: ring_foreign_node"}},
		}, wantRole: messages.RoleSlave},
		{name: "no master published yet counts as a failure", role: messages.RoleSlave, steps: []step{
			{0, Start{}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{}, []string{"log WARN", "schedule +1s"}},
		}, wantRole: messages.RoleSlave},
		{name: "a stopping master is waited for without counting", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{OK: true}, []string{"call poll m:1"}},
			{0, CallDone{Gen: 2, Kind: CallStopping, Err: failed}, []string{"log INFO", "log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"PingStore"}},
			{time.Second, StorePing{OK: true}, []string{"call poll m:1"}},
			{time.Second, CallDone{Gen: 3, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +2s"}},
			{2 * time.Second, Wake{}, []string{"PingStore"}},
			{2 * time.Second, StorePing{OK: true}, []string{"call poll m:1"}},
			{2 * time.Second, CallDone{Gen: 4, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +3s"}},
			// The grace (a minute) is over: failures count again.
			{time.Minute, Wake{}, []string{"PingStore"}},
			{time.Minute, StorePing{OK: true}, []string{"call poll m:1"}},
			{time.Minute, CallDone{Gen: 5, Kind: CallFailed, Err: failed}, []string{"log WARN", "schedule +1m1s"}},
		}, wantRole: messages.RoleSlave},
		{name: "role master waits for a held lock, then gives up", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{}, []string{"log WARN", "schedule +1s"}},
			{500 * time.Millisecond, Wake{}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"TryLead"}},
			{time.Second, LeadResult{}, []string{"schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"TryLead"}},
			{3 * time.Second, LeadResult{}, []string{"give up: Reconnect.MaxAttempts: the ring master lock is still held after 3 attempts"}},
		}},
		{name: "role master gets the lock it waited for", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"TryLead"}},
			{time.Second, LeadResult{Won: true}, []string{"BecomeMaster"}},
			{time.Second, MasterReady{}, []string{"StepMaster"}},
		}, wantRole: messages.RoleMaster},
		{name: "an auto master that loses its lock goes on as a slave", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{}, []string{"StepMaster"}},
			{time.Second, LeadLost{}, []string{"log WARN", "StandDown", "BecameSlave", "ResolveMaster"}},
		}, wantRole: messages.RoleSlave},
		{name: "an explicit master that loses its lock stops", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{}, []string{"StepMaster"}},
			{time.Second, LeadLost{}, []string{"give up: this instance is no longer the ring master"}},
			{time.Second, LeadLost{}, nil},
		}, wantRole: messages.RoleMaster},
		{name: "the stored assignment unreadable: cannot lead", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{Err: failed}, []string{"give up: reading the stored ring assignment"}},
		}},
		{name: "a joined slave says goodbye when it stops", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{OK: true}, []string{"call poll m:1"}},
			{time.Second, Stop{}, []string{"leave m:1"}},
			{time.Second, CallDone{Gen: 2}, nil},
			{2 * time.Second, Wake{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "a slave that never joined leaves nobody", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, Stop{}, nil},
		}, wantRole: messages.RoleSlave},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMember(tc.role, tc.addr)
			runSteps(t, m, tc.steps)
			if m.Role() != tc.wantRole {
				t.Fatalf("role %q, want %q", m.Role(), tc.wantRole)
			}
		})
	}
}

// TestMemberWithoutElectionOrTransport: the embedded store (no election)
// makes every role but slave the master; a slave without a transport
// cannot reach its master and says so.
func TestMemberWithoutElectionOrTransport(t *testing.T) {
	m := NewMember(MemberConfig{Role: messages.RoleMaster, Reconnect: testReconnect}, rand.New(rand.NewPCG(1, 2)))
	if got := kinds(m.Step(t0, Start{})); !slices.Equal(got, []string{"BecomeMaster"}) {
		t.Fatalf("master on a store that does not elect: %q", got)
	}
	m = NewMember(MemberConfig{Role: messages.RoleSlave, Elects: true, Reconnect: testReconnect}, rand.New(rand.NewPCG(1, 2)))
	got := kinds(m.Step(t0, Start{}))
	if len(got) != 1 || !strings.Contains(got[0], "no way to reach its master") {
		t.Fatalf("slave without a transport: %q", got)
	}
	if !m.Stopping() {
		t.Fatal("a slave that gave up is not stopping")
	}
}

// TestMemberNeverGivesUpWhileTheMasterStops: however many failures follow
// a master's "stopping" inside the grace, the slave keeps trying; past it
// the attempts count as before.
func TestMemberNeverGivesUpWhileTheMasterStops(t *testing.T) {
	m := newTestMember(messages.RoleSlave, "m:1")
	now := t0
	m.Step(now, Start{})
	m.Step(now, CallDone{Gen: 1, Kind: CallStopping, Err: errors.New("503")})
	gen := uint64(1)
	for now.Sub(t0) < time.Minute-5*time.Second {
		now = now.Add(5 * time.Second)
		for _, e := range m.Step(now, Wake{}) {
			if c, ok := e.(CallMaster); ok {
				gen = c.Gen
			}
		}
		for _, e := range m.Step(now, CallDone{Gen: gen, Kind: CallFailed, Err: errors.New("refused")}) {
			if g, ok := e.(GiveUp); ok {
				t.Fatalf("gave up %v after the master said it stops: %v", now.Sub(t0), g.Err)
			}
		}
	}
	if m.Failures() != 0 {
		t.Fatalf("failures %d inside the grace, want 0", m.Failures())
	}
}
