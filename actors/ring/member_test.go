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
	"github.com/switchboard-dev/switchboard/transport"
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
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{Gen: 2}, []string{"StepMaster"}},
			{time.Second, Wake{}, []string{"StepMaster"}},
		}, wantRole: messages.RoleMaster},
		{name: "auto finds the lock taken and follows the published master", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{Gen: 2, Addr: "m:1"}, []string{"call join m:1"}},
			{0, CallDone{Gen: 3, Join: true}, []string{"PingStore"}},
			{0, StorePing{Gen: 4, OK: true}, []string{"call poll m:1"}},
			{time.Second, CallDone{Gen: 5}, []string{"PingStore"}},
		}, wantRole: messages.RoleSlave},
		{name: "nothing starts while an answer is awaited, and only its answer counts", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, Wake{}, nil},
			{0, LeadResult{Gen: 9, Won: true}, nil}, // not the generation asked
			{0, LeadResult{Gen: 1}, []string{"BecameSlave", "ResolveMaster"}},
			{time.Second, Wake{}, nil},
			{time.Second, StorePing{Gen: 2, OK: true}, nil},   // not the answer asked
			{time.Second, LeadResult{Gen: 1, Won: true}, nil}, // answered already
			{time.Second, MasterAddr{Gen: 2, Addr: "m:1"}, []string{"call join m:1"}},
			{time.Second, Wake{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "slave with --ring-master joins it without reading the store", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{Gen: 2, OK: false}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"PingStore"}},
		}, wantRole: messages.RoleSlave},
		{name: "an answer of an older call is dropped", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 7, Kind: transport.Unreachable, Err: failed}, nil},
			{0, Wake{}, nil}, // the call in flight is awaited
		}, wantRole: messages.RoleSlave},
		{name: "slave backs off and gives up after the attempts", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{500 * time.Millisecond, Wake{}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"call join m:1"}},
			{time.Second, CallDone{Gen: 2, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"call join m:1"}},
			{3 * time.Second, CallDone{Gen: 3, Kind: transport.Unreachable, Err: failed}, []string{"give up: Reconnect.MaxAttempts: the ring master is unreachable after 3 attempts"}},
			{4 * time.Second, Wake{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "a success resets the count", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"call join m:1"}},
			{time.Second, CallDone{Gen: 2, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"call join m:1"}},
			{3 * time.Second, CallDone{Gen: 3, Join: true}, []string{"PingStore"}},
			{3 * time.Second, StorePing{Gen: 4, OK: true}, []string{"call poll m:1"}},
			{3 * time.Second, CallDone{Gen: 5, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +4s"}},
		}, wantRole: messages.RoleSlave},
		{name: "an auto slave whose call fails tries the lock and leads", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{Gen: 2, Addr: "m:1"}, []string{"call join m:1"}},
			{0, CallDone{Gen: 3, Kind: transport.Unreachable, Err: failed}, []string{"TryLead"}},
			{0, LeadResult{Gen: 4}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"ResolveMaster"}}, // no --ring-master: read it again
			{time.Second, MasterAddr{Gen: 5}, []string{"TryLead"}},
			{time.Second, LeadResult{Gen: 6, Won: true}, []string{"log INFO", "BecomeMaster"}},
			{time.Second, MasterReady{Gen: 7}, []string{"StepMaster"}},
			{time.Second, CallDone{Gen: 3}, nil}, // a call of the slave it was is of no interest
		}, wantRole: messages.RoleMaster},
		{name: "not the master: follow the address in the store", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.NotMaster, Err: failed}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"ResolveMaster"}},
			{time.Second, MasterAddr{Gen: 2, Addr: "m:2"}, []string{"call join m:2"}},
		}, wantRole: messages.RoleSlave},
		{name: "an unknown member joins again at once", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{Gen: 2, OK: true}, []string{"call poll m:1"}},
			{0, CallDone{Gen: 3, Kind: transport.NotMember, Err: failed}, []string{"call join m:1"}},
		}, wantRole: messages.RoleSlave},
		{name: "a refusal gives up at once", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.Forbidden, Err: errors.New("ring_foreign_node: wrong site")}, []string{"give up: the ring master at m:1 refused this instance: ring_foreign_node"}},
		}, wantRole: messages.RoleSlave},
		{name: "a join the master cannot read gives up at once", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.Refused, Err: errors.New("ring_bad_join: services is empty")}, []string{"give up: the ring master at m:1 refused this instance: ring_bad_join"}},
		}, wantRole: messages.RoleSlave},
		{name: "a busy or conflicting master is tried again", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Kind: transport.Conflict, Err: errors.New("ring_duplicate_instance")}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"call join m:1"}},
			{time.Second, CallDone{Gen: 2, Kind: transport.Busy, Err: errors.New("overloaded")}, []string{"log WARN", "schedule +3s"}},
		}, wantRole: messages.RoleSlave},
		{name: "no master published yet counts as a failure", role: messages.RoleSlave, steps: []step{
			{0, Start{}, []string{"BecameSlave", "ResolveMaster"}},
			{0, MasterAddr{Gen: 1}, []string{"log WARN", "schedule +1s"}},
		}, wantRole: messages.RoleSlave},
		{name: "a stopping master is waited for without counting", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{Gen: 2, OK: true}, []string{"call poll m:1"}},
			{0, CallDone{Gen: 3, Kind: transport.Unavailable, Err: failed}, []string{"log INFO", "log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"PingStore"}},
			{time.Second, StorePing{Gen: 4, OK: true}, []string{"call poll m:1"}},
			{time.Second, CallDone{Gen: 5, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +2s"}},
			{2 * time.Second, Wake{}, []string{"PingStore"}},
			{2 * time.Second, StorePing{Gen: 6, OK: true}, []string{"call poll m:1"}},
			{2 * time.Second, CallDone{Gen: 7, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +3s"}},
			// The grace (a minute) is over: failures count again.
			{time.Minute, Wake{}, []string{"PingStore"}},
			{time.Minute, StorePing{Gen: 8, OK: true}, []string{"call poll m:1"}},
			{time.Minute, CallDone{Gen: 9, Kind: transport.Unreachable, Err: failed}, []string{"log WARN", "schedule +1m1s"}},
		}, wantRole: messages.RoleSlave},
		{name: "role master waits for a held lock, then gives up", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1}, []string{"log WARN", "schedule +1s"}},
			{500 * time.Millisecond, Wake{}, []string{"schedule +1s"}},
			{time.Second, Wake{}, []string{"TryLead"}},
			{time.Second, Wake{}, nil}, // the try is under way
			{time.Second, LeadResult{Gen: 2}, []string{"schedule +3s"}},
			{3 * time.Second, Wake{}, []string{"TryLead"}},
			{3 * time.Second, LeadResult{Gen: 3}, []string{"give up: Reconnect.MaxAttempts: the ring master lock is still held after 3 attempts"}},
		}},
		{name: "role master gets the lock it waited for", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1}, []string{"log WARN", "schedule +1s"}},
			{time.Second, Wake{}, []string{"TryLead"}},
			{time.Second, LeadResult{Gen: 2, Won: true}, []string{"BecomeMaster"}},
			{time.Second, MasterReady{Gen: 3}, []string{"StepMaster"}},
		}, wantRole: messages.RoleMaster},
		{name: "an auto master that loses its lock goes on as a slave", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{Gen: 2}, []string{"StepMaster"}},
			{time.Second, LeadLost{}, []string{"log WARN", "StandDown", "BecameSlave", "ResolveMaster"}},
		}, wantRole: messages.RoleSlave},
		{name: "an auto instance that loses the lock while reading the stored assignment goes on as a slave", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{time.Second, LeadLost{}, []string{"log WARN", "StandDown", "BecameSlave", "ResolveMaster"}},
			{time.Second, MasterReady{Gen: 2}, nil}, // too late: it leads no more
			{time.Second, MasterAddr{Gen: 3, Addr: "m:1"}, []string{"call join m:1"}},
		}, wantRole: messages.RoleSlave},
		{name: "an explicit master that loses its lock stops", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{Gen: 2}, []string{"StepMaster"}},
			{time.Second, LeadLost{}, []string{"give up: this instance is no longer the ring master"}},
			{time.Second, LeadLost{}, nil},
		}, wantRole: messages.RoleMaster},
		{name: "an explicit master that loses its lock before leading stops", role: messages.RoleMaster, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{0, LeadLost{}, []string{"give up: this instance is no longer the ring master"}},
			{0, MasterReady{Gen: 2}, nil},
		}},
		{name: "the stored assignment unreadable: cannot lead", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
			{0, MasterReady{Gen: 2, Err: failed}, []string{"give up: reading the stored ring assignment"}},
		}},
		{name: "a joined slave says goodbye when it stops", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, CallDone{Gen: 1, Join: true}, []string{"PingStore"}},
			{0, StorePing{Gen: 2, OK: true}, []string{"call poll m:1"}},
			{time.Second, Stop{}, []string{"leave m:1"}},
			{time.Second, CallDone{Gen: 3}, nil},
			{2 * time.Second, Wake{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "a slave that never joined leaves nobody", role: messages.RoleSlave, addr: "m:1", steps: []step{
			{0, Start{}, []string{"BecameSlave", "call join m:1"}},
			{0, Stop{}, nil},
		}, wantRole: messages.RoleSlave},
		{name: "a stop drops the answer under way", role: messages.RoleAuto, steps: []step{
			{0, Start{}, []string{"TryLead"}},
			{0, Stop{}, nil},
			{0, LeadResult{Gen: 1, Won: true}, nil},
		}},
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

// TestMemberLoneAutoMasterWaitsForItsLock: an auto master that cannot call
// another master (no Transport) and loses its lock does not stop: it
// stands down and tries the lock again, leading again when it gets it; a
// lock another session keeps makes it give up after the reconnect policy.
func TestMemberLoneAutoMasterWaitsForItsLock(t *testing.T) {
	lone := func() *Member {
		return NewMember(MemberConfig{Role: messages.RoleAuto, Elects: true, Reconnect: testReconnect,
			MasterStopGrace: time.Minute}, rand.New(rand.NewPCG(1, 2)))
	}
	lead := []step{
		{0, Start{}, []string{"TryLead"}},
		{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
		{0, MasterReady{Gen: 2}, []string{"StepMaster"}},
		{time.Second, LeadLost{}, []string{"log WARN", "StandDown", "TryLead"}},
	}
	m := lone()
	runSteps(t, m, append(lead,
		step{time.Second, LeadLost{}, nil}, // not the master now
		step{time.Second, LeadResult{Gen: 3, Won: true}, []string{"BecomeMaster"}},
		step{time.Second, MasterReady{Gen: 4}, []string{"StepMaster"}},
	))
	if m.Role() != messages.RoleMaster || m.Stopping() {
		t.Fatalf("after taking the lock again: role %q, stopping %v; want the master", m.Role(), m.Stopping())
	}

	m = lone()
	runSteps(t, m, append(lead,
		step{time.Second, LeadResult{Gen: 3}, []string{"schedule +2s"}},
		step{2 * time.Second, Wake{}, []string{"TryLead"}},
		step{2 * time.Second, LeadResult{Gen: 4}, []string{"schedule +4s"}},
		step{4 * time.Second, Wake{}, []string{"TryLead"}},
		step{4 * time.Second, LeadResult{Gen: 5}, []string{"give up: Reconnect.MaxAttempts: the ring master lock is still held after 3 attempts"}},
	))
	if !m.Stopping() {
		t.Fatal("a lone instance whose lock another session keeps did not give up")
	}
}

// TestMemberLockTriesTheStoreRefusedSayWhy: lock tries that failed
// because the store did not answer (Postgres down) give up naming that
// failure, not another session holding the lock, which would send an
// operator after a second master that does not exist.
func TestMemberLockTriesTheStoreRefusedSayWhy(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	m := NewMember(MemberConfig{Role: messages.RoleAuto, Elects: true, Reconnect: testReconnect,
		MasterStopGrace: time.Minute}, rand.New(rand.NewPCG(1, 2)))
	runSteps(t, m, []step{
		{0, Start{}, []string{"TryLead"}},
		{0, LeadResult{Gen: 1, Won: true}, []string{"BecomeMaster"}},
		{0, MasterReady{Gen: 2}, []string{"StepMaster"}},
		{time.Second, LeadLost{}, []string{"log WARN", "StandDown", "TryLead"}},
		{time.Second, LeadResult{Gen: 3, Err: down}, []string{"schedule +2s"}},
		{2 * time.Second, Wake{}, []string{"TryLead"}},
		{2 * time.Second, LeadResult{Gen: 4, Err: down}, []string{"schedule +4s"}},
		{4 * time.Second, Wake{}, []string{"TryLead"}},
		{4 * time.Second, LeadResult{Gen: 5, Err: down}, []string{
			"give up: Reconnect.MaxAttempts: the ring master lock could not be taken after 3 attempts: dial tcp 127.0.0.1:5432: connect: connection refused"}},
	})
}

// TestMemberWithoutElectionOrTransport: the embedded store (no election)
// makes every role but slave the master; a slave without a transport
// cannot reach its master and says so.
// TestMemberRoleOfPartialServices: under role auto with an elector, only
// an instance that runs every service stands for master; one that lacks
// a service follows as a slave. Other roles, and auto without an elector
// (a single instance), are kept.
func TestMemberRoleOfPartialServices(t *testing.T) {
	all := messages.AllServices
	delivery := []string{messages.ServiceDelivery}
	forward := []string{messages.ServiceForward}
	for _, tc := range []struct {
		name        string
		role        string
		elects      bool
		services    []string
		wantRole    string
		wantMissing []string
	}{
		{"auto, every service", messages.RoleAuto, true, all, messages.RoleAuto, nil},
		{"auto, every service in another order", messages.RoleAuto, true,
			[]string{messages.ServiceForward, messages.ServiceDelivery}, messages.RoleAuto, nil},
		{"auto without forward", messages.RoleAuto, true, delivery, messages.RoleSlave, forward},
		{"auto without delivery", messages.RoleAuto, true, forward, messages.RoleSlave, delivery},
		{"auto without an elector", messages.RoleAuto, false, delivery, messages.RoleAuto, nil},
		{"master without forward", messages.RoleMaster, true, delivery, messages.RoleMaster, nil},
		{"slave without forward", messages.RoleSlave, true, delivery, messages.RoleSlave, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, missing := memberRole(tc.role, tc.elects, tc.services)
			if role != tc.wantRole || !slices.Equal(missing, tc.wantMissing) {
				t.Fatalf("memberRole(%q, %v, %v) = %q, %v; want %q, %v",
					tc.role, tc.elects, tc.services, role, missing, tc.wantRole, tc.wantMissing)
			}
		})
	}
}

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
	m.Step(now, CallDone{Gen: 1, Kind: transport.Unavailable, Err: errors.New("503")})
	gen := uint64(1)
	for now.Sub(t0) < time.Minute-5*time.Second {
		now = now.Add(5 * time.Second)
		for _, e := range m.Step(now, Wake{}) {
			if c, ok := e.(CallMaster); ok {
				gen = c.Gen
			}
		}
		for _, e := range m.Step(now, CallDone{Gen: gen, Kind: transport.Unreachable, Err: errors.New("refused")}) {
			if g, ok := e.(GiveUp); ok {
				t.Fatalf("gave up %v after the master said it stops: %v", now.Sub(t0), g.Err)
			}
		}
	}
	if m.Failures() != 0 {
		t.Fatalf("failures %d inside the grace, want 0", m.Failures())
	}
}

// TestMemberDeciding: an instance is deciding whether it leads while its
// lock try or its reading of the stored assignment is under way, and not
// once it is master, a slave, or stopped.
func TestMemberDeciding(t *testing.T) {
	m := newTestMember(messages.RoleAuto, "")
	for i, s := range []struct {
		ev   Event
		want bool
	}{
		{Start{}, true},
		{LeadResult{Gen: 1, Won: true}, true},
		{MasterReady{Gen: 2}, false},
		{LeadLost{}, false}, // a slave now, resolving its master
	} {
		m.Step(t0, s.ev)
		if got := m.Deciding(); got != s.want {
			t.Fatalf("after step %d (%T): deciding %v, want %v", i, s.ev, got, s.want)
		}
	}
	m = newTestMember(messages.RoleAuto, "")
	m.Step(t0, Start{})
	m.Step(t0, Stop{})
	if m.Deciding() || m.Awaits(1) {
		t.Fatal("a stopped member still decides, or awaits its lock try")
	}
}
