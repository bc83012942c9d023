package discovery

import (
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/switchboard-dev/switchboard/actors/discovery/dnstest"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

const poll = 30 * time.Second

// sink is the test's peers supervisor: it keeps what discovery told it.
type sink struct {
	mu    sync.Mutex
	peers map[string][]messages.PeerInstance
	got   []string // "up node addr=id ..." / "gone node", in order
}

func (s *sink) Receive(c actor.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := c.Message().(type) {
	case *PeerUp:
		s.peers[m.Node] = m.Instances
		s.got = append(s.got, "up "+m.Node+" "+strings.Join(instanceAttr(m.Instances), " "))
	case *PeerGone:
		delete(s.peers, m.Node)
		s.got = append(s.got, "gone "+m.Node)
	}
}

func (s *sink) has(node string, addrs ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	is, ok := s.peers[node]
	if !ok {
		return false
	}
	var got []string
	for _, i := range is {
		got = append(got, i.Address)
	}
	return slices.Equal(got, addrs)
}

func (s *sink) hasNot(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.peers[node]
	return !ok
}

func (s *sink) effects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// fixture is a discovery actor under test with its world.
type fixture struct {
	t      *testing.T
	system *actor.ActorSystem
	clock  *manualClock
	tr     *identities
	sink   *sink
	logs   *logtest.Buffer
	pid    *actor.PID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	system := actor.NewActorSystem(
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	t.Cleanup(system.Shutdown)
	return &fixture{t: t, system: system, clock: newManualClock(), tr: newTransport(),
		sink: &sink{peers: map[string][]messages.PeerInstance{}}}
}

// config is a valid config for node "self" with the fixture's world.
func (f *fixture) config() Config {
	cfg := DefaultConfig()
	cfg.Node = "self"
	cfg.PollInterval = poll
	cfg.IdentityTimeout = time.Second
	cfg.Transport = f.tr
	cfg.Clock = f.clock
	cfg.Logger, f.logs = logtest.New()
	return cfg
}

// start spawns the sink and the discovery actor (supervised as in the node).
func (f *fixture) start(cfg Config) {
	f.t.Helper()
	sinkPID := f.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f.sink }))
	cfg.Sink = sinkPID
	producer, err := New(cfg)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.pid = f.system.Root.Spawn(supervision.Props("discovery", producer, supervision.Options{}))
	f.t.Cleanup(func() {
		if err := f.system.Root.PoisonFuture(f.pid).Wait(); err != nil {
			f.t.Errorf("stop discovery: %v", err)
		}
		_ = f.system.Root.PoisonFuture(sinkPID).Wait()
	})
}

func (f *fixture) snapshot() Snapshot {
	f.t.Helper()
	ch := make(chan Snapshot, 1)
	f.system.Root.Send(f.pid, &GetSnapshot{Reply: ch})
	select {
	case s := <-ch:
		return s
	case <-time.After(waitTimeout):
		f.t.Fatal("no snapshot")
		panic("unreachable")
	}
}

// waitPolls waits until n full polls completed (and their effects are sent
// and the next wake-up armed: all happen in the same receive).
func (f *fixture) waitPolls(n uint64) Snapshot {
	f.t.Helper()
	var s Snapshot
	polltest.Until(f.t, waitTimeout, "poll", func() bool { s = f.snapshot(); return s.Polls >= n })
	return s
}

func TestActorFollowsSRVRecords(t *testing.T) {
	const (
		srvA = srvName + " 60 IN SRV 10 10 8443 a.example.test."
		srvB = srvName + " 60 IN SRV 10 10 8443 b.example.test."
		srvC = srvName + " 60 IN SRV 10 10 0 c.example.test." // port 0: the API port
		srvS = srvName + " 60 IN SRV 10 10 8443 self.example.test."
	)
	z := dnstest.Start(t, srvA, srvB, srvS,
		"a.example.test. 60 IN A 127.0.0.2",
		"a.example.test. 60 IN A 127.0.0.12", // a second instance of alpha
		"b.example.test. 60 IN A 127.0.0.3",
		"c.example.test. 60 IN A 127.0.0.4",
		"self.example.test. 60 IN A 127.0.0.1",
	)
	f := newFixture(t)
	f.tr.answer("127.0.0.1:8443", "self", "0")
	f.tr.answer("127.0.0.2:8443", "alpha", "0")
	f.tr.answer("127.0.0.12:8443", "alpha", "1")
	f.tr.answer("127.0.0.3:8443", "beta", "0")
	f.tr.answer("127.0.0.4:9443", "gamma", "0")
	cfg := f.config()
	cfg.SRV, cfg.DNSServer, cfg.APIPort = srvName, z.Addr, 9443
	f.start(cfg)

	polltest.Until(t, waitTimeout, "alpha and beta", func() bool {
		return f.sink.has("alpha", "127.0.0.2:8443", "127.0.0.12:8443") && f.sink.has("beta", "127.0.0.3:8443")
	})
	s := f.waitPolls(1)
	if want := []Refusal{{Address: "127.0.0.1:8443", Reason: RefusedOwnNode, Node: "self", InstanceID: "0"}}; !reflect.DeepEqual(s.Refused, want) {
		t.Fatalf("refused %+v, want %+v", s.Refused, want)
	}
	if want := []string{"127.0.0.1:8443", "127.0.0.2:8443", "127.0.0.3:8443", "127.0.0.12:8443"}; !slices.Equal(s.Addresses, want) {
		t.Fatalf("addresses %v, want %v", s.Addresses, want)
	}

	// An added record is found by the next poll: one poll interval later.
	z.Add(t, srvC)
	f.clock.advance(poll)
	polltest.Until(t, waitTimeout, "gamma at the API port", func() bool { return f.sink.has("gamma", "127.0.0.4:9443") })

	// A removed record is noticed by the next poll too.
	z.Remove(t, srvB)
	f.clock.advance(poll)
	polltest.Until(t, waitTimeout, "beta gone", func() bool { return f.sink.hasNot("beta") })

	want := []string{
		"up alpha 127.0.0.2:8443=0 127.0.0.12:8443=1",
		"up beta 127.0.0.3:8443=0",
		"up gamma 127.0.0.4:9443=0",
		"gone beta",
	}
	if got := f.sink.effects(); !slices.Equal(got, want) {
		t.Fatalf("effects %q, want %q", got, want)
	}
	if n := len(f.logs.Records(t, "peer discovered")); n != 3 {
		t.Errorf("%d 'peer discovered' logs, want 3", n)
	}
	if n := len(f.logs.Records(t, "address refused")); n != 1 {
		t.Errorf("%d 'address refused' logs, want 1 (once per change, not per poll)", n)
	}
}

func TestActorDNSFailureKeepsPeers(t *testing.T) {
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.2")
	f := newFixture(t)
	f.tr.answer("127.0.0.2:8443", "alpha", "0")
	cfg := f.config()
	cfg.SRV, cfg.DNSServer = srvName, z.Addr
	f.start(cfg)
	polltest.Until(t, waitTimeout, "alpha", func() bool { return f.sink.has("alpha", "127.0.0.2:8443") })
	f.waitPolls(1)

	calls := f.tr.count("127.0.0.2:8443")
	z.SetRcode(dns.RcodeServerFailure)
	f.clock.advance(poll)
	s := f.waitPolls(2)
	if !strings.Contains(s.DNSError, "SERVFAIL") {
		t.Fatalf("dns error %q, want SERVFAIL", s.DNSError)
	}
	if !slices.Equal(s.Addresses, []string{"127.0.0.2:8443"}) || len(s.Peers) != 1 {
		t.Fatalf("after a DNS failure: addresses %v peers %+v; want the last good ones", s.Addresses, s.Peers)
	}
	if got := f.tr.count("127.0.0.2:8443"); got != calls+1 {
		t.Fatalf("the last good addresses were asked %d times during the failure, want once", got-calls)
	}
	// The SRV name vanishing is a failure too: the list is kept.
	z.SetRcode(dns.RcodeNameError)
	f.clock.advance(poll)
	s = f.waitPolls(3)
	if !strings.Contains(s.DNSError, "NXDOMAIN") || len(s.Peers) != 1 {
		t.Fatalf("after NXDOMAIN: dns error %q peers %+v", s.DNSError, s.Peers)
	}
	z.SetRcode(dns.RcodeSuccess)
	f.clock.advance(poll)
	if s = f.waitPolls(4); s.DNSError != "" {
		t.Fatalf("dns error %q after recovery", s.DNSError)
	}
	if got := f.sink.effects(); !slices.Equal(got, []string{"up alpha 127.0.0.2:8443=0"}) {
		t.Fatalf("effects %q: a DNS failure must not change the peers", got)
	}
	if n := len(f.logs.Records(t, "dns lookup failed; keeping the last address list")); n != 2 {
		t.Errorf("%d dns failure logs, want 2 (one per distinct error)", n)
	}
	if n := len(f.logs.Records(t, "dns lookup recovered")); n != 1 {
		t.Errorf("%d dns recovery logs, want 1", n)
	}
}

func TestActorStaticPeers(t *testing.T) {
	f := newFixture(t)
	f.tr.answer("alpha.example:8443", "alpha", "0")
	f.tr.answer("beta.example:9000", "beta", "0")
	cfg := f.config()
	var err error
	if cfg.Static, err = ParsePeers("alpha.example, beta.example:9000", DefaultAPIPort); err != nil {
		t.Fatal(err)
	}
	f.start(cfg)
	polltest.Until(t, waitTimeout, "static peers", func() bool {
		return f.sink.has("alpha", "alpha.example:8443") && f.sink.has("beta", "beta.example:9000")
	})
	if s := f.waitPolls(1); s.DNSError != "" || s.SRV != "" {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestActorDuplicateInstanceRefused(t *testing.T) {
	f := newFixture(t)
	// One instance reachable at two addresses (say, a dual-stack host).
	f.tr.answer("10.0.0.9:8443", "alpha", "0")
	f.tr.answer("10.0.0.10:8443", "alpha", "0")
	cfg := f.config()
	cfg.Static = []string{"10.0.0.10:8443", "10.0.0.9:8443"}
	cfg.Logger = cfg.Logger.With("node", cfg.Node) // as the node's logger has it
	f.start(cfg)
	polltest.Until(t, waitTimeout, "alpha", func() bool { return f.sink.has("alpha", "10.0.0.9:8443") })
	for i := range uint64(3) {
		f.clock.advance(poll)
		f.waitPolls(i + 2)
	}
	s := f.snapshot()
	want := []Refusal{{Address: "10.0.0.10:8443", Reason: RefusedDuplicate, Node: "alpha", InstanceID: "0", Kept: "10.0.0.9:8443"}}
	if !reflect.DeepEqual(s.Refused, want) {
		t.Fatalf("refused %+v, want %+v", s.Refused, want)
	}
	recs := f.logs.Records(t, "address refused")
	if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["component"] != "discovery" ||
		recs[0]["reason"] != string(RefusedDuplicate) || recs[0]["kept"] != "10.0.0.9:8443" {
		t.Fatalf("refusal logs %v, want one warning", recs)
	}
	// The node reported at the address has a key of its own: a second
	// "node" key would make the line's JSON name two values (most readers
	// keep the last, so the log would seem to come from alpha).
	if recs[0]["node"] != "self" || recs[0]["reported_node"] != "alpha" {
		t.Fatalf("refusal log names node %v, reported_node %v; want self, alpha", recs[0]["node"], recs[0]["reported_node"])
	}
}

func TestActorIdentityFailureKeepsPeer(t *testing.T) {
	f := newFixture(t)
	f.tr.answer("10.0.0.2:8443", "alpha", "0")
	cfg := f.config()
	cfg.Static = []string{"10.0.0.2:8443"}
	f.start(cfg)
	polltest.Until(t, waitTimeout, "alpha", func() bool { return f.sink.has("alpha", "10.0.0.2:8443") })
	f.waitPolls(1)

	f.tr.down("10.0.0.2:8443")
	f.clock.advance(poll)
	s := f.waitPolls(2)
	if len(s.Peers) != 1 || s.Peers[0].Node != "alpha" {
		t.Fatalf("peers %+v: a peer that is down must stay a peer", s.Peers)
	}
	if len(s.Unreachable) != 1 || s.Unreachable[0].Address != "10.0.0.2:8443" ||
		!strings.Contains(s.Unreachable[0].Error, "connection refused") {
		t.Fatalf("unreachable %+v", s.Unreachable)
	}
	// A known peer is not retried sooner: only the next poll asks it.
	calls := f.tr.count("10.0.0.2:8443")
	f.clock.advance(poll)
	f.waitPolls(3)
	if got := f.tr.count("10.0.0.2:8443"); got != calls+1 {
		t.Fatalf("%d calls in one poll interval, want 1", got-calls)
	}
	if got := f.sink.effects(); !slices.Equal(got, []string{"up alpha 10.0.0.2:8443=0"}) {
		t.Fatalf("effects %q", got)
	}
	f.tr.answer("10.0.0.2:8443", "alpha", "0")
	f.clock.advance(poll)
	if s = f.waitPolls(4); len(s.Unreachable) != 0 {
		t.Fatalf("unreachable %+v after the peer answered", s.Unreachable)
	}
}

func TestActorRetriesUnidentifiedSooner(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.Static = []string{"10.0.0.2:8443"}
	f.start(cfg)
	s := f.waitPolls(1)
	if len(s.Peers) != 0 || len(s.Unreachable) != 1 {
		t.Fatalf("snapshot %+v: want no peer, one unreachable address", s)
	}
	if n := len(f.logs.Records(t, "address does not answer identity calls; retrying")); n != 1 {
		t.Fatalf("%d logs of the unanswered address, want 1", n)
	}

	// Still down at the first retry: asked again, logged no more.
	f.clock.advance(unidentifiedRetry)
	polltest.Until(t, waitTimeout, "a retry", func() bool { return f.tr.count("10.0.0.2:8443") == 2 })
	f.tr.answer("10.0.0.2:8443", "alpha", "0")
	// The retry's result may still be on its way: wait for it to be armed
	// again (one pending wake-up) before moving the clock.
	polltest.Until(t, waitTimeout, "the next retry armed", func() bool { return f.clock.pending() == 1 && f.snapshot().Polls == 1 })
	f.clock.advance(unidentifiedRetry)
	polltest.Until(t, waitTimeout, "alpha found by a retry", func() bool { return f.sink.has("alpha", "10.0.0.2:8443") })
	if s := f.snapshot(); s.Polls != 1 {
		t.Fatalf("%d full polls; the address must have been found by a retry, not a poll", s.Polls)
	}
	if n := len(f.logs.Records(t, "address does not answer identity calls; retrying")); n != 1 {
		t.Fatalf("%d logs of the unanswered address, want 1", n)
	}
}

func TestActorRediscover(t *testing.T) {
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.2",
		"b.example.test. 60 IN A 127.0.0.3")
	f := newFixture(t)
	f.tr.answer("127.0.0.2:8443", "alpha", "0")
	f.tr.answer("127.0.0.3:8443", "beta", "0")
	cfg := f.config()
	cfg.SRV, cfg.DNSServer = srvName, z.Addr
	f.start(cfg)
	f.waitPolls(1)

	// Beta starts and calls us: Rediscover finds it without waiting for
	// the poll interval.
	z.Add(t, srvName+" 60 IN SRV 10 10 8443 b.example.test.")
	f.clock.advance(rediscoverGap)
	f.system.Root.Send(f.pid, Rediscover{})
	polltest.Until(t, waitTimeout, "beta", func() bool { return f.sink.has("beta", "127.0.0.3:8443") })

	// Another right away waits for the gap.
	f.system.Root.Send(f.pid, &Rediscover{})
	f.clock.advance(rediscoverGap)
	f.waitPolls(3)
}

func TestActorRestart(t *testing.T) {
	f := newFixture(t)
	f.tr.answer("10.0.0.2:8443", "alpha", "0")
	f.tr.answer("10.0.0.3:8443", "beta", "0")
	f.tr.answer("10.0.0.4:8443", "gamma", "0")
	cfg := f.config()
	cfg.Static = []string{"10.0.0.2:8443", "10.0.0.3:8443", "10.0.0.4:8443"}
	f.start(cfg)
	polltest.Until(t, waitTimeout, "three peers", func() bool {
		return f.sink.has("alpha", "10.0.0.2:8443") && f.sink.has("beta", "10.0.0.3:8443") && f.sink.has("gamma", "10.0.0.4:8443")
	})
	f.waitPolls(1)

	// While the actor restarts, beta goes down (it must stay a peer) and
	// gamma's address now answers as delta (gamma is gone).
	f.tr.down("10.0.0.3:8443")
	f.tr.answer("10.0.0.4:8443", "delta", "0")
	f.clock.advance(rediscoverGap)
	f.clock.panics.Store(true)
	f.system.Root.Send(f.pid, Rediscover{}) // reads the clock, which panics
	polltest.Until(t, waitTimeout, "delta, and gamma gone", func() bool { return f.sink.has("delta", "10.0.0.4:8443") && f.sink.hasNot("gamma") })

	want := []string{
		"up alpha 10.0.0.2:8443=0", "up beta 10.0.0.3:8443=0", "up gamma 10.0.0.4:8443=0",
		"up delta 10.0.0.4:8443=0", "gone gamma",
	}
	if got := f.sink.effects(); !slices.Equal(got, want) {
		t.Fatalf("effects %q, want %q: a restart reports only changes", got, want)
	}
	// The restarted actor polls on its own; the one before it left no
	// wake-up behind, so ticks do not double.
	s := f.waitPolls(1)
	if len(s.Peers) != 3 {
		t.Fatalf("peers %+v", s.Peers)
	}
	if n := f.clock.pending(); n != 1 {
		t.Fatalf("%d wake-ups armed after a restart, want 1", n)
	}
	calls := f.tr.count("10.0.0.2:8443")
	f.clock.advance(poll)
	f.waitPolls(2)
	if got := f.tr.count("10.0.0.2:8443"); got != calls+1 {
		t.Fatalf("%d calls in one poll interval after a restart, want 1", got-calls)
	}

	// A sink that lost its state asks for it again.
	f.system.Root.Send(f.pid, Resync{})
	polltest.Until(t, waitTimeout, "resync", func() bool { return len(f.sink.effects()) == len(want)+3 })
}

func TestActorStopCancelsCalls(t *testing.T) {
	f := newFixture(t)
	f.tr.hang["10.0.0.2:8443"] = true
	cfg := f.config()
	cfg.Static = []string{"10.0.0.2:8443"}
	cfg.IdentityTimeout = time.Hour
	f.start(cfg)
	select {
	case <-f.tr.hung:
	case <-time.After(waitTimeout):
		t.Fatal("the identity call did not start")
	}
	// Cleanup poisons the actor: it must cancel the hanging call and wait
	// for it (goleak checks that nothing is left).
}

func TestConfigValidate(t *testing.T) {
	err := DefaultConfig().Validate()
	for _, want := range []string{"node", "Transport", "Logger", "Sink"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DefaultConfig().Validate() = %v; want it to name %s", err, want)
		}
	}
	f := newFixture(t)
	cfg := f.config()
	cfg.Sink = actor.NewPID("nonhost", "sink")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := cfg
	bad.Static = []string{"nohost"}
	bad.SRV = "bad name..example"
	bad.DNSServer = "a:b:c"
	bad.APIPort = 0
	bad.PollInterval = 0
	bad.IdentityTimeout = -1
	err = bad.Validate()
	for _, want := range []string{"static peer", "SRV name", "DNS server", "API port", "poll interval", "identity timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to name %s", err, want)
		}
	}
	if _, err := New(bad); err == nil {
		t.Error("New accepted a bad config")
	}
}

func TestActorDNSDownFromStartStillListsStaticPeers(t *testing.T) {
	z := dnstest.Start(t)
	z.SetRcode(dns.RcodeServerFailure)
	f := newFixture(t)
	f.tr.answer("10.0.0.2:8443", "alpha", "0")
	cfg := f.config()
	cfg.SRV, cfg.DNSServer, cfg.Static = srvName, z.Addr, []string{"10.0.0.2:8443"}
	f.start(cfg)
	polltest.Until(t, waitTimeout, "the static peer", func() bool { return f.sink.has("alpha", "10.0.0.2:8443") })
	if s := f.waitPolls(1); !strings.Contains(s.DNSError, "SERVFAIL") {
		t.Fatalf("dns error %q, want SERVFAIL", s.DNSError)
	}
}

func TestActorRealClock(t *testing.T) {
	// The production clock: a record added is found by the polls alone.
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.2",
		"b.example.test. 60 IN A 127.0.0.3")
	f := newFixture(t)
	f.tr.answer("127.0.0.2:8443", "alpha", "0")
	f.tr.answer("127.0.0.3:8443", "beta", "0")
	cfg := f.config()
	cfg.Clock = clock.Real{}
	cfg.PollInterval = 20 * time.Millisecond
	cfg.SRV, cfg.DNSServer = srvName, z.Addr
	f.start(cfg)
	polltest.Until(t, waitTimeout, "alpha", func() bool { return f.sink.has("alpha", "127.0.0.2:8443") })
	z.Add(t, srvName+" 60 IN SRV 10 10 8443 b.example.test.")
	polltest.Until(t, waitTimeout, "beta", func() bool { return f.sink.has("beta", "127.0.0.3:8443") })
	z.Remove(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.")
	polltest.Until(t, waitTimeout, "alpha gone", func() bool { return f.sink.hasNot("alpha") })
}

func TestActorDNSServerDownLoggedOnce(t *testing.T) {
	// A DNS server that is down (its port closed: the exchange is refused)
	// or lost (it never answers: the exchange times out) fails every poll
	// the same way: one warning for the outage, not one a poll. The errors
	// of the exchange name the local port, a new one each poll.
	refused, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.LocalAddr().String()
	refused.Close()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	for _, tc := range []struct{ name, server string }{
		{"refused", refusedAddr},
		{"no answer", silent.LocalAddr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.tr.answer("10.0.0.2:8443", "alpha", "0")
			cfg := f.config()
			cfg.SRV, cfg.DNSServer, cfg.Static = srvName, tc.server, []string{"10.0.0.2:8443"}
			cfg.DNSTimeout = 50 * time.Millisecond
			f.start(cfg)
			f.waitPolls(1)
			for n := uint64(2); n <= 4; n++ {
				f.clock.advance(poll)
				f.waitPolls(n)
			}
			if s := f.snapshot(); s.DNSError == "" || len(s.Peers) != 1 {
				t.Fatalf("dns error %q peers %+v; want an error and the static peer", s.DNSError, s.Peers)
			}
			if recs := f.logs.Records(t, "dns lookup failed; keeping the last address list"); len(recs) != 1 {
				t.Errorf("%d dns failure logs over 4 polls of one outage, want 1: %v", len(recs), recs)
			}
		})
	}
}

func TestActorFailingTargetDoesNotFreezeDiscovery(t *testing.T) {
	// One target's addresses cannot be looked up (its zone's servers fail:
	// SERVFAIL): that target keeps the addresses it had, and the other
	// targets' changes still count. Before, the whole lookup failed and
	// the last list was kept at every poll: a site added was never found,
	// one removed never went, for as long as the target stayed broken.
	const (
		srvA = srvName + " 60 IN SRV 10 10 8443 a.example.test."
		srvB = srvName + " 60 IN SRV 10 10 8443 b.example.test."
		srvC = srvName + " 60 IN SRV 10 10 8443 c.example.test."
		srvD = srvName + " 60 IN SRV 10 10 8443 d.example.test."
	)
	z := dnstest.Start(t, srvA, srvB,
		"a.example.test. 60 IN A 127.0.0.2",
		"b.example.test. 60 IN A 127.0.0.3",
		"c.example.test. 60 IN A 127.0.0.4",
		"d.example.test. 60 IN A 127.0.0.5")
	f := newFixture(t)
	f.tr.answer("127.0.0.2:8443", "alpha", "0")
	f.tr.answer("127.0.0.3:8443", "beta", "0")
	f.tr.answer("127.0.0.4:8443", "gamma", "0")
	f.tr.answer("127.0.0.5:8443", "delta", "0")
	cfg := f.config()
	cfg.SRV, cfg.DNSServer = srvName, z.Addr
	f.start(cfg)
	polltest.Until(t, waitTimeout, "alpha and beta", func() bool {
		return f.sink.has("alpha", "127.0.0.2:8443") && f.sink.has("beta", "127.0.0.3:8443")
	})
	f.waitPolls(1)

	// beta's target breaks; gamma is added, alpha removed; delta is added
	// broken from the start (never looked up: it contributes nothing yet).
	z.SetRcodeFor("b.example.test.", 0, dns.RcodeServerFailure)
	z.SetRcodeFor("d.example.test.", 0, dns.RcodeServerFailure)
	z.Add(t, srvC)
	z.Add(t, srvD)
	z.Remove(t, srvA)
	f.clock.advance(poll)
	polltest.Until(t, waitTimeout, "gamma found and alpha gone while beta's target fails", func() bool {
		return f.sink.has("gamma", "127.0.0.4:8443") && f.sink.hasNot("alpha")
	})
	s := f.waitPolls(2)
	if !f.sink.has("beta", "127.0.0.3:8443") || !f.sink.hasNot("delta") {
		t.Fatalf("peers %+v: beta must keep its last address, delta (never looked up) is not one yet", s.Peers)
	}
	if !strings.Contains(s.DNSError, "b.example.test") || !strings.Contains(s.DNSError, "SERVFAIL") {
		t.Fatalf("dns error %q, want beta's target failure", s.DNSError)
	}
	f.clock.advance(poll)
	f.waitPolls(3)
	if recs := f.logs.Records(t, "dns lookup of a target failed; keeping its last addresses"); len(recs) != 1 {
		t.Errorf("%d target failure logs over 2 polls, want 1: %v", len(recs), recs)
	}

	// Fixed: delta is found, and the recovery is logged.
	z.SetRcodeFor("b.example.test.", 0, dns.RcodeSuccess)
	z.SetRcodeFor("d.example.test.", 0, dns.RcodeSuccess)
	f.clock.advance(poll)
	polltest.Until(t, waitTimeout, "delta", func() bool { return f.sink.has("delta", "127.0.0.5:8443") })
	if s := f.waitPolls(4); s.DNSError != "" {
		t.Fatalf("dns error %q after the targets recovered", s.DNSError)
	}
	if n := len(f.logs.Records(t, "dns lookup recovered")); n != 1 {
		t.Errorf("%d dns recovery logs, want 1", n)
	}
	want := []string{"up alpha 127.0.0.2:8443=0", "up beta 127.0.0.3:8443=0", "gone alpha", "up gamma 127.0.0.4:8443=0",
		"up delta 127.0.0.5:8443=0"}
	if got := f.sink.effects(); !slices.Equal(got, want) {
		t.Fatalf("effects %q, want %q", got, want)
	}
}
