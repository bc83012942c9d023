package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// The ring scenario of issue 5 with the real binary. Site a is three
// instances (a-0, a-1, a-2) of one --name on one Postgres schema, role auto
// (the holder of the advisory lock is the master), cluster c1, region r1,
// publishing every second; site b is one instance on its embedded store. All
// of them federate with mutual TLS (certificates of `switchboard certs
// init --nodes a,b`: a's instances share a's certificate); b lists the three
// a instances as its peers, and they are one peer to it. Each site serves a
// webhook frontend (fe-a, fe-b) whose endpoint is an HTTP server in this
// test; every site routes 1 -> fe-a and 2 -> fe-b.
//
// Clients submit continuously to every a instance messages for fe-b and for
// fe-a, and to b messages for fe-a (a submit that finds its a instance down
// is repeated with the same id at the next one: the site shares its store).
// Meanwhile the master is killed with SIGKILL: another instance takes the
// lock and the ring is whole again (coverage 1, the two live members); the
// killed instance comes back as a slave; then a slave is killed, the ring
// is whole again without it, and it comes back too. The failover times are
// measured and logged (not asserted tightly: a generous bound only).
//
// Before the faults, the binary's refusals: a slave of another region and
// one of another cluster are refused by the master and exit non-zero naming
// the refusal code; a slave whose master cannot be reached exits non-zero
// after its --ring-reconnect-max-attempts.
//
// The checker, once traffic stopped and everything drained:
//   - every accepted message was POSTed with status 200 to the frontend its
//     route names, and never to the other site's frontend; a raw duplicate
//     POST of a message is acceptable only because the frontend sees the
//     same Idempotency-Key (the message id, checked on every POST) and so
//     can drop it: a kill -9 between the frontend's answer and the commit of
//     the outcome makes the next owner deliver it again. Duplicates are
//     counted and logged; two POSTs of one id in flight at the same time
//     (two owners at once) are an error;
//   - its final state at its origin is delivered, with one delivered
//     transition, and so at its destination site; an a -> a message is
//     unknown to b;
//   - no log of any run of the site's processes shows a panic or a fatal
//     failure, and they stop cleanly at the end.

const (
	ringPublish  = time.Second
	ringFailover = 20 * time.Second // generous: the machines are noisy
)

var ringAIDs = []string{"a-0", "a-1", "a-2"}

// ringHooks is what the webhook frontends saw.
type ringHooks struct {
	mu sync.Mutex
	// posts: the times of the POSTs answered 200, by frontend and id.
	posts map[fedKey][]time.Time
	// inflight: POSTs of an id being handled now; overlaps: ids POSTed
	// twice at once.
	inflight map[string]int
	overlaps []string
	// badKey: POSTs whose Idempotency-Key is not the message id;
	// unexpected: ids no client sent.
	badKey, unexpected []string
}

type ringEvent struct {
	at   time.Time
	what string
}

type ringCluster struct {
	t       *testing.T
	bin     string
	dir     string
	certDir string
	dsn     string
	a       []*e2eNode // a-0, a-1, a-2
	b       *e2eNode
	aClient *http.Client
	hooks   *ringHooks
	// events: the kills and restarts, to place the duplicates.
	events []ringEvent

	mu       sync.Mutex
	sent     map[string]pair
	accepted map[string]pair
	// refusedRoutes: submits answered no_route after the warm-up.
	refusedRoutes []string
}

func TestRingE2EFailover(t *testing.T) {
	c := startRingCluster(t)

	master, _, _ := c.waitRing(time.Now(), c.a, ringAIDs...)
	t.Logf("ring formed: master %s, members %v", master.InstanceID, ringAIDs)
	c.waitPeers()
	c.warm()

	c.checkRefusals(master)

	// Continuous traffic from here to the end of the faults.
	stop := c.traffic()

	time.Sleep(2 * time.Second)
	// 1. kill -9 the master.
	mi := slices.Index(ringAIDs, master.InstanceID)
	c.killA(mi)
	live := c.liveExcept(mi)
	st, took, lockTook := c.waitRing(c.lastEvent(), live, c.idsOf(live)...)
	if st.InstanceID == master.InstanceID {
		t.Fatalf("%s is still the master after it was killed", st.InstanceID)
	}
	t.Logf("FAILOVER master: killed %s; %s reported role master (took the lock) after %v; the ring was whole again (coverage %v, members %v, epoch %d) after %v (publish interval %v)",
		master.InstanceID, st.InstanceID, lockTook.Round(time.Millisecond), st.Coverage, c.idsOf(live), st.Epoch, took.Round(time.Millisecond), ringPublish)
	master = st

	// The killed instance comes back: a slave now.
	c.restartA(mi)
	st, took, _ = c.waitRing(c.lastEvent(), c.a, ringAIDs...)
	if st.InstanceID != master.InstanceID {
		t.Errorf("the master changed from %s to %s when %s came back", master.InstanceID, st.InstanceID, ringAIDs[mi])
	}
	if rs := c.ringStatus(c.a[mi]); rs.Role != messages.RoleSlave {
		t.Errorf("%s came back as %s, want slave", ringAIDs[mi], rs.Role)
	}
	t.Logf("REJOIN: %s back as a slave, ring whole with 3 members (epoch %d) %v after its restart was ready", ringAIDs[mi], st.Epoch, took.Round(time.Millisecond))

	time.Sleep(time.Second)
	// 2. kill -9 a slave.
	si := -1
	for i, id := range ringAIDs {
		if id != master.InstanceID && i != mi {
			si = i
			break
		}
	}
	c.killA(si)
	live = c.liveExcept(si)
	st, took, _ = c.waitRing(c.lastEvent(), live, c.idsOf(live)...)
	if st.InstanceID != master.InstanceID {
		t.Errorf("the master changed from %s to %s when slave %s was killed", master.InstanceID, st.InstanceID, ringAIDs[si])
	}
	t.Logf("FAILOVER slave: killed %s; ring whole again without it (coverage %v, members %v, epoch %d) after %v (publish interval %v)",
		ringAIDs[si], st.Coverage, c.idsOf(live), st.Epoch, took.Round(time.Millisecond), ringPublish)

	c.restartA(si)
	st, took, _ = c.waitRing(c.lastEvent(), c.a, ringAIDs...)
	t.Logf("REJOIN: %s back, ring whole with 3 members (epoch %d) %v after its restart was ready", ringAIDs[si], st.Epoch, took.Round(time.Millisecond))

	time.Sleep(2 * time.Second)
	stop()
	c.finish()
}

func startRingCluster(t *testing.T) *ringCluster {
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, "a,b")
	client := func(name string) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name}, MaxIdleConnsPerHost: 16}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}

	c := &ringCluster{
		t: t, bin: bin, dir: dir, certDir: certDir, dsn: pgtest.DSN(t),
		hooks: &ringHooks{posts: map[fedKey][]time.Time{}, inflight: map[string]int{}},
		sent:  map[string]pair{}, accepted: map[string]pair{},
		aClient: client("a"),
	}
	hook := httptest.NewServer(http.HandlerFunc(c.hook))
	t.Cleanup(hook.Close)

	aAddrs := make([]string, len(ringAIDs))
	for i := range ringAIDs {
		aAddrs[i] = nodetest.FreeAddr(t)
	}
	bAddr := nodetest.FreeAddr(t)
	common := func(site string) []string {
		return []string{
			"--metrics-listen", "127.0.0.1:0",
			"--tls-ca", filepath.Join(certDir, "ca.pem"),
			"--tls-cert", filepath.Join(certDir, site+".pem"), "--tls-key", filepath.Join(certDir, site+".key"),
			"--route", "1=" + frontendOf("a"), "--route", "2=" + frontendOf("b"),
			"--frontend", frontendOf(site) + "=" + hook.URL + "/" + frontendOf(site),
			"--health-interval", "200ms", "--registry-interval", "200ms", "--dns-poll-interval", "200ms",
			"--forward-retry-interval", "200ms", "--forward-max-retries", "1000",
			"--http-timeout", "2s", "--webhook-timeout", "3s",
			"--delivery-retry-min", "50ms", "--delivery-retry-max", "200ms", "--delivery-max-attempts", "50",
			"--log-format", "json", "--log-level", "info",
		}
	}
	for i, id := range ringAIDs {
		c.a = append(c.a, newE2ENode(t, bin, aAddrs[i], c.aClient, append([]string{"run",
			"--name", "a", "--instance-id", id,
			"--postgres", c.dsn, "--data-dir", filepath.Join(dir, id),
			"--listen", aAddrs[i],
			"--federation", "--peers", bAddr,
			"--cluster", "c1", "--region", "r1",
			"--ring-publish-interval", ringPublish.String(),
			"--ring-reconnect-backoff-min", "100ms", "--ring-reconnect-backoff-max", "500ms",
			// A give-up span (at least 50 s) longer than any graceful
			// stop of the master (see the bus site test).
			"--ring-reconnect-max-attempts", "200",
		}, common("a")...)...))
	}
	c.b = newE2ENode(t, bin, bAddr, client("b"), append([]string{"run",
		"--name", "b", "--instance-id", "b-0",
		"--data-dir", filepath.Join(dir, "b"),
		"--listen", bAddr,
		"--federation", "--peers", strings.Join(aAddrs, ","),
	}, common("b")...)...)
	t.Cleanup(func() {
		// On failure the whole logs are kept in a directory of their own
		// (named in the output), and their tails are shown.
		var keep string
		if t.Failed() {
			keep, _ = os.MkdirTemp("", "ring-e2e-logs-")
			t.Logf("the logs of every run are in %s", keep)
		}
		for _, n := range c.nodes() {
			if n.Started() {
				n.End()
			}
			if t.Failed() {
				for i, l := range n.RunLogs() {
					name := c.nodeName(n)
					t.Logf("--- logs of %s, run %d ---\n%s", name, i+1, tail(l, 6000))
					if keep != "" {
						_ = os.WriteFile(filepath.Join(keep, fmt.Sprintf("%s.run%d.log", name, i+1)), []byte(l), 0o644)
					}
				}
			}
		}
	})
	// a-0 first: it takes the lock.
	for _, n := range c.a {
		n.Start()
	}
	c.b.Start()
	return c
}

func (c *ringCluster) nodes() []*e2eNode { return append(slices.Clone(c.a), c.b) }

func (c *ringCluster) nodeName(n *e2eNode) string {
	if i := slices.Index(c.a, n); i >= 0 {
		return ringAIDs[i]
	}
	return "b-0"
}

// hook is both webhook frontends: /fe-a and /fe-b.
func (c *ringCluster) hook(w http.ResponseWriter, r *http.Request) {
	fe := strings.TrimPrefix(r.URL.Path, "/")
	if fe != frontendOf("a") && fe != frontendOf("b") {
		w.WriteHeader(404)
		return
	}
	var m messages.Outgoing
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(400)
		return
	}
	h := c.hooks
	h.mu.Lock()
	if key := r.Header.Get("Idempotency-Key"); key != m.ID {
		h.badKey = append(h.badKey, fmt.Sprintf("%s: id %s, Idempotency-Key %q", fe, m.ID, key))
	}
	h.inflight[m.ID]++
	if h.inflight[m.ID] > 1 {
		h.overlaps = append(h.overlaps, fe+":"+m.ID)
	}
	h.mu.Unlock()
	// A little time in flight, so that two owners at once would overlap.
	time.Sleep(5 * time.Millisecond)
	// Some first attempts are refused, so that retries happen too.
	refuse := m.Attempt == 1 && messages.TokenOf(m.ID)%7 == 0
	h.mu.Lock()
	h.inflight[m.ID]--
	if !refuse {
		c.mu.Lock()
		if _, ok := c.sent[m.ID]; !ok {
			h.unexpected = append(h.unexpected, fe+":"+m.ID)
		}
		c.mu.Unlock()
		k := fedKey{fe, m.ID}
		h.posts[k] = append(h.posts[k], time.Now())
	}
	h.mu.Unlock()
	if refuse {
		w.WriteHeader(503)
		return
	}
	w.WriteHeader(200)
}

// idsOf names the a instances ns.
func (c *ringCluster) idsOf(ns []*e2eNode) []string {
	var ids []string
	for _, n := range ns {
		ids = append(ids, ringAIDs[slices.Index(c.a, n)])
	}
	return ids
}

func (c *ringCluster) liveExcept(i int) []*e2eNode {
	var out []*e2eNode
	for j, n := range c.a {
		if j != i {
			out = append(out, n)
		}
	}
	return out
}

func (c *ringCluster) killA(i int) {
	c.t.Helper()
	c.a[i].Kill()
	c.mu.Lock()
	c.events = append(c.events, ringEvent{time.Now(), "kill -9 " + ringAIDs[i]})
	c.mu.Unlock()
	c.t.Logf("kill -9 %s", ringAIDs[i])
}

// restartA starts a killed instance again (same port, flags and
// database) and waits until it is ready.
func (c *ringCluster) restartA(i int) {
	c.t.Helper()
	c.a[i].Start()
	c.mu.Lock()
	c.events = append(c.events, ringEvent{time.Now(), "restart " + ringAIDs[i]})
	c.mu.Unlock()
}

func (c *ringCluster) lastEvent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events[len(c.events)-1].at
}

func (c *ringCluster) ringStatus(n *e2eNode) messages.RingStatus {
	c.t.Helper()
	var st messages.RingStatus
	if status, err := n.Call("GET", "/api/ring/status", nil, &st); err != nil || status != 200 {
		c.t.Fatalf("%s: GET /api/ring/status: %d %v", n.base(), status, err)
	}
	return st
}

// waitRing waits until one of live is the master, with coverage 1 and
// exactly the members named, and every other one of live is its slave
// holding the same epoch. It returns the master's status and the time since
// from, and the time from from until one of live first reported role master.
func (c *ringCluster) waitRing(from time.Time, live []*e2eNode, members ...string) (messages.RingStatus, time.Duration, time.Duration) {
	c.t.Helper()
	want := slices.Sorted(slices.Values(members))
	var master messages.RingStatus
	var lockTook time.Duration
	polltest.Eventually(c.t, ringFailover, func() error {
		var sts []messages.RingStatus
		masters := 0
		for _, n := range live {
			var st messages.RingStatus
			status, err := n.Call("GET", "/api/ring/status", nil, &st)
			if err != nil || status != 200 {
				return fmt.Errorf("%s: GET /api/ring/status: %d %v", n.base(), status, err)
			}
			sts = append(sts, st)
			if st.Role == messages.RoleMaster {
				masters++
				master = st
			}
		}
		if masters != 1 {
			return fmt.Errorf("%d masters: %+v", masters, sts)
		}
		if lockTook == 0 {
			lockTook = time.Since(from)
		}
		var ids []string
		for _, m := range master.Members {
			ids = append(ids, m.InstanceID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) || master.Coverage != 1 {
			return fmt.Errorf("master %s: members %v, coverage %v (epoch %d); want members %v, coverage 1", master.InstanceID, ids, master.Coverage, master.Epoch, want)
		}
		for _, st := range sts {
			if st.Epoch != master.Epoch || st.Master != master.InstanceID {
				return fmt.Errorf("%s (%s) holds epoch %d of master %q; the master %s is at %d", st.InstanceID, st.Role, st.Epoch, st.Master, master.InstanceID, master.Epoch)
			}
		}
		return nil
	})
	return master, time.Since(from), lockTook
}

// waitPeers waits until b sees a as one healthy peer with three instances
// and every a instance sees b healthy.
func (c *ringCluster) waitPeers() {
	c.t.Helper()
	check := func(n *e2eNode, peerName string, instances int) error {
		var peers []messages.PeerInfo
		if status, err := n.Call("GET", "/api/peers", nil, &peers); err != nil || status != 200 {
			return fmt.Errorf("%s: GET /api/peers: %d %v", n.base(), status, err)
		}
		for _, p := range peers {
			if p.Node == peerName {
				if p.State != messages.PeerHealthy || (instances > 0 && len(p.Instances) != instances) {
					return fmt.Errorf("%s sees %s as %s with %d instances", n.base(), peerName, p.State, len(p.Instances))
				}
				return nil
			}
		}
		return fmt.Errorf("%s does not list %s: %+v", n.base(), peerName, peers)
	}
	polltest.Eventually(c.t, 30*time.Second, func() error {
		if len(mustPeers(c.b)) != 1 {
			return fmt.Errorf("b lists %d peers, want a only", len(mustPeers(c.b)))
		}
		errs := []error{check(c.b, "a", len(ringAIDs))}
		for _, n := range c.a {
			errs = append(errs, check(n, "b", 0))
		}
		return errors.Join(errs...)
	})
}

func mustPeers(n *e2eNode) []messages.PeerInfo {
	var peers []messages.PeerInfo
	_, _ = n.Call("GET", "/api/peers", nil, &peers)
	return peers
}

// The pairs of the traffic: origin site, frontend site.
var ringPairs = []pair{{"a", "b"}, {"a", "a"}, {"b", "a"}}

// warm sends a few messages of every pair through every instance (a
// route to a peer's frontend is taken once the registry has it) and waits
// for them.
func (c *ringCluster) warm() {
	c.t.Helper()
	var ids []string
	for _, p := range ringPairs {
		for i := range len(ringAIDs) {
			id := fmt.Sprintf("warm.%s-%s.%d", p.origin, frontendOf(p.site), i)
			if _, err := c.submit(p, id, i, true); err != nil {
				c.t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	c.waitDelivered(30*time.Second, ids)
}

// traffic starts clients that submit messages of every pair until the
// returned stop is called.
func (c *ringCluster) traffic() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(n.Add(1))
				p := ringPairs[i%len(ringPairs)]
				id := fmt.Sprintf("t.%s-%s.%05d", p.origin, frontendOf(p.site), i)
				if _, err := c.submit(p, id, i/len(ringPairs), false); err != nil {
					c.t.Error(err)
					return
				}
				time.Sleep(25 * time.Millisecond)
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
		c.mu.Lock()
		c.t.Logf("traffic stopped: %d messages accepted", len(c.accepted))
		c.mu.Unlock()
	}
}

// submit sends one message of p with id, to the a instance start (mod 3)
// when the origin is a, and repeats it with the same id at the next a
// instance while one is down. A no_route answer is repeated only during
// the warm-up (warm).
func (c *ringCluster) submit(p pair, id string, start int, warm bool) (messages.State, error) {
	body := map[string]string{
		"id": id, "source_msisdn": "4455" + prefixOf(p.origin),
		"destination_msisdn": fmt.Sprintf("%s555%05d", prefixOf(p.site), start%100000),
		"message_body":       fmt.Sprintf("%s from %s to %s", id, p.origin, frontendOf(p.site)),
	}
	c.mu.Lock()
	c.sent[id] = p
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; ; try++ {
		n := c.b
		if p.origin == "a" {
			n = c.a[(start+try)%len(c.a)]
		}
		var r struct{ State messages.State }
		status, err := n.Call("POST", "/api/messages", body, &r)
		switch {
		case err == nil && (status == 202 || status == 200):
			c.mu.Lock()
			c.accepted[id] = p
			c.mu.Unlock()
			return r.State, nil
		case err == nil && status == 422 && !warm:
			c.mu.Lock()
			when := "before any fault"
			if len(c.events) > 0 {
				e := c.events[len(c.events)-1]
				when = fmt.Sprintf("%v after %s", time.Since(e.at).Round(time.Millisecond), e.what)
			}
			c.refusedRoutes = append(c.refusedRoutes, fmt.Sprintf("%s at %s %s", id, n.base(), when))
			c.mu.Unlock()
			return "", nil
		case err == nil && status != 503 && status != 429 && status != 422:
			return "", fmt.Errorf("%s: submit %s: status %d", n.base(), id, status)
		case time.Now().After(deadline):
			return "", fmt.Errorf("%s: submit %s: not accepted within 30s: %d %v", n.base(), id, status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// siteNode is a live instance of site.
func (c *ringCluster) siteNode(site string) *e2eNode {
	if site == "b" {
		return c.b
	}
	for _, n := range c.a {
		if n.Started() {
			select {
			case <-n.Exited():
				continue
			default:
				return n
			}
		}
	}
	c.t.Fatal("no live instance of a")
	return nil
}

func (c *ringCluster) message(site, id string) (messages.Message, int, error) {
	var m messages.Message
	status, err := c.siteNode(site).Call("GET", "/api/messages/"+id, nil, &m)
	return m, status, err
}

// waitDelivered waits until each of ids is delivered at its origin.
func (c *ringCluster) waitDelivered(timeout time.Duration, ids []string) {
	c.t.Helper()
	polltest.Eventually(c.t, timeout, func() error {
		for len(ids) > 0 {
			id := ids[0]
			c.mu.Lock()
			origin := c.sent[id].origin
			c.mu.Unlock()
			m, status, err := c.message(origin, id)
			if err != nil || status != 200 {
				return fmt.Errorf("GET %s at %s: %d %v", id, origin, status, err)
			}
			if m.State != messages.StateDelivered {
				return fmt.Errorf("%s is %s at %s (%d not delivered yet)", id, m.State, origin, len(ids))
			}
			ids = ids[1:]
		}
		return nil
	})
}

// checkRefusals starts foreign instances of site a as slaves: another
// region, another cluster (refused by the master), and one whose master
// cannot be reached (it gives up). Each must exit non-zero within seconds,
// naming why; the ring is unchanged.
func (c *ringCluster) checkRefusals(master messages.RingStatus) {
	t := c.t
	t.Helper()
	type intruder struct {
		id   string
		args []string
		want string
	}
	intruders := []intruder{
		{"a-region", []string{"--cluster", "c1", "--region", "r2"}, messages.CodeRingRegion},
		{"a-cluster", []string{"--cluster", "c2", "--region", "r1"}, messages.CodeRingCluster},
		{"a-lonely", []string{"--cluster", "c1", "--region", "r1", "--ring-master", "https://" + nodetest.FreeAddr(t),
			"--ring-reconnect-max-attempts", "2"}, "unreachable after 2 attempts"},
	}
	var wg sync.WaitGroup
	for _, in := range intruders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"run",
				"--name", "a", "--instance-id", in.id, "--ring-role", "slave",
				"--postgres", c.dsn, "--data-dir", filepath.Join(c.dir, in.id),
				"--listen", "127.0.0.1:0", "--metrics-listen", "",
				"--tls-ca", filepath.Join(c.certDir, "ca.pem"),
				"--tls-cert", filepath.Join(c.certDir, "a.pem"), "--tls-key", filepath.Join(c.certDir, "a.key"),
				"--ring-publish-interval", ringPublish.String(),
				"--ring-reconnect-backoff-min", "100ms", "--ring-reconnect-backoff-max", "500ms",
				"--log-format", "json",
			}, in.args...)
			var stderr bytes.Buffer
			cmd := exec.Command(c.bin, args...)
			cmd.Stderr = &stderr // read once the process is gone
			cmd.Env = nodetest.Env()
			began := time.Now()
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Errorf("%s (%v) still running 30s after its start", in.id, in.args)
				return
			}
			took := time.Since(began).Round(time.Millisecond)
			var ee *exec.ExitError
			logs := stderr.String()
			switch {
			case !errors.As(err, &ee) || ee.ExitCode() == 0:
				t.Errorf("%s (%v) exited with %v after %v, want a non-zero exit\n%s", in.id, in.args, err, took, tail(logs, 3000))
			case !strings.Contains(logs, in.want):
				t.Errorf("%s (%v) exited %d after %v without naming %q\n%s", in.id, in.args, ee.ExitCode(), took, in.want, tail(logs, 3000))
			default:
				t.Logf("REFUSAL: %s (%v) exited %d after %v naming %q", in.id, in.args, ee.ExitCode(), took, in.want)
			}
		}()
	}
	wg.Wait()
	// The master still leads the same three members.
	st, _, _ := c.waitRing(time.Now(), c.a, ringAIDs...)
	if st.InstanceID != master.InstanceID {
		t.Errorf("the master changed from %s to %s during the refusals", master.InstanceID, st.InstanceID)
	}
}

// finish waits until everything drained, checks every accepted message at
// both sites and at the frontends, stops the processes gracefully and
// checks their logs.
func (c *ringCluster) finish() {
	t := c.t
	t.Helper()
	c.mu.Lock()
	accepted := make(map[string]pair, len(c.accepted))
	for id, p := range c.accepted {
		accepted[id] = p
	}
	refusedRoutes := slices.Clone(c.refusedRoutes)
	events := slices.Clone(c.events)
	c.mu.Unlock()
	if len(refusedRoutes) > 0 {
		// Every route is in place from the warm-up on: a no_route refusal
		// means the submitting site lost a peer's frontend from its view.
		t.Errorf("%d submits of routable messages answered 422 no_route after the warm-up: %v", len(refusedRoutes), refusedRoutes[:min(len(refusedRoutes), 20)])
	}

	// Every accepted message reaches its frontend.
	polltest.Eventually(t, 60*time.Second, func() error {
		c.hooks.mu.Lock()
		defer c.hooks.mu.Unlock()
		missing := 0
		for id, p := range accepted {
			if len(c.hooks.posts[fedKey{frontendOf(p.site), id}]) == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d accepted messages not delivered at their frontend yet", missing, len(accepted))
		}
		return nil
	})
	c.waitDelivered(60*time.Second, keys(accepted))

	// The stores: delivered at the origin and at the destination site
	// (once), unknown to b when a -> a.
	checkEach(t, accepted, c.checkStores)

	// The frontends.
	h := c.hooks
	h.mu.Lock()
	for _, l := range [][]string{h.badKey, h.unexpected, h.overlaps} {
		if len(l) > 0 {
			t.Errorf("frontends: %d bad POSTs: %v", len(l), l[:min(len(l), 20)])
		}
	}
	byPair := map[pair]int{}
	// Each repeated POST is placed after the last kill or restart before
	// it (or before the first, "-").
	dups, after := 0, map[string]int{}
	for id, p := range accepted {
		byPair[p]++
		for _, s := range []string{"a", "b"} {
			if s != p.site && len(h.posts[fedKey{frontendOf(s), id}]) > 0 {
				t.Errorf("%s (from %s for %s) was misrouted to %s %d times", id, p.origin, frontendOf(p.site), frontendOf(s), len(h.posts[fedKey{frontendOf(s), id}]))
			}
		}
		posts := h.posts[fedKey{frontendOf(p.site), id}]
		if len(posts) > 1 {
			// Acceptable only because every POST carried the id as
			// Idempotency-Key (badKey is empty): the frontend drops it.
			dups += len(posts) - 1
			for _, at := range posts[1:] {
				last := "-"
				for _, e := range events {
					if e.at.Before(at) {
						last = e.what
					}
				}
				after[last]++
			}
		}
	}
	h.mu.Unlock()
	t.Logf("CHECKER: %d messages accepted (%v), each delivered at its frontend, none lost or misrouted; %d raw duplicate POSTs (same Idempotency-Key), placed after: %v",
		len(accepted), byPair, dups, after)

	// Stopped together: a graceful stop may wait for the others.
	for _, n := range c.nodes() {
		select {
		case <-n.Exited():
			t.Errorf("%s exited before the end: %v\n%s", n.base(), n.ProcessState(), tail(n.Logs(), 3000))
		default:
			n.Interrupt()
		}
	}
	for _, n := range c.nodes() {
		n.WaitStopped()
	}
	for _, n := range c.nodes() {
		for _, lg := range n.RunLogs() {
			checkLogs(t, lg)
			for _, line := range strings.Split(lg, "\n") {
				if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.Contains(line, "DATA RACE") {
					t.Errorf("%s: %s", n.base(), line)
				}
			}
		}
	}
}

func (c *ringCluster) checkStores(id string, p pair) error {
	return checkStored(id, p, []string{"a", "b"}, c.message)
}

// TestRingSlaveWithoutCAExits2: an auto instance that finds another
// instance leading its site and has neither --tls-ca nor
// --insecure-skip-verify cannot be its slave: it stops with exit 2, the
// configuration error systemd's unit does not restart, naming --tls-ca.
// It exited 1 ("node cannot go on"), restarted every few seconds to fail
// the same way.
func TestRingSlaveWithoutCAExits2(t *testing.T) {
	bin := nodetest.Binary(t)
	dir, dsn := t.TempDir(), pgtest.DSN(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(tr.CloseIdleConnections)
	addr := nodetest.FreeAddr(t)
	master := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, "run",
		"--name", "a", "--instance-id", "a-0", "--ring-role", "master", "--postgres", dsn, "--data-dir", filepath.Join(dir, "a-0"),
		"--listen", addr, "--metrics-listen", "", "--log-format", "json")
	master.Start()
	t.Cleanup(master.End)
	polltest.Until(t, 30*time.Second, "a-0 leads the ring", func() bool {
		var st messages.RingStatus
		status, err := master.Call("GET", "/api/ring/status", nil, &st)
		return err == nil && status == 200 && st.Role == messages.RoleMaster
	})

	code, logs := runToExit(t, bin, 60*time.Second, "a-1 still runs 60s after its start",
		"run", "--name", "a", "--instance-id", "a-1", "--postgres", dsn, "--data-dir", filepath.Join(dir, "a-1"),
		"--listen", nodetest.FreeAddr(t), "--metrics-listen", "", "--log-format", "json")
	if code != 2 {
		t.Errorf("a-1 exited %d, want 2\n%s", code, tail(logs, 3000))
	}
	if want := "--tls-ca: this instance is a ring slave and has no way to reach its master"; !strings.Contains(logs, want) {
		t.Errorf("a-1's log does not say %q\n%s", want, tail(logs, 3000))
	}
}
