package intake

import (
	"slices"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestResubmitQueueGivesOutOneAtATimeInOrder: jobs are given out in the
// order they were queued, never one while another is out; a restart drops
// the queued ones but not the one out, a stop both, but for the one out
// whose call left a write (answered as made).
func TestResubmitQueueGivesOutOneAtATimeInOrder(t *testing.T) {
	job := func(id string) resubmitJob { return resubmitJob{one: &messages.Resubmit{ID: id}} }
	ids := func(js []resubmitJob) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.one.ID)
		}
		return out
	}
	var q resubmitQueue
	if _, ok := q.Next(); ok {
		t.Fatal("a job from an empty queue")
	}
	if _, ok := q.Done(); ok {
		t.Fatal("a job done with none out")
	}
	q.Add(job("a"))
	q.Add(job("b"))
	a, ok := q.Next()
	if !ok || a.one.ID != "a" {
		t.Fatalf("first job %v, %v; want a", a.one, ok)
	}
	q.Out(a)
	if j, ok := q.Next(); ok {
		t.Fatalf("gave out %s while a is out", j.one.ID)
	}
	if j, ok := q.Done(); !ok || j.one.ID != "a" {
		t.Fatalf("done %v, %v; want a", j.one, ok)
	}
	q.Out(a) // a's second call
	q.Add(job("c"))
	if j, ok := q.Next(); ok {
		t.Fatalf("gave out %s while a's second call is out", j.one.ID)
	}
	q.Done()
	b, ok := q.Next()
	if !ok || b.one.ID != "b" {
		t.Fatalf("next job %v, %v; want b", b.one, ok)
	}
	q.Out(b)
	q.Add(job("d"))
	if got := ids(q.Drop()); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("dropped %v, want c and d (b is out)", got)
	}
	if j, ok := q.Next(); ok {
		t.Fatalf("gave out %s after the drop, with b out", j.one.ID)
	}
	q.Add(job("e"))
	q.Back(&resubmitRead{job: b})
	if w, jobs := q.Stop(); w != nil || !slices.Equal(ids(jobs), []string{"b", "e"}) {
		t.Fatalf("stopped %v and %v, want no write, b (out, its read back) and e", w, ids(jobs))
	}
	if _, ok := q.Done(); ok {
		t.Fatal("a job out after the stop")
	}

	// The write the call out left is the stop's to answer, not a job to
	// fail; what a call left goes with its Done.
	q.Add(job("f"))
	f, _ := q.Next()
	q.Out(f)
	q.Back(&resubmitWritten{job: f})
	q.Add(job("g"))
	if w, jobs := q.Stop(); w == nil || w.job.one.ID != "f" || !slices.Equal(ids(jobs), []string{"g"}) {
		t.Fatalf("stopped %v and %v, want f's write and g", w, ids(jobs))
	}
	q.Add(job("h"))
	h, _ := q.Next()
	q.Out(h)
	q.Back(&resubmitWritten{job: h})
	q.Done()
	q.Out(h)
	if w, jobs := q.Stop(); w != nil || !slices.Equal(ids(jobs), []string{"h"}) {
		t.Fatalf("stopped %v and %v, want no write (h's next call left none) and h", w, ids(jobs))
	}
}
