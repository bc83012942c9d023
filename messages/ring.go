package messages

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Ring documents: the master/slave protocol of a multi-instance site
// (/api/ring/...) and the status document. See docs/ring.md.

// TokenRange is an inclusive range [Lo, Hi] of ring tokens (see TokenOf).
// The whole ring is {0, MaxUint64}. In JSON it is the pair [lo, hi].
type TokenRange struct {
	Lo, Hi uint64
}

// Ring services: the kinds of work a ring member does (--ring-services).
// delivery is local delivery work; forward is forward work and the
// delivery_status reports owed to peers.
const (
	ServiceDelivery = "delivery"
	ServiceForward  = "forward"
)

// AllServices are the ring services in their canonical order.
var AllServices = []string{ServiceDelivery, ServiceForward}

// Ring roles (--ring-role).
const (
	RoleMaster = "master"
	RoleSlave  = "slave"
	RoleIndex  = "index"
	RoleAuto   = "auto"
)

// RingJoin is a slave's request to join the master's ring
// (POST /api/ring/join).
type RingJoin struct {
	InstanceID string   `json:"instance_id"`
	Node       string   `json:"node"`
	Address    string   `json:"address"`
	Cluster    string   `json:"cluster"`
	Region     string   `json:"region"`
	Zone       string   `json:"zone"`
	Services   []string `json:"services"`
	// Capabilities are what this instance's version takes (the names of
	// the federation's Identity.Capabilities). The master carries them in
	// every RingMember, so that each instance knows whether the whole site
	// takes what a message needs (Options.Needs). An instance of a version
	// before them sends none, and the master reads the document
	// tolerantly: absent is none.
	Capabilities []string `json:"capabilities,omitempty"`
}

// RingPoll is a slave's long-lived subscription call (POST /api/ring/poll):
// it names the epoch the slave has applied (0 = none yet) and is answered
// when the master publishes a newer one, or after the publish interval with
// the current assignment (a republish). Each poll also tells the master the
// slave is alive and holds Epoch.
type RingPoll struct {
	InstanceID string `json:"instance_id"`
	Epoch      uint64 `json:"epoch"`
	// WaitMs is the longest the slave lets the master hold the call (its
	// own client timeout is a little longer); the master answers at the
	// latest after min(WaitMs, its publish interval). 0 answers at once.
	WaitMs int64 `json:"wait_ms"`
	// Touch says the slave changed the site's directory (routes,
	// frontends): the master answers every subscription at once, so that
	// every instance reads the directory again.
	Touch bool `json:"touch,omitempty"`
}

// RingLeave is a slave's goodbye (POST /api/ring/leave) on a graceful stop.
type RingLeave struct {
	InstanceID string `json:"instance_id"`
}

// RingMember is one member of an assignment.
type RingMember struct {
	InstanceID string       `json:"instance_id"`
	Address    string       `json:"address"`
	Zone       string       `json:"zone,omitempty"`
	Services   []string     `json:"services"`
	Ranges     []TokenRange `json:"ranges"`
	// Capabilities are those the member announced when it joined (sorted;
	// absent for a member of an earlier version, and from a master of one).
	Capabilities []string `json:"capabilities,omitempty"`
}

// RingAssignment is what the master publishes: who owns which tokens under
// Epoch. Members are ordered by instance id; their ranges together cover the
// whole ring. A member works its ranges for the services it has; the master
// works them for the services the member lacks.
type RingAssignment struct {
	Epoch         uint64       `json:"epoch"`
	Master        string       `json:"master"`
	MasterAddress string       `json:"master_address"`
	Cluster       string       `json:"cluster"`
	Region        string       `json:"region"`
	Members       []RingMember `json:"members"`
	// Coverage is the master's coverage when it sent the document (see
	// RingStatus); slaves show it on their status page.
	Coverage float64 `json:"coverage"`
}

// RingStatus is GET /api/ring/status. Coverage is the fraction of the token
// space owned (by a member that has applied it) under the current epoch; 1
// when whole.
type RingStatus struct {
	InstanceID string       `json:"instance_id"`
	Role       string       `json:"role"`
	Master     string       `json:"master"`
	Epoch      uint64       `json:"epoch"`
	Coverage   float64      `json:"coverage"`
	Members    []RingMember `json:"members"`
	// Delivery is where this instance's delivery work comes from now:
	// "ring" (claims from the store in its delivery ranges) or "bus" (the
	// delivery bus of --nats-url, up: the ranges then serve forward work,
	// and delivery only while the bus is down).
	Delivery string `json:"delivery,omitempty"`
	// Subscribed, on a master, are the members (instance ids, sorted)
	// whose subscription call is open now: those that will hear of the next
	// publication, or of the master's stop, at once.
	Subscribed []string `json:"subscribed,omitempty"`
}

// MarshalJSON writes the range as the pair [lo, hi].
func (r TokenRange) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]uint64{r.Lo, r.Hi})
}

// UnmarshalJSON reads the pair [lo, hi] (lo <= hi).
func (r *TokenRange) UnmarshalJSON(b []byte) error {
	var p [2]uint64
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("token range: want [lo, hi]: %w", err)
	}
	if p[0] > p[1] {
		return fmt.Errorf("token range [%d, %d]: lo is above hi", p[0], p[1])
	}
	r.Lo, r.Hi = p[0], p[1]
	return nil
}

// Contains reports whether token t is in r.
func (r TokenRange) Contains(t uint64) bool { return r.Lo <= t && t <= r.Hi }

// Actor messages of the ring coordinator. The gateway's handlers send them
// and wait on Reply (buffered, capacity 1) or on their request's end.

// RingAnswer is the coordinator's answer to a join or a poll.
type RingAnswer struct {
	Assignment RingAssignment
	Err        error
}

// RingJoinRequest asks the coordinator (as master) to admit a slave.
type RingJoinRequest struct {
	Join  RingJoin
	Reply chan RingAnswer
}

// RingPollRequest is a slave's subscription call. When its caller goes
// away first, the handler sends RingPollGone with the same request.
type RingPollRequest struct {
	Poll  RingPoll
	Reply chan RingAnswer
}

// RingPollGone withdraws a poll whose caller went away.
type RingPollGone struct{ Request *RingPollRequest }

// RingLeaveRequest removes a slave (graceful stop).
type RingLeaveRequest struct {
	Leave RingLeave
	Reply chan error
}

// RingTouch tells the coordinator that this instance changed the site's
// directory in the shared store: the others should read it again.
type RingTouch struct{}

// RingStatusRequest asks for GET /api/ring/status.
type RingStatusRequest struct{ Reply chan RingStatus }

// Validate reports what is wrong with a join document (ring_bad_join):
// every field but zone, cluster and region is required, names must be
// valid and services known.
func (j RingJoin) Validate() error {
	var probs []string
	for field, v := range map[string]string{"instance_id": j.InstanceID, "node": j.Node} {
		if !ValidName(v) {
			probs = append(probs, fmt.Sprintf("%s %q is not a valid name", field, v))
		}
	}
	for field, v := range map[string]string{"cluster": j.Cluster, "region": j.Region, "zone": j.Zone} {
		if v != "" && !ValidName(v) {
			probs = append(probs, fmt.Sprintf("%s %q is not a valid name", field, v))
		}
	}
	if j.Address == "" || len(j.Address) > 255 {
		probs = append(probs, "address (host:port where the master can reach the instance) is required")
	}
	if len(j.Services) == 0 {
		probs = append(probs, "services must name at least one of delivery, forward")
	}
	for _, s := range j.Services {
		if s != ServiceDelivery && s != ServiceForward {
			probs = append(probs, fmt.Sprintf("unknown service %q (known: delivery, forward)", s))
		}
	}
	if len(probs) == 0 {
		return nil
	}
	sort.Strings(probs)
	return Errorf(CodeRingBadJoin, "%s", strings.Join(probs, "; "))
}
