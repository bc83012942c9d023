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

// instanceError is the error of an instance lock not taken (a
// *lock.Error): the id is in use (a configuration error), or the store
// failed to give the lock (Postgres away: nothing the flag could change);
// either, or the start stopped while it waited.
func (n *Node) instanceError(err error) error {
	var le *lock.Error
	if !errors.As(err, &le) {
		return err
	}
	if !errors.Is(le.Err, lock.ErrHeld) {
		if le.Stopped {
			return fmt.Errorf("instance %q: stopped while waiting for the store to give its lock %q: %w", n.cfg.InstanceID, le.Name, le.Err)
		}
		return fmt.Errorf("instance %q: the store failed to give its lock %q: %w; gave up after %d attempts",
			n.cfg.InstanceID, le.Name, le.Err, le.Attempts)
	}
	why := fmt.Sprintf("another running process holds it (every instance of site %q needs an id of its own)", n.cfg.Name)
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

// maxClockSkew is how far an instance's clock may be from the clock of the
// server of the store it shares with the rest of its site. The instances
// lease work to one another by their own clocks: a lease ends at the
// leasing instance's time plus its length, and another instance takes the
// work once its own clock has passed that. One whose clock runs ahead
// takes work under a lease that has not ended (a pull poll's message
// handed to a second consumer, a delivery under way made again); one that
// runs behind holds its work past its leases. A second, checked against
// the server's clock (so two instances may differ by twice that), is far
// beyond what NTP keeps and below the shortest lease (a poll's 1 s).
const maxClockSkew = time.Second

// clockOffset is how far a clock read at before and after was from a
// server's clock read in between: the server's time less the midpoint of
// the two, and the uncertainty of that, half the time between them.
func clockOffset(before, server, after time.Time) (offset, uncertainty time.Duration) {
	half := after.Sub(before) / 2
	return server.Sub(before.Add(half)), half
}

// checkClock refuses to start an instance of a shared store whose clock is
// more than maxClockSkew off the store server's, beyond what the round
// trip leaves unknown (see maxClockSkew); a store of one instance, or one
// without a server clock, is not checked.
func (n *Node) checkClock(ctx context.Context) error {
	sc, ok := n.store.(persistence.ServerClock)
	if !ok || n.elector() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.HTTPTimeout)
	defer cancel()
	before := n.clock.Now()
	server, err := sc.ServerNow(ctx)
	after := n.clock.Now()
	if err != nil {
		return fmt.Errorf("reading the database server's clock: %w", err)
	}
	offset, uncertainty := clockOffset(before, server, after)
	if offset.Abs()-uncertainty <= maxClockSkew {
		return nil
	}
	way := "ahead of"
	if offset > 0 {
		way = "behind"
	}
	return fmt.Errorf("this instance's clock is %v %s the database server's (more than %v): the instances of a site lease work to one another by their clocks, "+
		"and a skewed one would take work another holds (a message delivered twice) or hold its own too long; synchronise the clocks (NTP) and start it again",
		offset.Abs().Round(time.Millisecond), way, maxClockSkew)
}
