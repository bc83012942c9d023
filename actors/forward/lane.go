package forward

// Lane is the pure flow control of one kind of outbound work to a peer
// (forwards, or delivery_status reports). It decides when to claim a batch
// from the store: only while the link is open, never more than InFlight
// requests at once, and only while the last claim suggested there is more.
// The queue itself stays in the store; a lane holds no messages.
type Lane struct {
	inFlight int
	limit    int
	open     bool
	// more is true until a claim comes back short: there may be due work.
	more bool
	// kicks counts Kick calls: a kick during a claim (which may not have
	// seen the new work) outlives the claim's coming back short.
	kicks int
}

// NewLane returns a closed lane allowing limit requests in flight.
func NewLane(limit int) *Lane { return &Lane{limit: limit} }

// Open reports whether the lane may send.
func (l *Lane) Open() bool { return l.open }

// InFlight counts requests under way.
func (l *Lane) InFlight() int { return l.inFlight }

// SetOpen opens (the peer is healthy) or closes the lane. Opening assumes
// there is work: a peer turning healthy drains at once.
func (l *Lane) SetOpen(open bool) {
	l.open = open
	if open {
		l.more = true
	}
}

// Drained reports whether the last claim came back short: no work waits
// in the store that new work could overtake.
func (l *Lane) Drained() bool { return !l.more }

// Kick says new work may be due (a commit, a tick).
func (l *Lane) Kick() {
	l.more = true
	l.kicks++
}

// Wait makes the lane claim nothing until it is kicked again (a store
// round that failed).
func (l *Lane) Wait() { l.more = false }

// Kicks counts the kicks so far (see Claimed).
func (l *Lane) Kicks() int { return l.kicks }

// Claims returns how many claims to start now.
func (l *Lane) Claims() int {
	if !l.open || !l.more || l.inFlight >= l.limit {
		return 0
	}
	return l.limit - l.inFlight
}

// Claimed records a claim's result: n rows of at most batch. A short claim
// means the due work is exhausted for now, unless the lane was kicked since
// the claim began (kicksAt is Kicks() then). It returns whether a request is
// to be sent (n > 0).
func (l *Lane) Claimed(n, batch, kicksAt int) bool {
	if n < batch && l.kicks == kicksAt {
		l.more = false
	}
	if n == 0 {
		return false
	}
	l.inFlight++
	return true
}

// Took records a request for work that came without a claim (handed
// over): it is in flight like a claimed one, and says nothing of what else
// is due.
func (l *Lane) Took() { l.inFlight++ }

// Done records a finished request. A request that failed closes the lane
// until the peer is found healthy again; Done reports whether this one
// closed it (the others in flight then fail on a closed lane).
func (l *Lane) Done(ok bool) (closed bool) {
	if l.inFlight > 0 {
		l.inFlight--
	}
	if !ok && l.open {
		l.open = false
		return true
	}
	return false
}
