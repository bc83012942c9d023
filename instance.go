package switchboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/lock"
)

// The instance lock: on a store several instances share, each running
// process holds the elector's lock "instance/<--instance-id>" from before it
// takes back its previous run's leases until its actors have stopped. Two
// processes started with one --instance-id would otherwise both run: the
// second would free the first's leases at start (ReleaseLeases) and both
// would claim as one owner, so a message could be worked twice. The
// second waits for the lock with the ring's reconnect policy (a predecessor
// killed a moment ago frees it when the database ends its session) and
// then refuses to start. The lock's keeper (persistence/lock) takes it,
// takes it again when its session ends, and releases it.

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
// elector) and keeps it until releaseInstance; a lock lost that cannot be
// taken again stops the node.
func (n *Node) claimInstance(ctx context.Context) error {
	el := n.elector()
	if el == nil {
		return nil
	}
	k, err := lock.New(lock.Config{Elector: el, Name: instanceLockName(n.cfg.InstanceID), Clock: n.clock,
		Policy: n.cfg.reconnect(), Timeout: n.cfg.HTTPTimeout, Logger: n.log.With("instance_id", n.cfg.InstanceID)})
	if err != nil {
		return err
	}
	h, err := k.Take(ctx, func(d time.Duration) {
		n.log.Warn("another session holds this instance id's lock; waiting for it (a process killed a moment ago frees it when the database ends its session)",
			"instance_id", n.cfg.InstanceID, "retry_in", d)
	})
	if err != nil {
		return n.instanceError(err)
	}
	keep, stop := context.WithCancel(context.Background())
	n.instanceStop, n.instanceDone = stop, make(chan struct{})
	go func() {
		defer close(n.instanceDone)
		if err := k.Keep(keep, h); err != nil {
			n.onFatal("instance", n.instanceError(err))
		}
	}()
	return nil
}

// instanceError is the configuration error of an instance lock not taken
// (a *lock.Error): the id is in use, or the start stopped while it waited.
func (n *Node) instanceError(err error) error {
	var le *lock.Error
	if !errors.As(err, &le) {
		return err
	}
	why := fmt.Sprintf("another running process holds it (every instance of site %q needs an id of its own)", n.cfg.Name)
	if !errors.Is(le.Err, lock.ErrHeld) {
		why = "cannot take it: " + le.Err.Error()
	}
	if le.Stopped {
		return field.Errorf("InstanceID", "%q: stopped while waiting for its lock (%s)", n.cfg.InstanceID, why)
	}
	return field.Errorf("InstanceID", "%q is in use: the lock %q: %s; gave up after %d attempts",
		n.cfg.InstanceID, le.Name, why, le.Attempts)
}

// releaseInstance gives the instance lock up (after the actors stopped:
// nothing of ours holds a lease the next process with our id may free).
func (n *Node) releaseInstance() {
	if n.instanceStop == nil {
		return
	}
	n.instanceStop()
	<-n.instanceDone
	n.instanceStop = nil
}
