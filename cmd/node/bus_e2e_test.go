package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// The delivery bus with the real binary (issue 14). One site of three
// instances (s-0, s-1, s-2) on one Postgres schema, with --nats-url naming
// a JetStream server this test runs in its own process (bustest: a
// temporary store, a port of its own; never the machine's shared one),
// serves a pull frontend (polled at every instance by a consumer of its
// own, which acks each offer as delivered) and a webhook frontend (an HTTP
// server here; some first attempts are answered 503, so retries go
// through the bus's delayed redelivery). 16 clients submit 2,000 messages
// with their own ids to the instances in turn (a submit that finds its
// instance down goes to the next with the same id). Mid-load s-1 is killed
// with SIGKILL; later NATS itself is stopped and started again on its
// port and store (submits go on meanwhile: the outbox holds the work, the
// workers deliver from the store, the relay catches up); then s-1 comes
// back. The same flow runs without --nats-url.
//
// Checked once everything is delivered:
//   - every accepted message is delivered, with one delivered transition;
//   - pull: each id's ack is recorded once, and no poll sent after that
//     ack was answered offers it again;
//   - webhook: an id is completed (answered 200) once, or twice when the
//     first was before the kill (the killed process got the answer and
//     died before its commit; the frontend has the Idempotency-Key to
//     drop it);
//   - no log shows a panic or a fatal failure, and the live instances
//     stop cleanly.
const (
	busE2EMessages = 2000
	busE2EClients  = 16
	busE2EKill     = 500  // accepted messages before s-1 is killed
	busE2ERestart  = 1100 // accepted messages before NATS restarts
)

func TestBusE2ESite(t *testing.T) {
	nats := bustest.Start(t)
	runBusSite(t, nats.URL(), nats.Restart)
	if shared := bustest.Shared(); shared != "" {
		// The machine's server: a stream of this run's own, never
		// restarted (runBusSite deletes nothing else).
		t.Run("shared", func(t *testing.T) { runBusSite(t, shared, nil) })
	} else {
		t.Logf("%s is unset: ran against the test's own JetStream server only", bustest.EnvNATS)
	}
}

func TestBusE2ESiteWithoutBus(t *testing.T) {
	runBusSite(t, "", nil)
}

// busSite is the running site of a scenario.
type busSite struct {
	t     *testing.T
	nodes []*e2eNode
	l     *ledger
	sent  sync.Map // id -> true once a client has sent it
	// killedAt is when s-1 was killed.
	killedAt time.Time
}

// runBusSite runs the scenario; natsURL "" runs it without the bus;
// restartNATS, when set, restarts the bus's server mid-load.
func runBusSite(t *testing.T, natsURL string, restartNATS func()) {
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, "site")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "site"}, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	s := &busSite{t: t, l: &ledger{offers: map[string][]int64{}, applied: map[string][]int64{}, lostAcks: map[string][]int64{}}}
	hooked := map[string][]time.Time{} // id -> when each POST was answered 200
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m messages.Outgoing
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m.ID != r.Header.Get("Idempotency-Key") {
			w.WriteHeader(400)
			return
		}
		if m.Attempt == 1 && messages.TokenOf(m.ID)%7 == 0 {
			w.WriteHeader(503)
			return
		}
		s.l.mu.Lock()
		if _, ok := s.sent.Load(m.ID); !ok {
			s.l.unexpected = append(s.l.unexpected, m.ID)
		}
		hooked[m.ID] = append(hooked[m.ID], time.Now())
		s.l.mu.Unlock()
		w.WriteHeader(200)
	}))
	t.Cleanup(hook.Close)

	dsn := pgtest.DSN(t)
	stream := fmt.Sprintf("SWITCHBOARD_e2e_%d", time.Now().UnixNano())
	if natsURL != "" {
		t.Cleanup(func() { deleteStream(t, natsURL, stream) })
	}
	var metrics []string
	for i := range 3 {
		addr := nodetest.FreeAddr(t)
		metrics = append(metrics, nodetest.FreeAddr(t))
		args := []string{"run",
			"--name", "site", "--instance-id", fmt.Sprintf("s-%d", i),
			"--postgres", dsn, "--data-dir", filepath.Join(dir, fmt.Sprint(i)),
			"--listen", addr, "--metrics-listen", metrics[i],
			"--tls-ca", filepath.Join(certDir, "ca.pem"),
			"--tls-cert", filepath.Join(certDir, "site.pem"), "--tls-key", filepath.Join(certDir, "site.key"),
			// Short reconnect waits, but a give-up span (200 attempts, at
			// least 50 s) longer than any graceful stop of the master: the
			// test stops s-0 first, and a loaded machine once took 3 s to
			// stop it while ten attempts of at most 500 ms ran out on both
			// slaves, which then exited non-zero.
			"--ring-publish-interval", "1s", "--ring-reconnect-backoff-min", "100ms", "--ring-reconnect-backoff-max", "500ms",
			"--ring-reconnect-max-attempts", "200",
			"--delivery-retry-min", "50ms", "--delivery-retry-max", "200ms",
			"--delivery-max-attempts", "50", "--webhook-timeout", "3s",
			"--route", "33=hookfe", "--route", "44=pullfe",
			"--log-format", "json", "--log-level", "info",
		}
		if natsURL != "" {
			args = append(args, "--nats-url", natsURL, "--nats-stream", stream)
		}
		s.nodes = append(s.nodes, newE2ENode(t, bin, addr, client, args...))
	}
	// One URL for every instance: the frontend is the site's (a process
	// registering another would replace every instance's worker).
	for _, n := range s.nodes {
		n.Args = append(n.Args, "--frontend", "hookfe="+hook.URL+"/hook")
	}
	t.Cleanup(func() {
		for i, n := range s.nodes {
			if n.Started() {
				n.End()
			}
			if t.Failed() {
				for r, lg := range n.RunLogs() {
					t.Logf("--- logs of s-%d run %d ---\n%s", i, r+1, tail(lg, 6000))
				}
			}
		}
	})
	for _, n := range s.nodes {
		n.Start()
	}
	s.nodes[0].Must(200, "PUT", "/api/frontends/pullfe", map[string]string{"mode": "pull"}, nil)
	if natsURL != "" {
		for _, n := range s.nodes {
			polltest.Until(t, 30*time.Second, "the condition", func() bool { return n.delivery() == "bus" })
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumers sync.WaitGroup
	for i := range s.nodes {
		consumers.Go(func() { s.consume(ctx, i) })
	}

	var accepted sync.Map
	var acceptedN atomic.Int32
	clients := submitAll(ctx, t, "b", busE2EMessages, busE2EClients, &s.sent, &accepted, &acceptedN,
		func(k int) *e2eNode { return s.nodes[k%len(s.nodes)] })

	polltest.Until(t, 120*time.Second, "the condition", func() bool { return acceptedN.Load() >= busE2EKill })
	s.nodes[1].Kill()
	s.killedAt = time.Now()
	t.Logf("killed s-1 after %d accepted messages", acceptedN.Load())
	if restartNATS != nil {
		polltest.Until(t, 120*time.Second, "the condition", func() bool { return acceptedN.Load() >= busE2ERestart })
		restartNATS()
		t.Logf("restarted NATS after %d accepted messages", acceptedN.Load())
	}
	s.nodes[1].Start()
	clients.Wait()
	if n := acceptedN.Load(); n != busE2EMessages {
		t.Fatalf("%d of %d messages accepted", n, busE2EMessages)
	}
	start := time.Now()
	polltest.Until(t, 180*time.Second, "the condition", func() bool {
		var st struct{ Counts map[string]int64 }
		status, err := s.nodes[0].Call("GET", "/api/status", nil, &st)
		return err == nil && status == 200 && st.Counts["delivered"] == busE2EMessages
	})
	t.Logf("all delivered %v after the last submit", time.Since(start).Round(time.Millisecond))
	cancel()
	consumers.Wait()
	s.check(&accepted, hooked)
	if natsURL != "" {
		// The bus carried work: what the instances could not hand over in
		// memory at once (polls waiting elsewhere, the work of the killed
		// instance, what waited while NATS restarted, retries).
		var published, acked float64
		for _, m := range metrics {
			published += scrapeValue(t, m, "switchboard_bus_published_total")
			acked += scrapeValue(t, m, `switchboard_bus_settled_total{action="acked",frontend="pullfe"}`) +
				scrapeValue(t, m, `switchboard_bus_settled_total{action="acked",frontend="hookfe"}`)
		}
		t.Logf("bus: %v published, %v acked (live instances' counters)", published, acked)
		if published == 0 || acked == 0 {
			t.Errorf("the bus carried no work: %v published, %v acked", published, acked)
		}
	}
	for _, n := range s.nodes {
		n.Stop()
		for _, lg := range n.RunLogs() {
			checkLogs(t, lg)
		}
	}
}

// delivery is where an instance's delivery comes from ("" when it does
// not answer).
func (n *e2eNode) delivery() string {
	var st struct{ Delivery string }
	if status, err := n.Call("GET", "/api/status", nil, &st); err != nil || status != 200 {
		return ""
	}
	return st.Delivery
}

// consume polls the pull frontend at instance i and acks what it gets
// (at the next instance when one is down) until ctx ends.
func (s *busSite) consume(ctx context.Context, i int) {
	body := map[string]any{"max": 50, "wait_ms": 500, "lease_ms": 10000}
	for s.l.pullOnce(ctx, &s.sent, s.nodes[i], body, func(k int) *e2eNode { return s.nodes[(i+k)%len(s.nodes)] }) {
	}
}

// check is the checker of the scenario (see the comment at the top).
func (s *busSite) check(accepted *sync.Map, hooked map[string][]time.Time) {
	t := s.t
	var ids []string
	accepted.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	checkEach(t, toPairs(ids), func(id string, _ pair) error {
		var m messages.Message
		n := s.nodes[int(messages.TokenOf(id)%uint64(len(s.nodes)))]
		if status, err := n.Call("GET", "/api/messages/"+id, nil, &m); err != nil || status != 200 {
			return fmt.Errorf("GET %s: %d %v", id, status, err)
		}
		delivered := 0
		for _, h := range m.History {
			if h.State == messages.StateDelivered {
				delivered++
			}
		}
		if m.State != messages.StateDelivered || delivered != 1 {
			return fmt.Errorf("%s: state %s with %d delivered transitions: %+v", id, m.State, delivered, m.History)
		}
		return nil
	})
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unexpected) > 0 {
		t.Errorf("frontends saw ids no client sent: %v", l.unexpected)
	}
	pulled, pushed, again := 0, 0, 0
	for _, id := range ids {
		if messages.TokenOf(id)%2 == 0 {
			pushed++
			done := hooked[id]
			switch {
			case len(done) == 0:
				t.Errorf("webhook never completed %s", id)
			case len(done) > 2:
				t.Errorf("webhook: %s completed %d times", id, len(done))
			case len(done) == 2:
				// Only the killed process may have lost the commit of an
				// answer it got: the first one came before the kill, or
				// was a request it sent before it died that our handler
				// ran after Kill returned (seen 0-1 ms after it).
				again++
				if !done[0].Before(s.killedAt.Add(killInFlight)) {
					t.Errorf("webhook: %s completed again %v after a completion %v after the kill",
						id, done[1].Sub(s.killedAt).Round(time.Millisecond), done[0].Sub(s.killedAt).Round(time.Millisecond))
				}
			}
			continue
		}
		pulled++
		if l.checkPull(t, id) {
			again++
		}
	}
	t.Logf("pull %d, webhook %d, offered again across the kill or a lease %d", pulled, pushed, again)
}

// killInFlight is how long after Kill returned the webhook handler may
// still run a request the killed process sent before it died: the request
// is in our socket's buffer, and the handler's goroutine runs when the
// (loaded) machine gets to it. A live instance's duplicate would need its
// first completion inside this span to pass unseen.
const killInFlight = 500 * time.Millisecond

// toPairs makes ids the keys of checkEach's map.
func toPairs(ids []string) map[string]pair {
	out := make(map[string]pair, len(ids))
	for _, id := range ids {
		out[id] = pair{}
	}
	return out
}

// deleteStream removes the run's stream (on a shared server, only its own).
func deleteStream(t *testing.T, url, stream string) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Logf("delete stream %s: %v", stream, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = js.DeleteStream(ctx, stream)
	}
	if err != nil {
		t.Logf("delete stream %s: %v", stream, err)
	}
}

// scrapeValue is the value of one series at a metrics address (0 when the
// series is absent).
func scrapeValue(t *testing.T, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}
