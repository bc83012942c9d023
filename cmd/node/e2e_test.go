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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// The crash scenario of the single-node issue: the real binary on random
// loopback ports with real certificates, a pull and a webhook frontend,
// 1,000 messages from 16 concurrent clients, kill -9 in the middle, a
// restart, and then: every accepted message delivered, no frontend saw a
// completed delivery of any id twice, nothing delivered that was not sent.

func TestCrashRecoveryEmbeddedStore(t *testing.T) {
	runCrashScenario(t, nil)
}

func TestCrashRecoveryPostgres(t *testing.T) {
	runCrashScenario(t, []string{"--postgres", pgtest.DSN(t)})
}

const (
	e2eMessages = 1000
	e2eClients  = 16
	killAfter   = 400 // accepted messages before the kill
)

func TestMain(m *testing.M) { nodetest.Main(m) }

// e2eNode is the binary started by a test, with the helpers of these tests.
type e2eNode struct{ *nodetest.Node }

// newE2ENode is bin run with args, its API at https://addr called through
// client.
func newE2ENode(t *testing.T, bin, addr string, client *http.Client, args ...string) *e2eNode {
	t.Helper()
	api, err := apiclient.NewURL("https://"+addr, apiclient.Config{HTTP: client})
	if err != nil {
		t.Fatal(err)
	}
	return &e2eNode{nodetest.NewNode(t, bin, api, args...)}
}

// base is the node's API's base URL.
func (n *e2eNode) base() string { return n.API.Base().String() }

// ledger records what the frontends saw. seq orders events across goroutines.
type ledger struct {
	mu  sync.Mutex
	seq int64
	// pull frontend
	offers  map[string][]int64 // id -> seq at which the poll of each offer was sent
	applied map[string][]int64 // id -> seq of each ack the node answered "applied"
	// id -> seq of each repeated ack answered "already_recorded": its first
	// sending was cut off by the crash after the node had committed it
	lostAcks map[string][]int64
	// webhook frontend: 2xx answers per id and node run
	hooked map[string]map[int]int
	// ids a frontend saw that no client ever sent
	unexpected []string
}

func (l *ledger) next() int64 { l.seq++; return l.seq }

// pullOnce is one round of a pull consumer of pullfe: it polls at poller,
// records each offer by when its poll was SENT (a poll sent after an ack
// was answered is served after that commit), and acks every offer as
// delivered, repeating the ack (at ackAt(0), ackAt(1), ...) until a node
// answers it: acks are idempotent, and an ack cut off by a crash may have
// been committed, which only the node can say. It records the ack's
// outcomes; false when ctx ended.
func (l *ledger) pullOnce(ctx context.Context, sent *sync.Map, poller *e2eNode, pollBody map[string]any, ackAt func(k int) *e2eNode) bool {
	if ctx.Err() != nil {
		return false
	}
	l.mu.Lock()
	sentAt := l.next()
	l.mu.Unlock()
	var pr struct{ Messages []messages.Outgoing }
	status, err := poller.Call("POST", "/api/frontends/pullfe/poll", pollBody, &pr)
	if err != nil || status != 200 {
		time.Sleep(20 * time.Millisecond)
		return true
	}
	if len(pr.Messages) == 0 {
		return true
	}
	var results []messages.DeliveryResult
	l.mu.Lock()
	for _, m := range pr.Messages {
		if _, ok := sent.Load(m.ID); !ok {
			l.unexpected = append(l.unexpected, m.ID)
		}
		l.offers[m.ID] = append(l.offers[m.ID], sentAt)
		results = append(results, messages.DeliveryResult{ID: m.ID, Status: messages.Delivered})
	}
	l.mu.Unlock()
	var ar struct{ Results []messages.AckOutcome }
	lost := false
	for k := 0; ; k++ {
		status, err = ackAt(k).Call("POST", "/api/frontends/pullfe/ack", map[string]any{"results": results}, &ar)
		if err == nil && status == 200 {
			break
		}
		lost = true
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range ar.Results {
		switch {
		case o.Outcome == "applied":
			l.applied[o.ID] = append(l.applied[o.ID], l.next())
		case o.Outcome == "already_recorded" && lost:
			l.lostAcks[o.ID] = append(l.lostAcks[o.ID], l.next())
		}
	}
	return true
}

// submitAll has clients goroutines submit n messages with their own ids
// (prefix and a number; half of them, by token, to 33..., routed to the
// webhook frontend, the others to 44..., the pull frontend), each repeated
// with the same id (at submitAt(k) for the k-th try) until a node accepts
// it (202, or 200 for one stored already): a crash in between is harmless.
// sent records an id before its first try, accepted once accepted (with
// the status). Wait on the returned group.
func submitAll(ctx context.Context, t *testing.T, prefix string, n, clients int, sent, accepted *sync.Map, acceptedN *atomic.Int32,
	submitAt func(k int) *e2eNode) *sync.WaitGroup {
	ids := make(chan string, n)
	for i := range n {
		ids <- fmt.Sprintf("%s%04d", prefix, i)
	}
	close(ids)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			k := c
			for id := range ids {
				dest := "4470000"
				if messages.TokenOf(id)%2 == 0 {
					dest = "3360000"
				}
				body := map[string]string{"id": id, "source_msisdn": "1555", "destination_msisdn": dest + id[1:], "message_body": "e2e " + id}
				for ctx.Err() == nil {
					sent.Store(id, true)
					k++
					status, err := submitAt(k).Call("POST", "/api/messages", body, nil)
					if err == nil && (status == 202 || status == 200) {
						accepted.Store(id, status)
						acceptedN.Add(1)
						break
					}
					if err == nil && status != 503 && status != 429 {
						t.Errorf("submit %s: status %d", id, status)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return &wg
}

// checkPull checks a pull frontend's delivery of id (l.mu held): it is an
// ack the node recorded, exactly one (answered "applied", or cut off by a
// crash and then answered "already_recorded"), and no poll sent after that
// answer offers the id again. again reports an offer before it (a lease
// that ran out, or a crash).
func (l *ledger) checkPull(t *testing.T, id string) (again bool) {
	t.Helper()
	recorded := append(slices.Clone(l.applied[id]), l.lostAcks[id]...)
	switch {
	case len(l.applied[id]) > 1:
		t.Errorf("pull: %s recorded %d times", id, len(l.applied[id]))
		return false
	case len(recorded) == 0:
		t.Errorf("pull: %s delivered but no ack of it was recorded", id)
		return false
	}
	first := slices.Min(recorded)
	for _, o := range l.offers[id] {
		if o > first {
			t.Errorf("pull: %s offered again after its ack was recorded", id)
		}
	}
	return len(l.offers[id]) > 1
}

func runCrashScenario(t *testing.T, storeArgs []string) {
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, "e2e")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "e2e"}, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()

	addr := nodetest.FreeAddr(t)
	node := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, append([]string{"run",
		"--name", "e2e", "--instance-id", "e2e-0",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", addr, "--metrics-listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(certDir, "e2e.pem"), "--tls-key", filepath.Join(certDir, "e2e.key"),
		"--delivery-retry-min", "50ms", "--delivery-retry-max", "200ms",
		"--delivery-max-attempts", "50", "--webhook-timeout", "3s",
		"--log-format", "json", "--log-level", "info",
	}, storeArgs...)...)
	defer func() {
		if t.Failed() {
			for i, l := range node.RunLogs() {
				t.Logf("--- logs of run %d ---\n%s", i+1, tail(l, 8000))
			}
		}
	}()

	// Each run of the node registers the webhook (flags are applied at
	// start) with its own path, so that a call tells which process made it
	// even when the frontend handles it after the kill.
	var hookURL string
	hookFlags := func(run int) []string {
		return []string{"--frontend", fmt.Sprintf("hookfe=%s/run/%d", hookURL, run), "--route", "33=hookfe"}
	}
	l := &ledger{offers: map[string][]int64{}, applied: map[string][]int64{}, lostAcks: map[string][]int64{}, hooked: map[string]map[int]int{}}
	var sent sync.Map // id -> true once a client has sent it at least once

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m messages.Outgoing
		var r0 int
		if _, err := fmt.Sscanf(r.URL.Path, "/run/%d", &r0); err != nil {
			w.WriteHeader(404)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m.ID != r.Header.Get("Idempotency-Key") {
			w.WriteHeader(400)
			return
		}
		// Some first attempts are refused, so that retries happen too.
		if m.Attempt == 1 && messages.TokenOf(m.ID)%7 == 0 {
			w.WriteHeader(503)
			return
		}
		l.mu.Lock()
		if _, ok := sent.Load(m.ID); !ok {
			l.unexpected = append(l.unexpected, m.ID)
		}
		if l.hooked[m.ID] == nil {
			l.hooked[m.ID] = map[int]int{}
		}
		l.hooked[m.ID][r0]++
		l.mu.Unlock()
		w.WriteHeader(200)
	}))
	defer hook.Close()
	hookURL = hook.URL

	node.Start(hookFlags(1)...)
	node.Must(200, "PUT", "/api/frontends/pullfe", map[string]string{"mode": "pull"}, nil)
	node.Must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "pullfe"}, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Two pull consumers: poll, record, ack.
	var consumers sync.WaitGroup
	for range 2 {
		consumers.Go(func() {
			for l.pullOnce(ctx, &sent, node, map[string]any{"max": 50, "wait_ms": 500, "lease_ms": 5000}, func(int) *e2eNode { return node }) {
			}
		})
	}

	// 16 clients send 1,000 messages with their own ids, retrying the same
	// id through the crash until the node answers.
	var accepted sync.Map // id -> status (202 new, 200 already stored)
	var acceptedN atomic.Int32
	clients := submitAll(ctx, t, "m", e2eMessages, e2eClients, &sent, &accepted, &acceptedN, func(int) *e2eNode { return node })

	// kill -9 in the middle, then restart on the same port and data.
	polltest.Until(t, 60*time.Second, "the condition", func() bool { return acceptedN.Load() >= killAfter })
	node.Kill()
	t.Logf("killed the node after %d accepted messages", acceptedN.Load())
	node.Start(hookFlags(2)...)
	clients.Wait()
	if n := acceptedN.Load(); n != e2eMessages {
		t.Fatalf("%d of %d messages accepted", n, e2eMessages)
	}

	// Wait for everything to be delivered.
	polltest.Until(t, 120*time.Second, "the condition", func() bool {
		var st struct{ Counts map[string]int64 }
		status, err := node.Call("GET", "/api/status", nil, &st)
		return err == nil && status == 200 && st.Counts["delivered"] == e2eMessages
	})
	cancel()
	consumers.Wait()

	// Every accepted message is delivered, with one delivered transition.
	accepted.Range(func(k, _ any) bool {
		id := k.(string)
		var m messages.Message
		if status, err := node.Call("GET", "/api/messages/"+id, nil, &m); err != nil || status != 200 {
			t.Errorf("GET %s: %d %v", id, status, err)
			return true
		}
		delivered := 0
		for _, h := range m.History {
			if h.State == messages.StateDelivered {
				delivered++
			}
		}
		if m.State != messages.StateDelivered || delivered != 1 {
			t.Errorf("%s: state %s with %d delivered transitions: %+v", id, m.State, delivered, m.History)
		}
		return true
	})

	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unexpected) > 0 {
		t.Errorf("frontends saw ids no client sent: %v", l.unexpected)
	}
	pullIDs, hookIDs, redelivered := 0, 0, 0
	accepted.Range(func(k, _ any) bool {
		id := k.(string)
		if messages.TokenOf(id)%2 == 0 {
			hookIDs++
			// A webhook may see an id again only across the crash: the
			// node was killed between the frontend's answer and its commit.
			for r, n := range l.hooked[id] {
				if n > 1 {
					t.Errorf("webhook: %s completed %d times within run %d", id, n, r)
				}
			}
			if len(l.hooked[id]) == 0 {
				t.Errorf("webhook never completed %s", id)
			}
			if len(l.hooked[id]) > 1 {
				redelivered++
			}
			return true
		}
		pullIDs++
		if l.checkPull(t, id) {
			redelivered++
		}
		return true
	})
	t.Logf("pull %d, webhook %d, redelivered across the crash or a lease %d", pullIDs, hookIDs, redelivered)

	node.Stop()
	for _, lg := range node.RunLogs() {
		checkLogs(t, lg)
	}
}

// checkLogs fails on log records a healthy run never writes.
func checkLogs(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			continue // a half-written last line of the killed run
		}
		if rec["msg"] == "actor panicked" || rec["msg"] == "node cannot go on" {
			t.Errorf("unexpected log record: %s", line)
		}
	}
}

// runToExit runs the binary with args and returns its exit code and its
// log once it has exited; running, when it has not exited within, ends
// the test (the process killed) with the log's tail.
func runToExit(t *testing.T, bin string, within time.Duration, running string, args ...string) (int, string) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = nodetest.Env()
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s\n%s", running, tail(logs.String(), 3000))
	}
	return cmd.ProcessState.ExitCode(), logs.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// checkEach runs check on every accepted message, 8 at a time, and
// reports what it finds.
func checkEach(t *testing.T, accepted map[string]pair, check func(id string, p pair) error) {
	t.Helper()
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				if err := check(id, accepted[id]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for id := range accepted {
		ids <- id
	}
	close(ids)
	wg.Wait()
}

// checkStored checks message id of pair p at every site: delivered once,
// from p.origin to p.site's frontend, at those two sites, and unknown at
// the others. get reads it at a site.
func checkStored(id string, p pair, sites []string, get func(site, id string) (messages.Message, int, error)) error {
	fe := frontendOf(p.site)
	var errs []error
	for _, s := range sites {
		m, status, err := get(s, id)
		if err != nil {
			return fmt.Errorf("%s: GET %s: %v", s, id, err)
		}
		if s != p.origin && s != p.site {
			if status != 404 {
				errs = append(errs, fmt.Errorf("%s (from %s for %s) is stored at %s: %d %s", id, p.origin, fe, s, status, m.State))
			}
			continue
		}
		if status != 200 {
			errs = append(errs, fmt.Errorf("%s (from %s for %s): GET at %s: %d", id, p.origin, fe, s, status))
			continue
		}
		delivered := 0
		for _, h := range m.History {
			if h.State == messages.StateDelivered {
				delivered++
			}
		}
		if m.State != messages.StateDelivered || delivered != 1 || m.SourceSMSC != p.origin || m.DestSMSC != p.site || m.Frontend != fe {
			errs = append(errs, fmt.Errorf("%s (from %s for %s) at %s: state %s, %d delivered transitions, source %s, dest %s, frontend %s; history %+v",
				id, p.origin, fe, s, m.State, delivered, m.SourceSMSC, m.DestSMSC, m.Frontend, m.History))
		}
	}
	return errors.Join(errs...)
}
