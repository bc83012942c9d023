package switchboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

// everyByte is a binary payload holding each byte value, twice.
func everyByte() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// actorFrontend is an in-process frontend that records what it is given
// and accepts it.
type actorFrontend struct {
	mu  sync.Mutex
	got map[string]messages.Outgoing
}

func (f *actorFrontend) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Delivery)
	if !ok {
		return
	}
	f.mu.Lock()
	f.got[d.Message.ID] = d.Message
	f.mu.Unlock()
	c.Respond(&messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered})
}

func (f *actorFrontend) delivery(id string) (messages.Outgoing, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.got[id]
	return m, ok
}

// TestFederationCarriesBinaryToEveryFrontendKind: a binary message (every
// byte value) submitted at A reaches a pull, a webhook and an in-process
// actor frontend at B byte for byte, with its data coding, message class,
// validity and scheduled delivery time (which B keeps); A's document then
// shows B's delivery attempts.
func TestFederationCarriesBinaryToEveryFrontendKind(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	b.pullFrontend("fe-pull", "21")
	// The webhook refuses the first attempt (503: retried), so b makes 2.
	var hookMu sync.Mutex
	hookBodies := map[string]messages.Outgoing{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o messages.Outgoing
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		hookMu.Lock()
		_, again := hookBodies[o.ID]
		hookBodies[o.ID] = o
		hookMu.Unlock()
		if !again {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(hook.Close)
	b.webhookFrontend("fe-hook", hook.URL, "22")
	af := &actorFrontend{got: map[string]messages.Outgoing{}}
	pid, err := b.node.Spawn("fe-actor", "test-frontend", func() actor.Actor { return af })
	if err != nil {
		t.Fatal(err)
	}
	if err := b.node.RegisterFrontend(t.Context(), "fe-actor", pid); err != nil {
		t.Fatal(err)
	}
	b.must(200, "PUT", "/api/routes/23", map[string]string{"frontend": "fe-actor"}, nil)
	a.waitPeer("b", messages.PeerHealthy)
	for prefix, fe := range map[string]string{"21": "fe-pull", "22": "fe-hook", "23": "fe-actor"} {
		a.routeWhenKnown(prefix, fe)
	}

	payload := everyByte()
	validity := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	// The pull frontend's message is scheduled: b holds it until then.
	later := time.Now().Add(1500 * time.Millisecond).UTC()
	for _, id := range []string{"bin-pull", "bin-hook", "bin-actor"} {
		dest := map[string]string{"bin-pull": "2100", "bin-hook": "2200", "bin-actor": "2300"}[id]
		doc := map[string]any{"id": id, "source_msisdn": "ACME", "destination_msisdn": dest,
			"data_coding": "binary", "message_body_base64": payload, "validity_until": validity, "message_class": 2}
		if id == "bin-pull" {
			doc["deliver_after"] = later
		}
		a.must(202, "POST", "/api/messages", doc, nil)
	}
	check := func(where string, o messages.Outgoing) {
		t.Helper()
		if !bytes.Equal(o.Binary, payload) || o.Body != "" || o.DataCoding != messages.CodingBinary ||
			o.ValidityUntil == nil || !o.ValidityUntil.Equal(validity) || o.SourceSMSC != "a" || o.MessageClass == nil || *o.MessageClass != 2 {
			t.Fatalf("%s got %+v", where, o)
		}
	}
	got := b.pollOne("fe-pull")
	check("the pull frontend", got)
	if time.Now().Before(later) || got.DeliverAfter == nil || !got.DeliverAfter.Equal(later.Truncate(time.Microsecond)) {
		t.Fatalf("the scheduled message reached b's frontend at %v with deliver_after %v, want after %v", time.Now(), got.DeliverAfter, later)
	}
	b.ack("fe-pull", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	polltest.Eventually(t, 20*time.Second, func() error {
		hookMu.Lock()
		defer hookMu.Unlock()
		if _, ok := hookBodies["bin-hook"]; !ok {
			return fmt.Errorf("the webhook has not been called")
		}
		return nil
	})
	hookMu.Lock()
	check("the webhook frontend", hookBodies["bin-hook"])
	hookMu.Unlock()
	polltest.Eventually(t, 20*time.Second, func() error {
		if _, ok := af.delivery("bin-actor"); !ok {
			return fmt.Errorf("the actor frontend has nothing")
		}
		return nil
	})
	o, _ := af.delivery("bin-actor")
	check("the actor frontend", o)

	// The origin shows the delivering node's attempts.
	for id, attempts := range map[string]int{"bin-pull": 1, "bin-hook": 2, "bin-actor": 1} {
		m := a.waitState(id, messages.StateDelivered)
		if m.Attempts != attempts || !bytes.Equal(m.Binary, payload) {
			t.Errorf("a's %s: %d attempts (want %d, as b reported), body %d bytes", id, m.Attempts, attempts, len(m.Binary))
		}
	}
}

// v1Forward is the forward document of the federation protocol before the
// message_fields capability, as a peer of that version decodes it.
type v1Forward struct {
	ID                string `json:"id"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	Body              string `json:"message_body"`
	SourceSMSC        string `json:"source_smsc"`
	DestSMSC          string `json:"dest_smsc"`
	Frontend          string `json:"frontend"`
}

// v1Peer is a peer speaking today's protocol: its identity lists only the
// batch capabilities, and it decodes forwards strictly as v1 documents, so
// a field it does not know fails the test.
type v1Peer struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	got []v1Forward
	raw []map[string]any
}

func newV1Peer(t *testing.T) *v1Peer {
	p := &v1Peer{t: t}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/federation/identity", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, 200, messages.Identity{Node: "old", InstanceID: "old-0", ProtocolVersion: 1,
			Capabilities: []string{messages.CapForwardBatch, messages.CapStatusBatch}})
	})
	mux.HandleFunc("POST /api/federation/health", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, 200, messages.Health{Node: "old", Time: time.Now().UTC(), Status: messages.HealthOK})
	})
	mux.HandleFunc("POST /api/federation/registry", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, 200, messages.Registry{Node: "old", Frontends: []string{"fe-old"}})
	})
	mux.HandleFunc("POST /api/federation/forward_batch", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var raw struct{ Messages []map[string]any }
		_ = json.Unmarshal(body, &raw)
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var doc struct {
			Messages []v1Forward `json:"messages"`
		}
		if err := dec.Decode(&doc); err != nil {
			t.Errorf("a v1 peer cannot read the forward: %v: %s", err, body)
			w.WriteHeader(400)
			return
		}
		p.mu.Lock()
		p.got = append(p.got, doc.Messages...)
		p.raw = append(p.raw, raw.Messages...)
		p.mu.Unlock()
		var res messages.ForwardBatchReply
		for _, f := range doc.Messages {
			res.Results = append(res.Results, messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID, State: messages.StatePending}})
		}
		writeTestJSON(w, 200, res)
	})
	p.srv = httptest.NewTLSServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *v1Peer) forwards() ([]v1Forward, []map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got), slices.Clone(p.raw)
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// TestFederationWithAPeerOfTodaysProtocol: a node of this version and a
// peer of the protocol before message_fields federate. Plain messages go
// to the peer in documents it reads strictly (no field it does not know);
// a message that uses the optional fields (a message class too) is not
// sent to it and ends forward_failed (peer_unsupported) at once; the older
// peer's own documents (a forward, a delivery_status without attempts),
// and a newer one's extra fields, are taken.
func TestFederationWithAPeerOfTodaysProtocol(t *testing.T) {
	fn := newFedNet()
	old := newV1Peer(t)
	fn.set("old", strings.TrimPrefix(old.srv.URL, "https://"))
	a := startFed(t, fn, fedConfig(t, fn, "a", "old"))
	a.pullFrontend("fe-a", "44")
	a.waitPeer("old", messages.PeerHealthy)
	a.routeWhenKnown("9", "fe-old")

	a.submit("plain-1", "900")
	a.must(202, "POST", "/api/messages", map[string]any{"id": "bin-1", "source_msisdn": "ACME", "destination_msisdn": "901",
		"data_coding": "binary", "message_body_base64": []byte{0, 1, 2}}, nil)
	a.must(202, "POST", "/api/messages", map[string]any{"id": "gsm-1", "source_msisdn": "ACME", "destination_msisdn": "902",
		"data_coding": "gsm7", "message_body": "text, but with a data coding"}, nil)
	a.must(202, "POST", "/api/messages", map[string]any{"id": "flash-1", "source_msisdn": "ACME", "destination_msisdn": "903",
		"message_body": "a flash SMS", "message_class": 0}, nil)
	a.waitState("plain-1", messages.StateForwarded)
	for _, id := range []string{"bin-1", "gsm-1", "flash-1"} {
		m := a.waitState(id, messages.StateForwardFailed)
		if m.Reason != messages.ReasonPeerUnsupported || !strings.Contains(m.History[len(m.History)-1].Detail, messages.CapMessageFields) {
			t.Fatalf("%s: reason %q, history %+v", id, m.Reason, m.History)
		}
	}
	got, raw := old.forwards()
	if len(got) != 1 || got[0].ID != "plain-1" || got[0].Body != "hello plain-1" {
		t.Fatalf("the old peer got %+v, want plain-1 alone", got)
	}
	var keys []string
	for k := range raw[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[dest_smsc destination_msisdn frontend id message_body source_msisdn source_smsc]" {
		t.Fatalf("the forward carried %v", keys)
	}

	// The old peer's documents reach us: a delivery_status without
	// attempts, a forward (with a field from a newer version, ignored).
	peerCall := func(path string, body any) (int, []byte) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", a.base+path, bytes.NewReader(data))
		req.Header.Set(messages.FederationHeader, "old")
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if st, body := peerCall("/api/federation/delivery_status", map[string]any{"id": "plain-1", "node": "old", "status": "delivered",
		"at": time.Now().UTC()}); st != 200 {
		t.Fatalf("v1 delivery_status: %d %s", st, body)
	}
	if m := a.waitState("plain-1", messages.StateDelivered); m.Attempts != 0 {
		t.Fatalf("attempts %d after a report without them, want 0", m.Attempts)
	}
	if st, body := peerCall("/api/federation/forward", map[string]any{"id": "from-old", "source_msisdn": "1", "destination_msisdn": "441",
		"message_body": "hello from old", "source_smsc": "old", "dest_smsc": "a", "frontend": "fe-a", "future_field": 7}); st != 202 {
		t.Fatalf("v1 forward: %d %s", st, body)
	}
	if o := a.pollOne("fe-a"); o.ID != "from-old" || o.Body != "hello from old" || o.Options.Used() {
		t.Fatalf("fe-a got %+v", o)
	}
}
