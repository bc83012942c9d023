package delivery

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestRestartCarriesEverything: what a worker hands its next incarnation
// as it restarts (handOn) is what that one holds once it took it on
// (inherit): restarted again at once, with nothing happening between, it
// hands on the same carry, so nothing of it was dropped on the way. The
// worker's first carry has every part set (a part added to carry, Carry or
// linkCarry fails here until this test's worker holds some of it), so a
// part handOn takes and inherit forgets is caught. The worker holds: an
// earlier incarnation's round out, with a bus message held for it; that
// incarnation's delivery under way; a delivery of its own under way; a
// verdict to record; its own round out, with a retry (a final verdict of
// it would be carried as a verdict too, and the next incarnation would
// hold its message for that, no longer for the round: a second carry that
// differs, and keeps the message all the same), a deferral (429), whose
// run of deferrals the next one backs off from; and its fetch out.
func TestRestartCarriesEverything(t *testing.T) {
	earlierBy := t0.Add(20 * time.Second)
	earlier := &Round{Outcomes: []persistence.Outcome{{MessageID: "e0", Result: persistence.ResultDelivered}}}
	held := bus.Holds[*bus.Msg]{Touch: busTouch}
	for _, id := range []string{"e0", "o0"} {
		held.Add(id, &bus.Msg{}, t0)
	}

	core := newPush(4)
	core.Inherit(Carry{flights: map[string]time.Time{"o0": t0.Add(5 * time.Second)}, rounds: map[*Round]time.Time{earlier: earlierBy}})
	link := newBusLink[*bus.Msg](false)
	link.inherit(linkCarry[*bus.Msg]{holds: held, inherited: map[string]inheritance{"e0": {round: earlier, until: earlierBy}, "o0": {}}})
	f := link.fetch(t0, 3)
	if f == nil {
		t.Fatal("no fetch with room")
	}
	core.Handover(t0, work("f", 3, time.Minute))
	for _, id := range []string{"f0", "f1", "f2"} {
		if nak, _ := link.take(f, id, &bus.Msg{}, t0, core.Named); len(nak) != 0 {
			t.Fatalf("%s naked as it was taken", id)
		}
	}
	core.Verdict(t0, "f1", 1, messages.DeliveryResult{Status: messages.Retry, Reason: "HTTP 429", Deferred: true}, false, rng())
	if r, ok := core.Next(t0); !ok || len(r.Outcomes) != 1 {
		t.Fatalf("round %+v, want f1's retry", r)
	}
	core.Verdict(t0, "f2", 1, messages.DeliveryResult{Status: messages.Delivered}, false, rng())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := ctx.Done()
	deps := &Deps{StoreTimeout: 30 * time.Second}
	w := &Worker{d: deps, core: core, link: link, life: &workerLife{}, fetching: fetchOut{cancel: cancel, ended: ended}}
	w.handOn(t0)
	first := w.life.carry
	if unset := unsetParts(reflect.ValueOf(first), "carry"); len(unset) > 0 {
		t.Fatalf("the first carry leaves %v unset: the worker here must hold some of each part", unset)
	}

	next := &Worker{d: deps, core: newPush(4), link: newBusLink[*bus.Msg](false), life: w.life}
	next.inherit()
	if !reflect.ValueOf(w.life.carry).IsZero() {
		t.Errorf("the life still has a carry once the next incarnation took it: %+v", w.life.carry)
	}
	next.handOn(t0)
	second := w.life.carry
	if reflect.ValueOf(second.fetch.cancel).Pointer() != reflect.ValueOf(first.fetch.cancel).Pointer() || second.fetch.ended != first.fetch.ended {
		t.Errorf("the next incarnation hands on another fetch: %+v, want %+v", second.fetch, first.fetch)
	}
	first.fetch, second.fetch = fetchOut{}, fetchOut{} // funcs are never DeepEqual
	if !reflect.DeepEqual(first, second) {
		t.Errorf("restarted again, the next incarnation hands on\n%+v\nwant what it took\n%+v", second, first)
	}
}

// unsetParts names the fields of v, a value of this package's struct type,
// that are zero, looking into those of this package's struct types.
func unsetParts(v reflect.Value, path string) []string {
	var out []string
	for i := range v.NumField() {
		fv, name := v.Field(i), path+"."+v.Type().Field(i).Name
		switch {
		case fv.Kind() == reflect.Struct && fv.Type().PkgPath() == v.Type().PkgPath():
			out = append(out, unsetParts(fv, name)...)
		case fv.IsZero() || fv.Kind() == reflect.Map && fv.Len() == 0 || fv.Kind() == reflect.Slice && fv.Len() == 0:
			out = append(out, name)
		}
	}
	return out
}
