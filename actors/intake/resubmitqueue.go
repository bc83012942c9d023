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
func (q *resubmitQueue) Out(j resubmitJob) { q.out = &j }

// Done says the store call out came back (or its goroutine panicked), and
// returns its job: the intake's again, to go on with (Out) or to end.
func (q *resubmitQueue) Done() (resubmitJob, bool) {
	if q.out == nil {
		return resubmitJob{}, false
	}
	j := *q.out
	q.out = nil
	return j, true
}

// Drop empties the queue and returns the jobs that were in it, not the one
// out (to be answered: the intake is restarting).
func (q *resubmitQueue) Drop() []resubmitJob {
	jobs := q.jobs
	q.jobs = nil
	return jobs
}

// Stop empties the queue and returns every job, the one out first (to be
// answered: the intake is stopping, and the answer of the call out will
// not be read).
func (q *resubmitQueue) Stop() []resubmitJob {
	jobs := q.Drop()
	if q.out != nil {
		jobs = append([]resubmitJob{*q.out}, jobs...)
		q.out = nil
	}
	return jobs
}
