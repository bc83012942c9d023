package switchboard

import (
	"context"
	"errors"
	"sync"
	"time"
)

// What the node re-reads while it runs: the credentials (access.go) and
// the TLS files (tlsreload.go), on Reload (the command calls it on
// SIGHUP) and when the watch, every WatchInterval, finds them changed.

// watcher runs the watch's checks; stop ends it.
type watcher struct {
	mu      sync.Mutex
	stopped bool
	cancel  func() bool
}

func (w *watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.cancel != nil {
		w.cancel()
	}
}

// schedule runs f after d unless the watcher stopped.
func (w *watcher) schedule(n *Node, d time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.cancel = n.clock.AfterFunc(d, f)
	}
}

// startWatch starts the checks.
func (n *Node) startWatch() {
	var tick func()
	tick = func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WatchInterval+5*time.Second)
		if err := n.creds.check(ctx); err != nil {
			n.watchFailed("credentials", err)
		}
		cancel()
		if err := n.reloadTLS("file changed"); err != nil {
			n.watchFailed("TLS files", err)
		}
		n.watch.schedule(n, n.cfg.WatchInterval, tick)
	}
	n.watch.schedule(n, n.cfg.WatchInterval, tick)
}

// watchFailed logs a failed check at most once a minute per source: a file
// being rewritten may fail one read; a store down fails every one.
func (n *Node) watchFailed(what string, err error) {
	n.watchLogMu.Lock()
	defer n.watchLogMu.Unlock()
	now := n.clock.Now()
	if last, ok := n.watchLogged[what]; ok && now.Sub(last) < time.Minute {
		return
	}
	if n.watchLogged == nil {
		n.watchLogged = map[string]time.Time{}
	}
	n.watchLogged[what] = now
	n.log.Warn("cannot check for changes; what is in force stays", "of", what, "err", err)
}

// Reload re-reads the credentials (the token file, the credentials file
// or the store's) and the TLS certificate, key and CA files. What cannot
// be read or does not parse is reported, and what it gave stays in force.
// The command calls it on SIGHUP; it does nothing before Start.
func (n *Node) Reload() error {
	if !n.ready.Load() {
		return errors.New("the node is not running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if err := n.creds.load(ctx, "reload"); err != nil {
		n.log.Error("reload: a source of the credentials keeps what it last gave", "err", err)
		errs = append(errs, err)
	}
	if err := n.reloadTLS("reload"); err != nil {
		n.log.Error("reload: the TLS certificate, key and CA stay as they were", "err", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
