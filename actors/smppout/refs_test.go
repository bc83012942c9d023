package smppout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/gsm7"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// A handset reassembles the parts of long texts by their reference: 256
// long texts sent one after the other by a frontend to one handset take
// 256 different references, one after the other (a rolling counter, not
// the low byte of each message's token, which two texts share 1 time in
// 256), and each text's parts still join into it.
func TestLongTextsToOneHandsetTakeDistinctReferences(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{})
	const n = 256
	bodies := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("m-%03d", i)
		body := fmt.Sprintf("text %03d ", i) + strings.Repeat("0123456789", 20) // 209 septets: 2 parts
		bodies[id] = body
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		v := c.Submit(ctx, messages.Outgoing{ID: id, SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: body}, "")
		cancel()
		if v.Status != messages.Delivered {
			t.Fatalf("%s: %+v", id, v)
		}
	}
	subs := smsc.Submits()
	if len(subs) != 2*n {
		t.Fatalf("%d submits, want %d", len(subs), 2*n)
	}
	refs := make([]uint16, n)
	texts := map[uint16]string{}
	for i := range n {
		id := fmt.Sprintf("m-%03d", i)
		var data []byte
		for seq, s := range subs[2*i : 2*i+2] {
			p, ok, err := smpp.PartOf(s.SM)
			if err != nil || !ok || p.Total != 2 || int(p.Seq) != seq+1 || s.SM.Dest.Addr != "33600000001" {
				t.Fatalf("%s, submit %d: %+v %v %v", id, seq+1, p, ok, err)
			}
			if seq == 0 {
				refs[i] = p.Ref
			} else if p.Ref != refs[i] {
				t.Fatalf("%s: parts with references %d and %d", id, refs[i], p.Ref)
			}
			data = append(data, p.Data...)
		}
		if other, ok := texts[refs[i]]; ok {
			t.Fatalf("%s and %s, both in flight to +33600000001, share reference %d: the handset mixes their parts", other, id, refs[i])
		}
		texts[refs[i]] = id
		if got, err := gsm7.Decode(data); err != nil || got != bodies[id] {
			t.Fatalf("%s: its parts join into %q (%v), want %q", id, got, err, bodies[id])
		}
		if i > 0 && refs[i] != (refs[i-1]+1)%256 {
			t.Errorf("%s: reference %d after %d, want the next", id, refs[i], refs[i-1])
		}
	}
}

// Refs count on from their start, past 255 to 0, and hand out each
// reference once however many goroutines take them.
func TestRefsRollOver(t *testing.T) {
	r := NewRefs(254)
	for _, want := range []byte{254, 255, 0, 1} {
		if got := r.Next(); got != want {
			t.Fatalf("reference %d, want %d", got, want)
		}
	}
	r = NewRefs(0)
	got := make(chan byte, 256)
	for range 8 {
		go func() {
			for range 32 {
				got <- r.Next()
			}
		}()
	}
	seen := map[byte]bool{}
	for range 256 {
		b := <-got
		if seen[b] {
			t.Fatalf("reference %d handed out twice", b)
		}
		seen[b] = true
	}
}

// A frontend's clients share its counter: the one a change makes goes on
// where the one it retires (still draining its long texts) is. Clients
// of other frontends have counters of their own, and a node's restart
// (another seed) starts them elsewhere.
func TestClientsShareTheFrontendsRefs(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	cs := newClients(t, Config{Seed: 1})
	old := getBound(t, cs, "smpp://sb@"+smsc.Addr, "the first bind")
	changed := getBound(t, cs, "smpp://sb@"+smsc.Addr+"?window=5", "the bind after the change")
	if old == changed || old.cfg.Refs != changed.cfg.Refs {
		t.Fatalf("the changed frontend's client has another counter (%p, %p)", old.cfg.Refs, changed.cfg.Refs)
	}
	other, err := cs.Get(messages.Frontend{Name: "other", Mode: messages.ModeSMPP, URL: "smpp://sb@" + smsc.Addr, Secret: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Release(other)
	if other.cfg.Refs == changed.cfg.Refs {
		t.Fatal("two frontends share a counter")
	}
	starts := map[byte]bool{}
	for seed := range uint64(8) {
		starts[newRefs(seed, "smsc").Next()] = true
	}
	if len(starts) < 2 {
		t.Errorf("8 seeds, first references %v: a restart starts where the last did", starts)
	}
}

// A long text takes its reference when it goes, not when the frontend's
// pacing keeps it: a text deferred (its slots not in its time) or given
// up for its parts' slots takes none, so that the counter comes back to a
// reference only after 256 long texts sent, whatever was kept meanwhile
// (a backlog at a low rate defers texts over and over). At rate=0.5 (slots
// 2 s apart) with 10 s for the slots, a text of 6 parts takes them up to
// 10 s; the texts submitted behind it are kept.
func TestPacingTakesNoReferenceForWhatItKeeps(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()
	refs := NewRefs(40)
	c := boundClient(t, "smpp://sb@"+smsc.Addr+"?rate=0.5", Config{Clock: clk, Refs: refs})
	out := func(id string, tens int) messages.Outgoing {
		return messages.Outgoing{ID: id, SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: strings.Repeat("0123456789", tens)}
	}
	submit := func(o messages.Outgoing) <-chan messages.DeliveryResult {
		v := make(chan messages.DeliveryResult, 1)
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(20*time.Second))
			defer cancel()
			v <- c.Submit(ctx, o, "")
		}()
		return v
	}
	long := submit(out("m-long", 80)) // 800 septets: 6 parts, slots at 0, 2, ... 10 s
	polltest.Until(t, 20*time.Second, "m-long's first part sent, the wait for its second", func() bool {
		return len(smsc.Submits()) == 1 && slices.Contains(clk.pending(time.Minute), 2*time.Second)
	})
	for i := range 3 {
		if v := <-submit(out(fmt.Sprintf("m-kept-%d", i), 20)); v.Status != messages.Retry || !v.Deferred { // 2 parts
			t.Fatalf("m-kept-%d, its slots after 10 s: %+v; want a deferred retry", i, v)
		}
	}
	if v := <-submit(out("m-never", 100)); v.Status != messages.Retry || v.Deferred { // 7 parts: 12 s of slots
		t.Fatalf("m-never, 7 parts that never fit in 10 s: %+v; want an ordinary retry", v)
	}
	if p, ok, err := smpp.PartOf(smsc.Submits()[0].SM); err != nil || !ok || p.Ref != 40 {
		t.Fatalf("m-long's first part: %+v, %v, %v; want reference 40", p, ok, err)
	}
	if next := refs.Next(); next != 41 {
		t.Errorf("the next reference is %d, want 41: the %d texts the pacing kept took references", next, next-41)
	}
	c.Close()
	<-long
}
