package ring

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

var both = []string{messages.ServiceDelivery, messages.ServiceForward}

func sampleAssignment() messages.RingAssignment {
	return messages.RingAssignment{
		Epoch: 4, Master: "m", MasterAddress: "m:1", Cluster: "c", Region: "r",
		Members: []messages.RingMember{
			{InstanceID: "a", Address: "a:1", Services: []string{messages.ServiceDelivery}, Ranges: rs{tr(0, 99)}},
			{InstanceID: "b", Address: "b:1", Services: both, Ranges: rs{tr(100, 199)}},
			{InstanceID: "m", Address: "m:1", Services: both, Ranges: rs{tr(200, max64)}},
		},
	}
}

func TestOwnersAndGrant(t *testing.T) {
	a := sampleAssignment()
	if got := Grant(a, "a", messages.ServiceDelivery); !slices.Equal(got, rs{tr(0, 99)}) {
		t.Fatalf("a delivery: %v", got)
	}
	if got := Grant(a, "a", messages.ServiceForward); got != nil {
		t.Fatalf("a lacks forward, got %v", got)
	}
	// The master works a's forward ranges next to its own.
	if got := Grant(a, "m", messages.ServiceForward); !slices.Equal(got, rs{tr(0, 99), tr(200, max64)}) {
		t.Fatalf("m forward: %v", got)
	}
	if got := Grant(a, "m", messages.ServiceDelivery); !slices.Equal(got, rs{tr(200, max64)}) {
		t.Fatalf("m delivery: %v", got)
	}
	// A service the master lacks too has no owner for a's ranges.
	a.Members[2].Services = []string{messages.ServiceDelivery}
	a.Members[1].Services = []string{messages.ServiceDelivery}
	if got := Owners(a, messages.ServiceForward); len(got) != 0 {
		t.Fatalf("nobody has forward, got %v", got)
	}
}

func TestStateRoundTrip(t *testing.T) {
	a := sampleAssignment()
	now := time.Unix(1000, 0)
	s := State(a, now)
	want := []persistence.RangeOwner{
		{Service: messages.ServiceDelivery, Range: messages.TokenRange{Lo: 0, Hi: 99}, Owner: "a"},
		{Service: messages.ServiceDelivery, Range: messages.TokenRange{Lo: 100, Hi: 199}, Owner: "b"},
		{Service: messages.ServiceDelivery, Range: messages.TokenRange{Lo: 200, Hi: max64}, Owner: "m"},
		{Service: messages.ServiceForward, Range: messages.TokenRange{Lo: 0, Hi: 99}, Owner: "m"},
		{Service: messages.ServiceForward, Range: messages.TokenRange{Lo: 100, Hi: 199}, Owner: "b"},
		{Service: messages.ServiceForward, Range: messages.TokenRange{Lo: 200, Hi: max64}, Owner: "m"},
	}
	if !slices.Equal(s.Owners, want) {
		t.Fatalf("owners:\n got %v\nwant %v", s.Owners, want)
	}
	if s.Epoch != 4 || s.Master != "m" || s.MasterAddress != "m:1" || !s.PublishedAt.Equal(now) {
		t.Fatalf("state header: %+v", s)
	}
	s.Members[0].Ranges[0].Hi = 5 // a copy: the assignment is untouched
	if a.Members[0].Ranges[0].Hi != 99 {
		t.Fatal("State shares the members' slices")
	}
	s.Members[0].Ranges[0].Hi = 99
	back := FromState(s, "c", "r")
	if back.Epoch != a.Epoch || back.Cluster != "c" || back.Region != "r" || back.Master != "m" ||
		!slices.EqualFunc(back.Members, a.Members, func(x, y messages.RingMember) bool {
			return x.InstanceID == y.InstanceID && slices.Equal(x.Ranges, y.Ranges) && slices.Equal(x.Services, y.Services)
		}) {
		t.Fatalf("FromState(State(a)) = %+v, want %+v", back, a)
	}
}
