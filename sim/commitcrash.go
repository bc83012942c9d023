package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/persistence"
)

// CommitPoint names a commit after which KindCrashAfterCommit crashes a
// node: the store has the change, and the node has not yet acted on it
// (handed the message over, answered the call that asked for it). The
// store call that made the commit answers the crashed incarnation with
// an error, its endpoint dies with it: nothing of what follows leaves.
type CommitPoint string

// The crash points after a commit.
const (
	// CommitHandover: delivery work claimed (a poll's messages, a push
	// delivery's, or a forward accepted with its delivery leased), the
	// hand-over to the frontend not yet made.
	CommitHandover CommitPoint = "handover"
	// CommitDelivery: a push frontend's "delivered" recorded, the node
	// not yet gone on (its status report to the origin is in the outbox).
	CommitDelivery CommitPoint = "delivery"
	// CommitAck: a pull frontend's ack recorded, its answer not yet sent.
	CommitAck CommitPoint = "ack"
	// CommitStatus: a destination's status report (delivered or failed)
	// applied at the origin, the answer to the peer not yet sent.
	CommitStatus CommitPoint = "status"
)

// CommitPoints are the crash points, in the order the random schedules
// draw them.
var CommitPoints = []CommitPoint{CommitHandover, CommitDelivery, CommitAck, CommitStatus}

// commitArm is a crash armed for node's next commit at point.
type commitArm struct {
	node  int
	point CommitPoint
}

// claimPoints are the crash points a claim of work reaches: the hand-over
// of delivery work it took.
func claimPoints(kind persistence.WorkKind, work []persistence.Work) []CommitPoint {
	if kind == persistence.WorkDelivery && len(work) > 0 {
		return []CommitPoint{CommitHandover}
	}
	return nil
}

// acceptPoints: an accepting commit that leased delivery work hands it
// over in memory.
func acceptPoints(acc []persistence.Accepted) []CommitPoint {
	for _, a := range acc {
		if a.Work != nil && a.Work.Kind == persistence.WorkDelivery {
			return []CommitPoint{CommitHandover}
		}
	}
	return nil
}

// outcomePoints are the crash points the recorded outcomes os (cs their
// completions) reach: a push frontend's delivered, a pull frontend's ack.
func outcomePoints(os []persistence.Outcome, cs []persistence.Completion) []CommitPoint {
	var out []CommitPoint
	for i, o := range os {
		if o.Kind != persistence.WorkDelivery || i >= len(cs) || cs[i] != persistence.Applied {
			continue
		}
		switch {
		case o.Ack:
			out = append(out, CommitAck)
		case o.Result == persistence.ResultDelivered:
			out = append(out, CommitDelivery)
		}
	}
	return out
}

// statusPoints: a peer's status report applied.
func statusPoints(cs []persistence.Completion) []CommitPoint {
	for _, c := range cs {
		if c == persistence.Applied {
			return []CommitPoint{CommitStatus}
		}
	}
	return nil
}

// writePoints are the crash points a Write w that did got reaches.
func writePoints(w persistence.Write, got persistence.Written) []CommitPoint {
	out := append(outcomePoints(w.Outcomes, got.Completions), statusPoints(got.Reported)...)
	for i, c := range got.Claims {
		if i < len(w.Claims) && !c.Refused {
			out = append(out, claimPoints(w.Claims[i].Kind, c.Work)...)
		}
	}
	return append(out, acceptPoints(got.Accepted)...)
}

// crashAfterCommit crashes m's incarnation n (ep, view its endpoint and
// store view) when a crash is armed for a commit of m's node at one of
// points, which the view just made: the view and the endpoint die at
// once (the process is gone: it writes and sends nothing more, the call
// that committed fails), the incarnation's actors stop in the background
// and it restarts after the armed delay. It reports whether m crashed.
func (c *Cluster) crashAfterCommit(m *member, n *switchboard.Node, ep *Endpoint, view *storeView, points []CommitPoint) bool {
	if len(points) == 0 {
		return false
	}
	if view.dead.Load() {
		return false // a dead incarnation crashes no more
	}
	c.mu.Lock()
	var p CommitPoint
	d, armed := time.Duration(0), false
	for _, q := range points {
		if d, armed = c.commitArmed[commitArm{m.i, q}]; armed {
			p = q
			delete(c.commitArmed, commitArm{m.i, q})
			c.faults.AfterCommit[p]++
			break
		}
	}
	c.mu.Unlock()
	if !armed {
		return false
	}
	fmt.Fprintf(c.opts.Progress, "sim: %s crashes after a %s commit, restarts after %v\n", m.name, p, d)
	view.kill()
	ep.Kill()
	c.after(0, func() {
		c.crashIncarnation(m, n)
		c.after(d, func() { _ = c.restartMember(m) })
	})
	return true
}

// armedCommits is how many crashes after a commit have not fired yet.
func (c *Cluster) armedCommits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.commitArmed)
}

// afterCommitText is the crashes after a commit that happened, by point
// ("none" when none did).
func afterCommitText(counts map[CommitPoint]int) string {
	var parts []string
	for p, n := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", p, n))
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
