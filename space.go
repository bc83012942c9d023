package switchboard

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/space"
)

// spaceCheck is how often the gate's shell wakes to log a change of the
// gate and read the free space (1s); spaceFresh is how old a reading of the
// free space may be when new work asks (100ms: at the write rate of a busy
// node, 100 ms is a few megabytes of the reserve; statfs costs
// microseconds).
const (
	spaceCheck = time.Second
	spaceFresh = 100 * time.Millisecond
)

// startSpace starts the gate's shell: it reads the free space of the data
// directory (embedded store only: Postgres keeps its data elsewhere and
// tells of a full disk by its errors), logs each change of the gate once and
// feeds the storage metrics. It runs until the node stops.
func (n *Node) startSpace() error {
	watch := n.cfg.Store == nil && n.cfg.Postgres == ""
	n.spaceWatch = watch
	gauges := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_storage_full",
		Help: "1 while new submits and forwards are refused for want of space (507 storage_full), else 0.",
	}, func() float64 {
		if shut, _ := n.space.Shut(n.clock.Now()); shut {
			return 1
		}
		return 0
	})}
	if watch {
		gauges = append(gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchboard_storage_free_bytes",
			Help: "Free space on the file system of the data directory (the embedded store's), as last read.",
		}, func() float64 {
			free, _ := n.space.Free()
			return float64(free)
		}))
	}
	for _, g := range gauges {
		if err := n.metrics.Register(g); err != nil {
			return err
		}
	}
	var check func()
	check = func() {
		select {
		case <-n.stopping:
			return
		default:
		}
		if watch {
			if err := n.readSpace(n.clock.Now()); err != nil {
				n.log.Warn("cannot read the free space of the data directory", "err", err)
			}
		}
		n.spaceChanged(n.clock.Now())
		n.clock.AfterFunc(spaceCheck, check)
	}
	check()
	return nil
}

// spaceChanged logs a change of the gate, once: it is called wherever the
// gate may have changed (a reading, a failed write, the shell's tick for a
// hold that ran out).
func (n *Node) spaceChanged(now time.Time) {
	if changed, shut, why := n.space.Changed(now); changed && shut {
		n.log.Error("storage full: new submits and forwards are refused (507) until there is room", "reason", why)
	} else if changed {
		n.log.Info("storage has room again: new submits and forwards are taken")
	}
}

// readSpace reads the free space of the data directory into the gate.
func (n *Node) readSpace(now time.Time) error {
	n.spaceRead.Store(now.UnixNano())
	free, total, err := space.Usage(n.cfg.DataDir)
	if err == nil {
		n.space.Observe(free, total)
	}
	return err
}

// roomForNew refuses new work while the gate is shut. The free space it
// goes by is at most spaceFresh old: one caller at a time reads it again.
func (n *Node) roomForNew() error {
	if n.space == nil {
		return nil // not started: the call is refused as unavailable
	}
	now := n.clock.Now()
	if last := n.spaceRead.Load(); n.spaceWatch && now.UnixNano()-last > int64(spaceFresh) &&
		n.spaceRead.CompareAndSwap(last, now.UnixNano()) {
		_ = n.readSpace(now) // a failure is the shell's to log
		n.spaceChanged(now)
	}
	if shut, why := n.space.Shut(now); shut {
		return messages.Errorf(messages.CodeStorageFull, "the node is short of storage and takes no new messages (%s); retry later", why)
	}
	return nil
}

// noSpace shuts the gate for space.Hold: a write of the store found no
// room (err). The node's own stores call it for every write that does,
// whatever made it (Config.OnNoSpace of sqlite and postgres): a delivery's
// outcome, a claim, a peer's report, the cleaner's, as well as new work.
func (n *Node) noSpace(err error) {
	now := n.clock.Now()
	n.space.Failed(now, err)
	n.spaceChanged(now)
}

// noteFull shuts the gate when err, the answer to a submit or a forward,
// says its commit found no room: the one sign an embedder's store
// (Config.Store) gives. The node's own stores told noSpace already, with
// the store's own words.
func (n *Node) noteFull(err error) {
	var e *messages.Error
	if !n.ownStore && n.space != nil && errors.As(err, &e) && e.Code == messages.CodeStorageFull {
		n.noSpace(errors.New(e.Message))
	}
}

// shortOfSpace reports whether the gate is shut: the cleaner then gives
// space back at once (retention.Config.Short).
func (n *Node) shortOfSpace() bool {
	state, _ := n.storageState()
	return state == "full"
}

// storageState is the gate's state for /readyz: "ok", or "full" and why.
func (n *Node) storageState() (state, why string) {
	if n.space == nil {
		return "ok", ""
	}
	if shut, why := n.space.Shut(n.clock.Now()); shut {
		return "full", why
	}
	return "ok", ""
}
