package intake

// resubmitQueue is the queue of the resubmit jobs (resubmit.go): in the
// order they were asked for, one out at a time (from its first store call
// to its answer; between its calls it is decided on the actor, within one
// Receive). It outlives a restart of
// the intake, so that a job whose store call is out when the intake
// restarts comes back to the next incarnation, which goes on with it, and
// no other job starts meanwhile.
type resubmitQueue struct {
	jobs []resubmitJob
	out  *resubmitJob
	// back is what the store call out returned (Back), left by its
	// goroutine before it ends: a stopping intake reads no more messages,
	// so it takes a write made from here (Stop).
	back any
}

// Add queues j behind the jobs queued.
func (q *resubmitQueue) Add(j resubmitJob) { q.jobs = append(q.jobs, j) }

// Next gives out the first job queued when none is out.
func (q *resubmitQueue) Next() (resubmitJob, bool) {
	if q.out != nil || len(q.jobs) == 0 {
		return resubmitJob{}, false
	}
	j := q.jobs[0]
	q.jobs[0] = resubmitJob{}
	q.jobs = q.jobs[1:]
	return j, true
}

// Out says a store call of j is out.
func (q *resubmitQueue) Out(j resubmitJob) { q.out, q.back = &j, nil }

// Back leaves what the store call out returned (a *resubmitRead or a
// *resubmitWritten): called on the call's goroutine, the one goroutine
// besides the intake's that touches the queue, before the call ends (the
// intake's WaitGroup of calls) and before its result is sent, so that the
// intake reads it only after.
func (q *resubmitQueue) Back(r any) { q.back = r }

// Done says the store call out came back (or its goroutine panicked), and
// returns its job: the intake's again, to go on with (Out) or to end.
func (q *resubmitQueue) Done() (resubmitJob, bool) {
	if q.out == nil {
		return resubmitJob{}, false
	}
	j := *q.out
	q.out, q.back = nil, nil
	return j, true
}

// Drop empties the queue and returns the jobs that were in it, not the one
// out (to be answered: the intake is restarting).
func (q *resubmitQueue) Drop() []resubmitJob {
	jobs := q.jobs
	q.jobs = nil
	return jobs
}

// Stop empties the queue once the call out has ended (the intake is
// stopping, and the result the call sent back will not be read). It
// returns the write of the job out when the call left one (Back): its
// changes may have been made, so it is answered as they were; and the jobs
// to answer that they were not, the one out first when it left none (a
// read: nothing changed yet; or its goroutine panicked), then those
// queued.
func (q *resubmitQueue) Stop() (*resubmitWritten, []resubmitJob) {
	jobs := q.Drop()
	out, back := q.out, q.back
	q.out, q.back = nil, nil
	if out == nil {
		return nil, jobs
	}
	if w, ok := back.(*resubmitWritten); ok {
		return w, jobs
	}
	return nil, append([]resubmitJob{*out}, jobs...)
}
