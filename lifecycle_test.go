package switchboard_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
)

// TestStartAfterStopRefuses: Stop before Start returned nil and left the
// node startable, so a Start that lost the race with its owner's Stop
// started the node and served on its listener, the Stop lost. A node is
// started once: Start after any Stop refuses with ErrStopped.
func TestStartAfterStopRefuses(t *testing.T) {
	cfg := testConfig(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, switchboard.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped; the node serves on %q after its owner stopped it", err, n.Addr())
		n.Stop(context.Background())
	}
	if n.Addr() != "" {
		t.Errorf("Start after Stop bound %s", n.Addr())
	}
}

// hangingPostgres accepts connections and never answers, as a Postgres
// that hangs: a node's Start waits on it for as long as its ctx lasts.
// accepted is closed at the first connection.
func hangingPostgres(t *testing.T) (dsn string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done, first := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if conns = append(conns, c); len(conns) == 1 {
				close(first)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "postgres://postgres@" + ln.Addr().String() + "/test?sslmode=disable&connect_timeout=30", first
}

// TestStopDuringStartCancelsIt: Stop called while Start waited for a
// Postgres that never answers waited for the whole Start (they shared
// one lock), its own ctx ignored: a Stop with 1 s returned after the
// Start's 10 s. Stop now ends the Start's ctx and returns once the Start
// has undone what it did, within its own ctx; the Start says it was
// stopped, and the node stays stopped.
func TestStopDuringStartCancelsIt(t *testing.T) {
	cfg := embeddedConfig(t)
	var accepted <-chan struct{}
	cfg.Postgres, accepted = hangingPostgres(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- n.Start(startCtx) }()
	select { // Start waits for the store's answer from here on
	case <-accepted:
	case err := <-started:
		t.Fatalf("Start did not wait for the store: %v", err)
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), time.Second)
	defer cancelStop()
	t0 := time.Now()
	err = n.Stop(stopCtx)
	took := time.Since(t0)
	serr := <-started
	if took > 2*time.Second || err != nil {
		t.Errorf("Stop(a ctx of 1s) during Start returned %v after %v", err, took.Round(time.Millisecond))
	}
	if !errors.Is(serr, switchboard.ErrStopped) {
		t.Errorf("Start stopped during its wait: %v, want ErrStopped", serr)
	}
	if err := n.Start(context.Background()); !errors.Is(err, switchboard.ErrStopped) {
		t.Errorf("Start again: %v, want ErrStopped", err)
	}
}

// TestStopRacingStart: a Stop at any moment of a Start leaves the node
// stopped, whole and once: Start succeeds (Stop then stops it) or says it
// was stopped, and no goroutine is left behind (TestMain).
func TestStopRacingStart(t *testing.T) {
	for i := range 4 {
		cfg := testConfig(t)
		n, err := switchboard.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan error, 1)
		go func() { started <- n.Start(context.Background()) }()
		time.Sleep(time.Duration(i) * 20 * time.Millisecond) // the moment of the race, not a wait for something
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("Stop %d: %v", i, err)
		}
		if err := <-started; err != nil && !errors.Is(err, switchboard.ErrStopped) {
			t.Errorf("Start %d: %v, want nil or ErrStopped", i, err)
		}
		if err := n.Start(context.Background()); !errors.Is(err, switchboard.ErrStopped) {
			t.Errorf("Start %d again: %v, want ErrStopped", i, err)
		}
	}
}

// TestFailedStartClosesTheGivenListener: whether Config.Listener was
// closed after a failed Start depended on where Start failed: closed after
// bind (a call record file that cannot open), left open before it (the
// data directory's lock held by another node). The node owns it from Start
// on: a failed Start closes it wherever it failed, as Stop does.
func TestFailedStartClosesTheGivenListener(t *testing.T) {
	holder := startNode(t, embeddedConfig(t))
	for _, tc := range []struct {
		name string
		mod  func(n *switchboard.Config)
		stop bool // Stop before Start: Start refuses
	}{
		{name: "before bind: data directory locked", mod: func(c *switchboard.Config) { c.DataDir = holder.cfg.DataDir }},
		{name: "after bind: call record file", mod: func(c *switchboard.Config) { c.CDRFile = filepath.Join(t.TempDir(), "missing", "cdr") }},
		{name: "refused: stopped before", mod: func(*switchboard.Config) {}, stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cfg := embeddedConfig(t)
			cfg.Listener = ln
			tc.mod(&cfg)
			n, err := switchboard.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.stop {
				if err := n.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if err := n.Start(context.Background()); err == nil {
				n.Stop(context.Background())
				t.Fatal("Start succeeded")
			}
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				c.Close()
				t.Errorf("Config.Listener still accepts after the failed Start")
			}
		})
	}
}

// TestStopWithAnEndedCtxStillStops: a Stop given a ctx already cancelled
// (an abrupt stop, as the sim's crash makes) of a node that started
// stops it all the same, without draining; it once found its ctx ended
// before it saw the Start done, at random, and returned without stopping
// anything (the node's goroutines left running).
func TestStopWithAnEndedCtxStillStops(t *testing.T) {
	for i := range 8 {
		cfg := testConfig(t)
		cfg.MetricsListen = ""
		n, err := switchboard.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = n.Stop(ctx) // reports what it did not finish
		if c, err := net.Dial("tcp", n.Addr()); err == nil {
			c.Close()
			n.Stop(context.Background())
			t.Fatalf("stop %d: the node still accepts on %s after Stop", i, n.Addr())
		}
	}
}

// stallingListener stalls in Close until release is closed: a teardown
// under way is caught half way, with the node's store and data-directory
// lock still held.
type stallingListener struct {
	net.Listener
	once    sync.Once
	closing chan struct{}
	release chan struct{}
}

func newStallingListener(t *testing.T) *stallingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &stallingListener{Listener: ln, closing: make(chan struct{}), release: make(chan struct{})}
}

func (l *stallingListener) Close() error {
	l.once.Do(func() { close(l.closing) })
	<-l.release
	return l.Listener.Close()
}

// TestStopWaitsForTheStartUndoing: a Stop that comes while a Start is
// undoing what it did (it failed, or it was cancelled by a Stop that then
// ran out of time) returns once the Start has returned, so that the owner
// may build a node on the same data directory at once. Both returned nil
// at once: the first found the node stopped by its Start's failure, the
// second found the first Stop done.
func TestStopWaitsForTheStartUndoing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start makes the Start fail (or hang), and is done once the
		// Start is undoing.
		start func(t *testing.T, n *switchboard.Node, ln *stallingListener)
	}{
		{"its Start failed", func(_ *testing.T, _ *switchboard.Node, ln *stallingListener) {
			<-ln.closing
		}},
		{"a Stop ran out of time", func(t *testing.T, n *switchboard.Node, ln *stallingListener) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := n.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the first Stop: %v, want its deadline (the Start is undoing)", err)
			}
			<-ln.closing
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := newStallingListener(t)
			cfg := embeddedConfig(t)
			cfg.Listener = ln
			var accepted <-chan struct{}
			if tc.name == "its Start failed" {
				cfg.CDRFile = filepath.Join(t.TempDir(), "missing", "cdr") // fails after bind
			} else {
				cfg.Postgres, accepted = hangingPostgres(t)
			}
			n, err := switchboard.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan error, 1)
			go func() { started <- n.Start(context.Background()) }()
			if accepted != nil {
				<-accepted
			}
			tc.start(t, n, ln)
			stopped := make(chan error, 1)
			go func() { stopped <- n.Stop(context.Background()) }()
			select {
			case err := <-stopped:
				t.Errorf("Stop returned %v while the Start was still undoing", err)
				stopped <- err
			case <-time.After(200 * time.Millisecond):
			}
			close(ln.release)
			<-started
			if err := <-stopped; err != nil {
				t.Errorf("Stop: %v", err)
			}
			if cfg.Postgres == "" { // what an owner does once Stop returned
				again := cfg
				again.Listener, again.CDRFile = nil, ""
				startNode(t, again)
			}
		})
	}
}
