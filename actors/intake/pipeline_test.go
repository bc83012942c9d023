package intake

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func TestPipelineBoundsCommitsInFlight(t *testing.T) {
	p := Pipeline{Depth: 2, MaxBatch: 3}
	if _, _, ok := p.Take(); ok {
		t.Fatal("a batch from an empty pipeline")
	}
	for i := range 7 {
		s, _ := submit(fmt.Sprint(i), "44")
		p.Submit(s, nil)
	}
	if !p.Full() {
		t.Error("7 queued with MaxBatch 3: not full")
	}
	var sizes []int
	for {
		e, _, ok := p.Take()
		if !ok {
			break
		}
		sizes = append(sizes, len(e))
	}
	if fmt.Sprint(sizes) != "[3 3]" {
		t.Fatalf("batches %v, want two of 3 (Depth 2), the rest waiting", sizes)
	}
	p.Done()
	e, reports, ok := p.Take()
	if !ok || len(e) != 1 || len(reports) != 0 {
		t.Fatalf("after a commit ended: %d entries, ok %v", len(e), ok)
	}
	p.Statuses(&messages.ApplyStatuses{From: "b", Reports: []messages.StatusReport{{ID: "x", Status: messages.ReportFailed, Reason: "gone"}}})
	p.Done()
	e, reports, ok = p.Take()
	if !ok || len(e) != 0 || len(reports) != 1 || reports[0].updates[0].Result != persistence.ResultFailed {
		t.Fatalf("a report alone makes a batch: %d entries, %+v", len(e), reports)
	}
	empty := make(chan messages.AcceptForwardsReply, 1)
	if p.Forwards(&messages.AcceptForwards{Reply: empty}) {
		t.Error("an empty forward request queued")
	}
	if r := <-empty; r.Err != nil || r.Results == nil || len(r.Results) != 0 {
		t.Errorf("an empty forward request answered %+v, want no results", r)
	}
}

// ukTable routes 44 to the local frontend uk.
func ukTable() *Table {
	return NewTable([]messages.Route{{Prefix: "44", Frontend: "uk"}}, []messages.Frontend{{Name: "uk", Mode: messages.ModePull}})
}

// TestPipelineSubmitRefusesWhatCannotBeRouted: a submission without an id
// that the table cannot route is answered at once and never queued, unless
// the directory is shared (its commit reads it again) or the gateway
// refused it already (its commit answers that); one with an id is queued,
// as it may be a retry of one stored while it could be routed.
func TestPipelineSubmitRefusesWhatCannotBeRouted(t *testing.T) {
	refusal := messages.Errorf(messages.CodeInvalidRequest, "refused at the gateway")
	cases := []struct {
		name, id, dest string
		refusal        error
		shared         bool
		queued         bool
	}{
		{name: "routed", dest: "447700", queued: true},
		{name: "no route", dest: "33", queued: false},
		{name: "no route, with an id", id: "x", dest: "33", queued: true},
		{name: "no route, shared directory", dest: "33", shared: true, queued: true},
		{name: "refused at the gateway", dest: "447700", refusal: refusal, queued: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Pipeline{Depth: 1, MaxBatch: 10, Shared: c.shared}
			s, reply := submit(c.id, c.dest)
			s.Refusal = c.refusal
			if got := p.Submit(s, ukTable()); got != c.queued || (len(p.entries) == 1) != c.queued {
				t.Fatalf("Submit = %v with %d queued, want queued %v", got, len(p.entries), c.queued)
			}
			select {
			case r := <-reply:
				var me *messages.Error
				if c.queued || !errors.As(r.Err, &me) || me.Code != messages.CodeNoRoute {
					t.Fatalf("answered %+v at once; want no_route only when not queued", r)
				}
			default:
				if !c.queued {
					t.Fatal("not queued, and not answered")
				}
			}
		})
	}
}

// TestPipelineQueuedAsksForOneFlush: work queued asks for a flush unless
// one is on its way; a full batch starts a commit at once, flush or not.
func TestPipelineQueuedAsksForOneFlush(t *testing.T) {
	type step struct {
		do           string // "submit", "take" or "flushed"
		start, flush bool   // what Queued says after a submit
	}
	steps := []step{
		{do: "submit", flush: true},
		{do: "submit"}, // the flush is on its way
		{do: "submit", start: true},
		{do: "take"},
		{do: "submit"}, // the flush is still on its way
		{do: "flushed"},
		{do: "submit", flush: true},
		{do: "submit", start: true}, // full again
	}
	p := Pipeline{Depth: 2, MaxBatch: 3}
	for i, st := range steps {
		switch st.do {
		case "submit":
			s, _ := submit(fmt.Sprint(i), "44")
			p.Submit(s, nil)
			if start, flush := p.Queued(); start != st.start || flush != st.flush {
				t.Fatalf("step %d: Queued = start %v, flush %v; want %v, %v", i, start, flush, st.start, st.flush)
			}
		case "take":
			p.Take()
		case "flushed":
			p.Flushed()
		}
	}
}

// TestPipelineAgain: entries given back are queued ahead, marked
// rerouted, and counted (the intake reads the directory again for any);
// none leave the queue as it is.
func TestPipelineAgain(t *testing.T) {
	p := Pipeline{Depth: 1, MaxBatch: 10}
	s1, _ := submit("a", "44")
	p.Submit(s1, nil)
	if n := p.Again(nil); n != 0 || len(p.entries) != 1 {
		t.Fatalf("Again(nil) = %d, %d queued; want 0, 1", n, len(p.entries))
	}
	s2, _ := submit("b", "44")
	if n := p.Again([]entry{{sub: s2}}); n != 1 {
		t.Fatalf("Again of one = %d", n)
	}
	if e := p.entries; len(e) != 2 || e[0].sub != s2 || !e[0].rerouted || e[1].sub != s1 || e[1].rerouted {
		t.Fatalf("queue %+v; want b (rerouted) ahead of a", e)
	}
}

// TestPipelineNext: the batch Next gives out, as routed by the table and,
// on a shared directory only, by one read of it again when a message
// misses; and a batch left empty (everything in it answered at once) ends
// there, its commit done, and the next is taken.
func TestPipelineNext(t *testing.T) {
	// The directory as read again: 33 goes to fr, served here too.
	reread := NewTable([]messages.Route{{Prefix: "44", Frontend: "uk"}, {Prefix: "33", Frontend: "fr"}},
		[]messages.Frontend{{Name: "uk", Mode: messages.ModePull}, {Name: "fr", Mode: messages.ModePull}})
	refused := messages.Errorf(messages.CodeInvalidRequest, "refused at the gateway")
	type sub struct {
		id, dest string
		refused  bool
	}
	cases := []struct {
		name     string
		shared   bool
		maxBatch int
		subs     []sub
		forwards []string // frontends of one peer's forward request
		ok       bool
		stored   []string // id:frontend, or id:lookup for a stored-only lookup
		rereads  int
		answered []int // the subs answered at once
	}{
		{name: "nothing queued"},
		{name: "routed", subs: []sub{{id: "a", dest: "447"}}, ok: true, stored: []string{"a:uk"}},
		{name: "a miss with an id is looked up", subs: []sub{{id: "a", dest: "447"}, {id: "b", dest: "337"}},
			ok: true, stored: []string{"a:uk", "b:lookup"}},
		{name: "a miss on a shared directory reads it again", shared: true,
			subs: []sub{{id: "a", dest: "447"}, {id: "b", dest: "337"}, {dest: "338"}},
			ok:   true, stored: []string{"a:uk", "b:fr", "generated:fr"}, rereads: 1},
		{name: "no miss reads nothing", shared: true, subs: []sub{{id: "a", dest: "447"}}, ok: true, stored: []string{"a:uk"}},
		{name: "a miss after the read is looked up", shared: true, subs: []sub{{id: "a", dest: "997"}},
			ok: true, stored: []string{"a:lookup"}, rereads: 1},
		{name: "a forward for a frontend not served here is looked up", forwards: []string{"uk", "fr"},
			ok: true, stored: []string{"f0:uk", "f1:lookup"}},
		{name: "a forward for a frontend served since the read", shared: true, forwards: []string{"fr"},
			ok: true, stored: []string{"f0:fr"}, rereads: 1},
		{name: "an empty batch is done and the next taken", maxBatch: 1,
			subs: []sub{{dest: "447", refused: true}, {id: "b", dest: "447"}},
			ok:   true, stored: []string{"b:uk"}, answered: []int{0}},
		{name: "only refusals", subs: []sub{{dest: "447", refused: true}}, answered: []int{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Pipeline{Depth: 1, MaxBatch: 10, Shared: c.shared}
			if c.maxBatch > 0 {
				p.MaxBatch = c.maxBatch
			}
			var replies []chan messages.SubmitReply
			for _, s := range c.subs {
				m, reply := submit(s.id, s.dest)
				if s.refused {
					m.Refusal = refused
				}
				p.entries = append(p.entries, entry{sub: m}) // as Submit queues it on a shared directory
				replies = append(replies, reply)
			}
			if len(c.forwards) > 0 {
				fwd := &messages.AcceptForwards{From: "peer", Reply: make(chan messages.AcceptForwardsReply, 1)}
				for i, fe := range c.forwards {
					fwd.Forwards = append(fwd.Forwards, messages.Forward{ID: fmt.Sprint("f", i), DestSMSC: "a", Frontend: fe})
				}
				p.Forwards(fwd)
			}
			rereads := 0
			rt := router{table: ukTable(), node: "a", newID: func() string { return "generated" }}
			b, ok := p.Next(t0, rt, func() *Table { rereads++; return reread })
			if ok != c.ok || rereads != c.rereads {
				t.Fatalf("Next = ok %v after %d reads, want %v after %d", ok, rereads, c.ok, c.rereads)
			}
			var stored []string
			if ok {
				for _, nm := range b.Stored {
					to := "lookup"
					if !nm.StoredOnly {
						to = nm.Work.Target
					}
					stored = append(stored, nm.ID+":"+to)
				}
				if b.Now != t0 {
					t.Errorf("batch at %v, want %v", b.Now, t0)
				}
			}
			if !slices.Equal(stored, c.stored) {
				t.Errorf("stored %q, want %q", stored, c.stored)
			}
			var answered []int
			for i, r := range replies {
				select {
				case got := <-r:
					if got.Err != refused {
						t.Errorf("sub %d answered %+v, want its refusal", i, got)
					}
					answered = append(answered, i)
				default:
				}
			}
			if !slices.Equal(answered, c.answered) {
				t.Errorf("answered at once %v, want %v", answered, c.answered)
			}
			// The batch given out is the one commit in flight; a batch left
			// empty was done.
			inFlight := 0
			if ok {
				inFlight = 1
			}
			if p.inFlight != inFlight {
				t.Errorf("%d commits in flight, want %d", p.inFlight, inFlight)
			}
		})
	}
}
