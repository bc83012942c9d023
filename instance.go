package switchboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The instance lock: on a store several instances share, each running
// process holds the elector's lock "instance/<--instance-id>" from before it
// takes back its previous run's leases until its actors have stopped. Two
// processes started with one --instance-id would otherwise both run: the
// second would free the first's leases at start (ReleaseLeases) and both
// would claim as one owner, so a message could be worked twice. The
// second waits for the lock with the ring's reconnect policy (a predecessor
// killed a moment ago frees it when the database ends its session) and
// then refuses to start.

// instanceLockName is the elector lock of instance id.
func instanceLockName(id string) string { return "instance/" + id }

// elector is the site's elector: Config.Elector, else the store's own (nil
// for a store of one instance).
func (n *Node) elector() persistence.Elector {
	if n.cfg.Elector != nil {
		return n.cfg.Elector
	}
	el, _ := n.store.(persistence.Elector)
	return el
}

// claimInstance takes the instance lock (nothing to take without an
// elector) and starts its keeper.
func (n *Node) claimInstance(ctx context.Context) error {
	el := n.elector()
	if el == nil {
		return nil
	}
	l, err := n.takeInstance(ctx.Done(), el, func(d time.Duration) {
		n.log.Warn("another session holds this instance id's lock; waiting for it (a process killed a moment ago frees it when the database ends its session)",
			"instance_id", n.cfg.InstanceID, "retry_in", d)
	})
	if err != nil {
		return err
	}
	n.instanceStop, n.instanceDone = make(chan struct{}), make(chan struct{})
	go n.keepInstance(el, l)
	return nil
}

// takeInstance tries the lock until it has it, stop closes, or the reconnect
// policy gives up; waiting (when set) is told of each wait.
func (n *Node) takeInstance(stop <-chan struct{}, el persistence.Elector, waiting func(time.Duration)) (persistence.Leadership, error) {
	name := instanceLockName(n.cfg.InstanceID)
	policy := n.cfg.reconnect()
	rng := rand.New(rand.NewPCG(uint64(n.clock.Now().UnixNano()), 0))
	for failures := 1; ; failures++ {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HTTPTimeout)
		l, err := el.TryLead(ctx, name)
		cancel()
		if l != nil {
			return l, nil
		}
		why := fmt.Sprintf("another running process holds it (every instance of site %q needs an id of its own)", n.cfg.Name)
		if err != nil {
			why = "cannot take it: " + err.Error()
		}
		if policy.GiveUp(failures) {
			return nil, field.Errorf("InstanceID", "%q is in use: the lock %q: %s; gave up after %d attempts",
				n.cfg.InstanceID, name, why, failures)
		}
		d := policy.Delay(failures, rng)
		if waiting != nil {
			waiting(d)
		}
		if !n.sleep(d, stop) {
			return nil, field.Errorf("InstanceID", "%q: stopped while waiting for its lock (%s)", n.cfg.InstanceID, why)
		}
	}
}

// keepInstance holds the lock until releaseInstance. A lock lost with its
// connection is taken again; if it cannot be (another process has it, or
// the database stays away past the reconnect policy) the node stops.
func (n *Node) keepInstance(el persistence.Elector, l persistence.Leadership) {
	defer close(n.instanceDone)
	for {
		select {
		case <-n.instanceStop:
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HTTPTimeout)
			_ = l.Release(ctx)
			cancel()
			return
		case <-l.Lost():
		}
		n.log.Warn("the instance lock was lost with its database connection; taking it again", "instance_id", n.cfg.InstanceID)
		var err error
		if l, err = n.takeInstance(n.instanceStop, el, nil); err != nil {
			select {
			case <-n.instanceStop:
			default:
				n.onFatal("instance", err)
			}
			return
		}
		n.log.Info("instance lock taken again", "instance_id", n.cfg.InstanceID)
	}
}

// releaseInstance gives the instance lock up (after the actors stopped:
// nothing of ours holds a lease the next process with our id may free).
func (n *Node) releaseInstance() {
	if n.instanceStop == nil {
		return
	}
	close(n.instanceStop)
	<-n.instanceDone
	n.instanceStop = nil
}

// sleep waits d on the node's clock; false when stop closed first.
func (n *Node) sleep(d time.Duration, stop <-chan struct{}) bool {
	done := make(chan struct{})
	cancel := n.clock.AfterFunc(d, func() { close(done) })
	defer cancel()
	select {
	case <-done:
		return true
	case <-stop:
		return false
	}
}
