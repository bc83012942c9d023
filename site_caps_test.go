package switchboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// ringCall makes a ring call of an instance of h's site (without --tls-ca:
// the site's admin token and X-Federation-Node) to h, with body as JSON,
// and decodes a 200 answer into out (a leave is answered 204).
func (h *harness) ringCall(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+siteToken)
	req.Header.Set(messages.FederationHeader, h.cfg.Name)
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// fakeMember is an instance of h's site in the ring of master h that works
// nothing: it joins with the document of its version and keeps its
// subscription open, as a slave does.
type fakeMember struct {
	h      *harness
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// joinFake joins id to h's ring. caps nil sends a join without the
// capabilities field at all: what an instance of an earlier version sends.
func joinFake(t *testing.T, h *harness, id string, caps []string) *fakeMember {
	t.Helper()
	join := map[string]any{"instance_id": id, "node": h.cfg.Name, "address": "127.0.0.1:1", "cluster": "", "region": "", "zone": "",
		"services": messages.AllServices}
	if caps != nil {
		join["capabilities"] = caps
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeMember{h: h, id: id, cancel: cancel, done: make(chan struct{})}
	var a messages.RingAssignment
	if err := h.ringCall(ctx, "/api/ring/join", join, &a); err != nil {
		cancel()
		t.Fatalf("%s joins: %v", id, err)
	}
	go func() {
		defer close(f.done)
		epoch := a.Epoch
		for ctx.Err() == nil {
			var next messages.RingAssignment
			err := h.ringCall(ctx, "/api/ring/poll", messages.RingPoll{InstanceID: id, Epoch: epoch, WaitMs: 300}, &next)
			switch {
			case err == nil:
				epoch = next.Epoch
			case ctx.Err() != nil:
			case strings.Contains(err.Error(), messages.CodeRingUnknownMember):
				if h.ringCall(ctx, "/api/ring/join", join, &next) == nil {
					epoch = next.Epoch
				}
			default:
				t.Logf("%s polls: %v", id, err)
			}
		}
	}()
	t.Cleanup(func() { f.stop(false) })
	return f
}

// stop ends the member's subscription; leave says goodbye too (a graceful
// stop), else it just stops polling (as before a restart).
func (f *fakeMember) stop(leave bool) {
	f.cancel()
	<-f.done
	if leave {
		if err := f.h.ringCall(context.Background(), "/api/ring/leave", messages.RingLeave{InstanceID: f.id}, nil); err != nil {
			f.h.t.Errorf("%s leaves: %v", f.id, err)
		}
	}
}

// waitLacking waits until every instance of hs holds one epoch whose
// members lacking capability c are exactly lacking (membership unchanged:
// a member came back with other capabilities).
func waitLacking(t *testing.T, hs []*harness, c string, lacking ...string) {
	t.Helper()
	waitMembers(t, hs, "lacking "+c, func(m messages.RingMember) bool { return !slices.Contains(m.Capabilities, c) }, lacking)
}

// TestSiteRefusesAClassWhileAMemberLacksIt: while an instance of the site
// that does not announce message_class (an earlier version, which would
// deliver the message without its class) is in the ring, every instance
// refuses a submit with a message_class (503 site_capability_missing
// naming it, over SMPP ESME_RSYSERR) and stores nothing, and takes one
// without a class; once that instance leaves, or comes back announcing
// the capability, the classed submit is taken.
func TestSiteRefusesAClassWhileAMemberLacksIt(t *testing.T) {
	dsn := pgtest.DSN(t)
	c1 := siteConfig(t, dsn, "a1")
	c1.RingRole = messages.RoleMaster
	a1 := startNode(t, c1)
	c2 := siteConfig(t, dsn, "a2")
	c2.RingRole, c2.RingMaster = messages.RoleSlave, "https://"+a1.node.Addr()
	c2.SMPPListen = "127.0.0.1:0"
	c2.SMPPAccounts = []switchboard.SMPPAccount{{SystemID: "app", Password: "pw123456"}}
	a2 := startNode(t, c2)
	hs := []*harness{a1, a2}
	waitRing(t, hs, "a1", "a2")
	a1.pullFrontend("fe", "44")

	n := 0
	classed := func() map[string]any {
		n++
		return map[string]any{"id": fmt.Sprintf("c%d", n), "source_msisdn": "15550001", "destination_msisdn": "447700900001",
			"message_body": "flash", "message_class": 0}
	}
	accepts := func(h *harness) {
		t.Helper()
		doc := classed()
		h.must(202, "POST", "/api/messages", doc, nil)
		if m := h.message(doc["id"].(string)); classOf(m.MessageClass) != "0" {
			t.Fatalf("%s stored with message_class %s, want 0", m.ID, classOf(m.MessageClass))
		}
	}
	refuses := func(h *harness, lacking string) {
		t.Helper()
		doc := classed()
		msg := h.apiError(503, messages.CodeSiteCapability, "POST", "/api/messages", doc)
		if !strings.Contains(msg, lacking) || !strings.Contains(msg, messages.CapMessageClass) {
			t.Errorf("refusal %q names neither %s nor %s", msg, lacking, messages.CapMessageClass)
		}
		h.apiError(404, messages.CodeNotFound, "GET", "/api/messages/"+doc["id"].(string), nil)
	}
	accepts(a1)
	accepts(a2)

	old := joinFake(t, a1, "old", nil)
	waitRing(t, hs, "a1", "a2", "old")
	refuses(a1, "old")
	refuses(a2, "old")
	a1.must(202, "POST", "/api/messages", map[string]any{"id": "plain", "source_msisdn": "15550001",
		"destination_msisdn": "447700900002", "message_body": "no class"}, nil)

	// Over SMPP: data_coding 0xF0 (GSM 7-bit, class 0) is refused for now;
	// 0x00 is taken.
	s := esmeSession(t, a2)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "app", Password: "pw123456"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	submitSM := func(dc byte) smpp.Status {
		t.Helper()
		resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
			Dest: smpp.Address{Addr: "447700900003"}, DataCoding: dc, ShortMessage: []byte("hello")}})
		if err != nil {
			t.Fatalf("submit_sm 0x%02X: %v", dc, err)
		}
		return resp.Status
	}
	if st := submitSM(0xF0); st != smpp.StatusSystemError {
		t.Errorf("submit_sm with a class while old lacks it: %s, want ESME_RSYSERR", st)
	}
	if st := submitSM(smpp.DCDefault); st != smpp.StatusOK {
		t.Errorf("submit_sm without a class: %s, want ESME_ROK", st)
	}

	// old leaves: the site still refuses classes for a while (ring.Roster:
	// a member missing from the assignment may be alive and come back
	// with its ranges), and while old is back as its earlier version.
	old.stop(true)
	waitRing(t, hs, "a1", "a2")
	refuses(a1, "old")
	refuses(a2, "old")
	old = joinFake(t, a1, "old", nil)
	waitRing(t, hs, "a1", "a2", "old")
	refuses(a2, "old")

	// old restarts upgraded: the site takes classes again at once.
	old.stop(false)
	joinFake(t, a1, "old", []string{messages.CapForwardBatch, messages.CapMessageClass})
	waitLacking(t, hs, messages.CapMessageClass)
	accepts(a1)
	accepts(a2)
	if st := submitSM(0xF0); st != smpp.StatusOK {
		t.Errorf("submit_sm with a class once every member announces it: %s, want ESME_ROK", st)
	}
}

// TestSiteRefusesAForwardedClassWhileAMemberLacksIt: a peer's forward of a
// message with a message_class to a site where an instance does not
// announce message_class is refused for now (unavailable: the peer
// retries it) and not stored; once that instance is upgraded, the peer's
// retry is taken, class and all.
func TestSiteRefusesAForwardedClassWhileAMemberLacksIt(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	cb := fedConfig(t, fn, "b", "a")
	cb.Postgres, cb.APIToken, cb.RingRole = pgtest.DSN(t), siteToken, messages.RoleMaster
	cb.RingPublishInterval = 500 * time.Millisecond
	b := startFed(t, fn, cb)
	waitRing(t, []*harness{b}, "b-0")
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	old := joinFake(t, b, "old", nil)
	waitRing(t, []*harness{b}, "b-0", "old")
	a.must(202, "POST", "/api/messages", map[string]any{"id": "fc1", "source_msisdn": "15550001",
		"destination_msisdn": "2555", "message_body": "flash", "message_class": 0}, nil)
	polltest.Eventually(t, 20*time.Second, func() error {
		m := a.message("fc1")
		if m.State != messages.StatePending && m.State != messages.StateForwardQueued {
			return nil // forwarded (or failed): checked below
		}
		if historyHas(m, "b refused for now") {
			return nil
		}
		return fmt.Errorf("fc1 at a is %s, b has not answered it yet", m.State)
	})
	if m := a.message("fc1"); m.State != messages.StatePending && m.State != messages.StateForwardQueued {
		t.Fatalf("fc1 at a is %s while old lacks %s (history %+v), want it kept for a retry", m.State, messages.CapMessageClass, m.History)
	}
	if !historyHas(a.message("fc1"), messages.CapMessageClass) {
		t.Errorf("a's history of fc1 does not say why b refused it: %+v", a.message("fc1").History)
	}
	b.apiError(404, messages.CodeNotFound, "GET", "/api/messages/fc1", nil)

	old.stop(false)
	joinFake(t, b, "old", []string{messages.CapForwardBatch, messages.CapMessageClass})
	waitLacking(t, []*harness{b}, messages.CapMessageClass)
	a.waitState("fc1", messages.StateForwarded)
	if m := b.message("fc1"); classOf(m.MessageClass) != "0" {
		t.Fatalf("fc1 stored at b with message_class %s, want 0", classOf(m.MessageClass))
	}
}

// masterWithAnOldMember starts a1, master of a site on Postgres with a
// pull frontend for 44, and a member "old" that announces no capabilities
// (an earlier version); it returns a1, its config (to start it again)
// and old.
func masterWithAnOldMember(t *testing.T) (*harness, switchboard.Config, *fakeMember) {
	t.Helper()
	c1 := siteConfig(t, pgtest.DSN(t), "a1")
	c1.RingRole = messages.RoleMaster
	a1 := startNode(t, c1)
	waitRing(t, []*harness{a1}, "a1")
	a1.pullFrontend("fe", "44")
	old := joinFake(t, a1, "old", nil)
	waitRing(t, []*harness{a1}, "a1", "old")
	return a1, c1, old
}

// classedDoc is a submission to 44 with id and message_class 0.
func classedDoc(id string) map[string]any {
	return map[string]any{"id": id, "source_msisdn": "15550001", "destination_msisdn": "447700900001",
		"message_body": "flash", "message_class": 0}
}

// TestSiteRemembersAMemberAcrossAMasterRestart: a new master lists only
// itself at first, and a live instance of an earlier version joins it a
// reconnect later, with the ranges it had: the site took classed submits
// in between, which that instance could then claim and deliver without
// their class. The master's roster starts from the stored assignment, so
// old still counts until it is back (here upgraded: then classes are
// taken) or long gone.
func TestSiteRemembersAMemberAcrossAMasterRestart(t *testing.T) {
	a1, c1, old := masterWithAnOldMember(t)
	a1.apiError(503, messages.CodeSiteCapability, "POST", "/api/messages", classedDoc("before"))

	a1.stop()
	old.stop(false) // alive, looking for its master again
	a1 = startNode(t, c1)
	waitRing(t, []*harness{a1}, "a1")
	msg := a1.apiError(503, messages.CodeSiteCapability, "POST", "/api/messages", classedDoc("window"))
	if !strings.Contains(msg, "old") {
		t.Errorf("the refusal after the master's restart does not name old: %q", msg)
	}
	joinFake(t, a1, "old", []string{messages.CapForwardBatch, messages.CapMessageClass})
	waitLacking(t, []*harness{a1}, messages.CapMessageClass)
	a1.must(202, "POST", "/api/messages", classedDoc("after"), nil)
}

// TestSiteRemembersADroppedMemberAcrossARestart: a member of an earlier
// version that pauses is dropped after its grace, alive, and may join
// again with ranges; the master remembers it, and so does the master
// restarted within the roster's hold: the store keeps it beside the
// assignment (RingState.Absent). Before, the restarted master took
// classed submits that old, joining again, could deliver without their
// class.
func TestSiteRemembersADroppedMemberAcrossARestart(t *testing.T) {
	a1, c1, old := masterWithAnOldMember(t)
	old.stop(false) // paused: dropped after its grace, alive
	waitRing(t, []*harness{a1}, "a1")
	a1.apiError(503, messages.CodeSiteCapability, "POST", "/api/messages", classedDoc("dropped"))

	a1.stop()
	a1 = startNode(t, c1)
	waitRing(t, []*harness{a1}, "a1")
	msg := a1.apiError(503, messages.CodeSiteCapability, "POST", "/api/messages", classedDoc("window"))
	if !strings.Contains(msg, "old") {
		t.Errorf("the refusal after the restart does not name old: %q", msg)
	}
}

// TestEmbeddedOwnStoreTakesAClassAtOnce: a single node given a store of
// its own (Config.Store) takes a submit with a message_class as soon as
// Start has returned: its roster starts from the store, where no ring
// published, or where only its own earlier run did, as a version that
// announced no capabilities (an embedder's upgrade). Before, it waited
// for its first assignment, and such submits right after Start were
// refused site_capability_missing.
func TestEmbeddedOwnStoreTakesAClassAtOnce(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		cfg := embeddedConfig(t)
		fs := newFaultyStore(t)
		cfg.Store = fs
		if earlier {
			owners := make([]persistence.RangeOwner, 0, len(messages.AllServices))
			for _, svc := range messages.AllServices {
				owners = append(owners, persistence.RangeOwner{Service: svc, Range: messages.TokenRange{Lo: 0, Hi: math.MaxUint64}, Owner: cfg.InstanceID})
			}
			if err := fs.PublishRing(context.Background(), nil, 0, persistence.RingState{Epoch: 1, Master: cfg.InstanceID,
				Owners: owners, Members: []messages.RingMember{{InstanceID: cfg.InstanceID, Services: messages.AllServices}}}); err != nil {
				t.Fatal(err)
			}
		}
		n := nodetest.Embedded(t, cfg)
		// No route: the submit passed the site's check and reached routing.
		_, _, err := n.Submit(context.Background(), messages.Submission{SourceMSISDN: "1", DestinationMSISDN: "71", Body: "flash",
			Options: messages.Options{MessageClass: messages.Class(0)}})
		if me := (*messages.Error)(nil); !errors.As(err, &me) || me.Code != messages.CodeNoRoute {
			t.Errorf("a classed submit right after Start (its earlier run stored: %v): %v, want no_route (past the site's check)", earlier, err)
		}
		nodetest.StopEmbedded(t, n)
	}
}

// ringReadHeld is a store whose first Ring read (the node's seedRoster at
// Start) waits until its context ends, after saying it began.
type ringReadHeld struct {
	persistence.Store
	first   atomic.Bool
	entered chan struct{}
}

func (s *ringReadHeld) Ring(ctx context.Context) (persistence.RingState, error) {
	if s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-ctx.Done()
		return persistence.RingState{}, ctx.Err()
	}
	return s.Store.Ring(ctx)
}

// TestStartCancelledWhileReadingTheRing: a start cancelled (a SIGTERM
// during start-up) while its read of the stored ring assignment hangs
// ends with the cancel; before, the read had a context of its own: Start
// waited for its 30 s, then went on and returned nil.
func TestStartCancelledWhileReadingTheRing(t *testing.T) {
	st := &ringReadHeld{Store: newFaultyStore(t), entered: make(chan struct{})}
	cfg := embeddedConfig(t)
	cfg.Store = st
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	<-st.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Start cancelled while it read the ring: %v, want context.Canceled", err)
	}
	_ = n.Stop(context.Background())
}
