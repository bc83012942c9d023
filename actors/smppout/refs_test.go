package smppout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/gsm7"
	"github.com/switchboard-dev/switchboard/messages"
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
