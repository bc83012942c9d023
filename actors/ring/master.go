package ring

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// MasterConfig configures a Master.
type MasterConfig struct {
	// Self is the master's own member document: its id, address, site and
	// services (joiners must match its node, cluster and region, and offer
	// a subset of its services).
	Self messages.RingJoin
	// PublishInterval is how often the master republishes; a member that
	// has not confirmed the current epoch within two intervals of its
	// publication is dropped.
	PublishInterval time.Duration
	// Grace is how long a member may go without an open subscription call
	// before it is dropped; 0 means min(PublishInterval, 5s): a live slave
	// reopens its poll at once, so a few seconds covers a reconnect.
	Grace time.Duration
}

// member is the master's view of one slave.
type member struct {
	join       messages.RingJoin
	joinedAt   time.Time
	open       int       // subscription calls open now
	lastClosed time.Time // when the last one ended (or the join)
	confirmed  uint64    // the epoch its last poll said it holds
}

// Master is the ring master's membership state machine. It is pure: the
// shell feeds it joins, polls, leaves and the time, calls Next when
// NextCheck says, stores what Next returns (compare-and-set on the epoch)
// and reports it with Published. Not safe for concurrent use.
type Master struct {
	self     messages.RingJoin
	interval time.Duration
	grace    time.Duration

	members map[string]*member // the slaves; the master itself is implicit

	published bool
	current   messages.RingAssignment
	// epoch is current.Epoch, or the stored epoch before the first publish
	// or after Rebase.
	epoch uint64
	// rebased: the store holds another master's assignment over current;
	// Next replaces it even when the membership did not change.
	rebased     bool
	publishedAt time.Time
	applied     uint64 // the epoch the master's own partitions hold

	// memory is each instance's ranges under the last assignment that had
	// it (first the stored one): a member that comes back gets its old
	// ranges back first, so a restart or a master fail-over moves little.
	memory map[string][]messages.TokenRange
	// owned is who held what under the current (or stored) assignment, to
	// count reassignments.
	owned         map[string][]messages.TokenRange
	reassignments int
}

// NewMaster starts a master whose only member is itself. stored is the
// assignment in the store (the zero RingState when none): its epoch is the
// base of the next one, and its members' ranges are the previous ranges
// Assign starts from.
func NewMaster(cfg MasterConfig, stored persistence.RingState) *Master {
	grace := cfg.Grace
	if grace == 0 {
		grace = min(cfg.PublishInterval, 5*time.Second)
	}
	self := cfg.Self
	self.Services = canonical(self.Services)
	self.Capabilities = sortedSet(self.Capabilities)
	m := &Master{
		self:     self,
		interval: cfg.PublishInterval,
		grace:    grace,
		members:  make(map[string]*member),
		epoch:    stored.Epoch,
		memory:   make(map[string][]messages.TokenRange),
		owned:    make(map[string][]messages.TokenRange),
	}
	for _, sm := range stored.Members {
		rs := Normalize(sm.Ranges)
		m.memory[sm.InstanceID] = rs
		m.owned[sm.InstanceID] = rs
	}
	return m
}

// Join admits j (a *Refusal when Admit refuses it, or when it claims the
// master's own id). A known id is a member that restarted or lost track:
// its document is replaced and it holds no epoch until it polls. A join
// counts as a subscription call opened and closed at now, so a joiner that
// never polls is dropped after Grace. The next assignment includes it.
func (m *Master) Join(now time.Time, j messages.RingJoin) error {
	if j.InstanceID != "" && j.InstanceID == m.self.InstanceID {
		return &Refusal{Code: CodeBadJoin, Message: fmt.Sprintf("instance_id %q is the master's own", j.InstanceID)}
	}
	if r := Admit(m.self, j); r != nil {
		return r
	}
	j.Services = canonical(j.Services)
	j.Capabilities = sortedSet(j.Capabilities)
	mb, ok := m.members[j.InstanceID]
	if ok && mb.open > 0 && mb.join.Address != j.Address {
		// Two live processes with one instance id would pass one fence
		// and work the same rows: refuse the newcomer while the member
		// it claims to be is subscribed from elsewhere (a restarted
		// instance whose old call has not ended yet gets in once it has).
		return &Refusal{Code: CodeDuplicate, Message: fmt.Sprintf(
			"instance_id %q is a member subscribed from %s; %s cannot join under the same id (give every instance its own --instance-id)",
			j.InstanceID, mb.join.Address, j.Address)}
	}
	if !ok {
		mb = &member{}
		m.members[j.InstanceID] = mb
	}
	mb.join = j
	mb.joinedAt = now
	mb.lastClosed = now
	mb.confirmed = 0
	return nil
}

// PollOpened records that id opened a subscription call saying it holds
// epoch. It returns false when id is not a member (it must join again).
func (m *Master) PollOpened(now time.Time, id string, epoch uint64) bool {
	if id == m.self.InstanceID {
		return true
	}
	mb, ok := m.members[id]
	if !ok {
		return false
	}
	mb.open++
	mb.confirmed = epoch
	return true
}

// PollClosed records that a subscription call of id ended (answered, or
// the connection went away).
func (m *Master) PollClosed(now time.Time, id string) {
	if mb, ok := m.members[id]; ok {
		mb.open = max(0, mb.open-1)
		mb.lastClosed = now
	}
}

// Leave drops id at once (its graceful goodbye). The master never leaves
// its own ring.
func (m *Master) Leave(now time.Time, id string) {
	delete(m.members, id)
}

// Applied records that the master's own partitions hold epoch.
func (m *Master) Applied(epoch uint64) { m.applied = epoch }

// Next drops the members that went silent (no open subscription call and
// the last one ended Grace or longer ago) and those that have not
// confirmed the current epoch within 2×PublishInterval of its publication
// (or of their join, when later); the master itself is never dropped. Then,
// when the members or their documents (address, zone, services,
// capabilities) differ from the current assignment's, or none was
// published yet (or since Rebase), it returns the next assignment: Assign
// from the previous ranges (members coming back first get the ranges they
// last had), epoch one above the current one (or the stored one). It is
// not current until Published.
func (m *Master) Next(now time.Time) (messages.RingAssignment, bool) {
	for _, id := range m.ids() {
		if id == m.self.InstanceID {
			continue
		}
		mb := m.members[id]
		silent := mb.open == 0 && !now.Before(mb.lastClosed.Add(m.grace))
		deadline, unconfirmed := m.confirmDeadline(id, mb)
		if silent || (unconfirmed && !now.Before(deadline)) {
			delete(m.members, id)
		}
	}
	docs := m.docs()
	if m.published && !m.rebased && sameDocs(docs, m.current.Members) {
		return messages.RingAssignment{}, false
	}

	inCurrent := make(map[string]bool, len(m.current.Members))
	for _, cm := range m.current.Members {
		inCurrent[cm.InstanceID] = true
	}
	var back []messages.TokenRange // the old ranges of members coming back
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.InstanceID
		if !inCurrent[d.InstanceID] {
			back = append(back, m.memory[d.InstanceID]...)
		}
	}
	prev := make(map[string][]messages.TokenRange, len(ids))
	for _, id := range ids {
		if inCurrent[id] {
			prev[id] = subtract(m.memory[id], back)
		} else {
			prev[id] = m.memory[id]
		}
	}
	ranges := Assign(prev, ids)
	for i := range docs {
		docs[i].Ranges = ranges[docs[i].InstanceID]
	}
	return messages.RingAssignment{
		Epoch:         m.epoch + 1,
		Master:        m.self.InstanceID,
		MasterAddress: m.self.Address,
		Cluster:       m.self.Cluster,
		Region:        m.self.Region,
		Members:       docs,
	}, true
}

// Published makes a current: it was stored at now.
func (m *Master) Published(now time.Time, a messages.RingAssignment) {
	m.current = FromState(persistence.RingState{
		Epoch: a.Epoch, Master: a.Master, MasterAddress: a.MasterAddress, Members: a.Members,
	}, a.Cluster, a.Region)
	m.published, m.rebased = true, false
	m.epoch = a.Epoch
	m.publishedAt = now
	var before []messages.TokenRange // everything owned under the previous assignment
	for _, rs := range m.owned {
		before = append(before, rs...)
	}
	owned := make(map[string][]messages.TokenRange, len(a.Members))
	for _, am := range a.Members {
		rs := Normalize(am.Ranges)
		m.reassignments += len(intersect(subtract(rs, m.owned[am.InstanceID]), before))
		owned[am.InstanceID] = rs
		m.memory[am.InstanceID] = rs
	}
	m.owned = owned
}

// Rebase takes stored, the epoch of an assignment that another master
// stored over this one's view (while this one holds the lock: an old
// master's publication that confirmed its lock before this one took it,
// and committed after this one read the store), as the base of the next:
// Next numbers its assignment one above stored and returns it even when
// the membership did not change, so that this master's assignment replaces
// the other's. Current stays this master's last (what its members hold),
// and so do the ranges the next starts from.
func (m *Master) Rebase(stored uint64) {
	m.epoch = stored
	m.rebased = true
}

// Current is the current assignment (the zero one before any publish).
func (m *Master) Current() messages.RingAssignment {
	a := m.current
	a.Members = copyMembers(a.Members)
	return a
}

// Coverage is the fraction of the ring whose owner under Current has
// confirmed its epoch (a poll naming it, or Applied for the master); 0
// before any publish, 1 when every member holds the current epoch.
func (m *Master) Coverage() float64 {
	if !m.published {
		return 0
	}
	var ok []messages.TokenRange
	for _, cm := range m.current.Members {
		if m.confirmed(cm.InstanceID) {
			ok = append(ok, cm.Ranges...)
		}
	}
	return Fraction(ok)
}

// Reassignments counts, over all publications, the ranges that changed
// owner: ranges a member received that another instance held under the
// previous assignment (the stored one for the first publication). Tokens
// nobody held before do not count; a range counts once, however many
// tokens it has.
func (m *Master) Reassignments() int { return m.reassignments }

// NextCheck is when Next should be called again at the latest: now when
// the membership changed since the current assignment (or none was
// published, or Rebase asks for one), else the earliest time a member would be dropped; the zero
// time when nothing is pending.
func (m *Master) NextCheck(now time.Time) time.Time {
	if !m.published || m.rebased || !sameDocs(m.docs(), m.current.Members) {
		return now
	}
	var at time.Time
	earliest := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	for _, id := range m.ids() {
		if id == m.self.InstanceID {
			continue
		}
		mb := m.members[id]
		if mb.open == 0 {
			earliest(mb.lastClosed.Add(m.grace))
		}
		if d, ok := m.confirmDeadline(id, mb); ok {
			earliest(d)
		}
	}
	return at
}

// confirmDeadline is when a member of the current assignment that does not
// hold its epoch is dropped; ok is false when that does not apply.
func (m *Master) confirmDeadline(id string, mb *member) (time.Time, bool) {
	if !m.published || mb.confirmed == m.current.Epoch {
		return time.Time{}, false
	}
	if !slices.ContainsFunc(m.current.Members, func(cm messages.RingMember) bool { return cm.InstanceID == id }) {
		return time.Time{}, false
	}
	from := m.publishedAt
	if mb.joinedAt.After(from) {
		from = mb.joinedAt
	}
	return from.Add(2 * m.interval), true
}

// confirmed reports whether id holds the current epoch.
func (m *Master) confirmed(id string) bool {
	if id == m.self.InstanceID {
		return m.applied == m.current.Epoch
	}
	mb, ok := m.members[id]
	return ok && mb.confirmed == m.current.Epoch
}

// ids are the member ids, the master's included, sorted.
func (m *Master) ids() []string {
	ids := []string{m.self.InstanceID}
	for id := range m.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Subscribed are the members whose subscription call is open, sorted.
func (m *Master) Subscribed() []string {
	var out []string
	for _, id := range m.ids() {
		if mb, ok := m.members[id]; ok && mb.open > 0 {
			out = append(out, id)
		}
	}
	return out
}

// docs are the member documents (without ranges), sorted by id.
func (m *Master) docs() []messages.RingMember {
	var out []messages.RingMember
	for _, id := range m.ids() {
		j := m.self
		if id != m.self.InstanceID {
			j = m.members[id].join
		}
		out = append(out, messages.RingMember{
			InstanceID: j.InstanceID,
			Address:    j.Address,
			Zone:       j.Zone,
			Services:   slices.Clone(j.Services),
			// A member that restarts as another version joins again
			// with other capabilities: a new document, a new epoch.
			Capabilities: slices.Clone(j.Capabilities),
		})
	}
	return out
}

// sameDocs reports whether a and b list the same members with the same
// documents (address, zone, services, capabilities), ranges aside.
func sameDocs(a, b []messages.RingMember) bool {
	return slices.EqualFunc(a, b, func(x, y messages.RingMember) bool {
		return x.InstanceID == y.InstanceID && x.Address == y.Address &&
			x.Zone == y.Zone && slices.Equal(x.Services, y.Services) && slices.Equal(x.Capabilities, y.Capabilities)
	})
}

// canonical is services in the order of messages.AllServices, without
// duplicates (Admit has refused unknown ones).
func canonical(services []string) []string {
	var out []string
	for _, s := range messages.AllServices {
		if slices.Contains(services, s) {
			out = append(out, s)
		}
	}
	return out
}

// sortedSet is names sorted, without duplicates (nil when none).
func sortedSet(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
