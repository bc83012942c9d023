package ring

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// Member is the role and slave state machine of one instance's ring
// coordinator: which role it plays, when a slave calls its master, what a
// failed call means, when it stands for master and when it gives up. It is
// a pure core: Step takes an event at now and returns the effects the
// coordinator (the actor shell) carries out. An effect that asks something
// (TryLead, BecomeMaster, ResolveMaster, PingStore, CallMaster) carries a
// generation, and the shell answers it with the matching event (LeadResult,
// MasterReady, MasterAddr, StorePing, CallDone) of that generation
// whenever it ends, other events coming in between: the machine awaits
// one answer at a time, does nothing else meanwhile but stop, give up or
// (becoming master) lose the lock, and drops an answer of any other
// generation. The master's own work (admission, publication,
// subscriptions) is the Master core's.
type Member struct {
	cfg MemberConfig
	rng *rand.Rand

	role     string // "" until the first role is taken; then master or slave
	stopping bool   // stopped or given up: nothing more happens
	// waitLead: role master waits for the lock, held by a session that
	// has not ended yet; failures counts the tries.
	waitLead bool
	// leadFor is why the lock was asked for (the answer's meaning).
	leadFor leadReason
	// failedErr is the failure a lock try after a failed call was for.
	failedErr error

	// awaiting is the answer awaited (noAnswer: none), gen the generation
	// of the effect that asked for it; answers of other generations are
	// dropped.
	awaiting answer
	gen      uint64

	// slave
	masterAddr string
	// movedOn: the instance at MasterAddr said it is not the master; the
	// address the master published in the store is followed instead.
	movedOn  bool
	joined   bool
	failures int
	retryAt  time.Time
	// masterStopping is when the master said it is stopping (zero: it did
	// not, or answered since): for MasterStopGrace from then the failures
	// do not count towards giving up.
	masterStopping time.Time
}

// MemberConfig is what the role machine needs of the coordinator's Config.
type MemberConfig struct {
	// Role is master, slave or auto.
	Role string
	// MasterAddr is the configured master's host:port; empty: read the address
	// the master published in the store.
	MasterAddr string
	// Elects: the store elects a master (Postgres); without it role auto
	// is master and role master does not take a lock.
	Elects bool
	// CanCall: the instance has a Transport to reach a master.
	CanCall bool
	// Reconnect is a slave's patience with an unreachable master.
	Reconnect Reconnect
	// MasterStopGrace: see Config.
	MasterStopGrace time.Duration
}

// memberRole is the role the role machine plays for the configured role
// on a store that elects (or not) and an instance that runs services: the
// configured role, but for role auto on a store that elects when services
// lack one of messages.AllServices, which follows as a slave (it never
// tries the lock); missing is then what it lacks (else nil). A master
// admits only slaves whose services are a subset of its own: leading
// with a partial list would refuse every full instance
// (ring_services_not_subset: they stop) and leave the work of what it
// lacks without an owner. Role master keeps a partial list (it warns when
// it leads), and without an elector role auto is a single instance's,
// which must run every service (Settings.Check).
func memberRole(role string, elects bool, services []string) (string, []string) {
	if role != messages.RoleAuto || !elects {
		return role, nil
	}
	var missing []string
	for _, svc := range messages.AllServices {
		if !slices.Contains(services, svc) {
			missing = append(missing, svc)
		}
	}
	if missing == nil {
		return role, nil
	}
	return messages.RoleSlave, missing
}

// answer is the kind of answer the machine awaits.
type answer int

const (
	noAnswer     answer = iota
	leadAnswer          // LeadResult
	masterAnswer        // MasterReady
	addrAnswer          // MasterAddr
	pingAnswer          // StorePing
	callAnswer          // CallDone
)

type leadReason int

const (
	leadNone    leadReason = iota
	leadStart              // the first role
	leadWait               // role master waiting for the lock
	leadFailure            // an auto slave whose call failed
)

// NewMember returns the role machine; rng draws the reconnect jitter.
func NewMember(cfg MemberConfig, rng *rand.Rand) *Member {
	return &Member{cfg: cfg, rng: rng}
}

// Events the shell gives Step.
type (
	// Event is one of the types below.
	Event interface{ event() }
	// Start: the actor started (or restarted).
	Start struct{}
	// Wake: a Schedule came due, or something changed that may let the
	// machine go on.
	Wake struct{}
	// LeadResult answers the TryLead of generation Gen: Won when this
	// instance holds the lock now; else Err when the store did not answer
	// (nil: another session holds the lock).
	LeadResult struct {
		Gen uint64
		Won bool
		Err error
	}
	// MasterReady answers the BecomeMaster of generation Gen: Err when the
	// stored assignment could not be read (the instance cannot lead).
	MasterReady struct {
		Gen uint64
		Err error
	}
	// MasterAddr answers the ResolveMaster of generation Gen: the master's
	// address, "" when none is published yet.
	MasterAddr struct {
		Gen  uint64
		Addr string
	}
	// StorePing answers the PingStore of generation Gen.
	StorePing struct {
		Gen uint64
		OK  bool
	}
	// CallDone is the end of a Join or Poll of generation Gen: Kind is
	// how it ended (transport.None: with an assignment), Err why not.
	CallDone struct {
		Gen  uint64
		Join bool
		Kind transport.Kind
		Err  error
	}
	// LeadLost: the master lock was lost (also while becoming master), or
	// another master published over this one.
	LeadLost struct{}
	// Fail: something the instance cannot go on without failed.
	Fail struct{ Err error }
	// Stop: the actor stops for good.
	Stop struct{}
)

func (Start) event()       {}
func (Wake) event()        {}
func (LeadResult) event()  {}
func (MasterReady) event() {}
func (MasterAddr) event()  {}
func (StorePing) event()   {}
func (CallDone) event()    {}
func (LeadLost) event()    {}
func (Fail) event()        {}
func (Stop) event()        {}

// Effects Step returns, for the shell to carry out in order.
type (
	// Effect is one of the types below.
	Effect interface{ effect() }
	// TryLead: take the master lock if it is free; answer LeadResult.
	TryLead struct{ Gen uint64 }
	// BecomeMaster: read the stored assignment and lead from it; answer
	// MasterReady.
	BecomeMaster struct{ Gen uint64 }
	// BecameSlave: the instance is a slave now (metrics, log).
	BecameSlave struct{}
	// StepMaster: do the master's due work and schedule its next look.
	StepMaster struct{}
	// StandDown: stop leading: answer the subscriptions, release the lock,
	// drop the master core and the partitions held.
	StandDown struct{}
	// ResolveMaster: read the master's published address; answer
	// MasterAddr.
	ResolveMaster struct{ Gen uint64 }
	// PingStore: is the store there? Answer StorePing.
	PingStore struct{ Gen uint64 }
	// CallMaster: join (Join) or poll the master at Addr, as generation
	// Gen; CallDone follows whenever it ends.
	CallMaster struct {
		Gen  uint64
		Join bool
		Addr string
	}
	// Schedule a Wake at At.
	Schedule struct{ At time.Time }
	// GiveUp: the instance cannot go on; the node stops.
	GiveUp struct{ Err error }
	// LeaveMaster: say goodbye to the master at Addr (a final stop).
	LeaveMaster struct{ Addr string }
	// Log a line.
	Log struct {
		Level slog.Level
		Msg   string
		Args  []any
	}
)

func (TryLead) effect()       {}
func (BecomeMaster) effect()  {}
func (BecameSlave) effect()   {}
func (StepMaster) effect()    {}
func (StandDown) effect()     {}
func (ResolveMaster) effect() {}
func (PingStore) effect()     {}
func (CallMaster) effect()    {}
func (Schedule) effect()      {}
func (GiveUp) effect()        {}
func (LeaveMaster) effect()   {}
func (Log) effect()           {}

var (
	errLockHeld = errors.New("another session holds the ring master lock of this site")
	errNoMaster = errors.New("no ring master has published its address yet")
	// errNoTransport: the node gives a slave a Transport only when it can
	// make peer calls (a CA bundle, or verification switched off).
	errNoTransport = field.Errorf("Transport", "%w", ErrNoTransport)
)

// ErrNoTransport is (under errors.Is) why an instance that is to be a
// slave and has no Transport gives up: its configuration leaves it no way
// to call a master, which no retry or restart changes.
var ErrNoTransport = errors.New("this instance is a ring slave and has no way to reach its master")

// Role is master or slave ("" before the first role is taken).
func (m *Member) Role() string { return m.role }

// Serving reports whether this instance leads and is not stopping.
func (m *Member) Serving() bool { return m.role == messages.RoleMaster && !m.stopping }

// Stopping reports whether the machine has stopped or given up.
func (m *Member) Stopping() bool { return m.stopping }

// Joined returns the master's address when this slave has joined it.
func (m *Member) Joined() (addr string, ok bool) {
	return m.masterAddr, m.role == messages.RoleSlave && m.joined && m.masterAddr != ""
}

// Deciding reports whether a lock try or the reading of the stored
// assignment is under way: whether this instance leads is being decided.
// The shell holds the requests of the ring API back until it is.
func (m *Member) Deciding() bool {
	return !m.stopping && (m.awaiting == leadAnswer || m.awaiting == masterAnswer)
}

// Awaits reports whether gen is the answer the machine waits for (the
// shell asks before it acts on a result: applies an assignment, keeps a
// lock, builds the master core).
func (m *Member) Awaits(gen uint64) bool {
	return m.awaiting != noAnswer && gen == m.gen && !m.stopping
}

// ask starts waiting for the answer w of a new generation, returned.
func (m *Member) ask(w answer) uint64 {
	m.gen++
	m.awaiting = w
	return m.gen
}

// answered takes the answer w of generation gen: false (drop it) when it
// is not the one awaited.
func (m *Member) answered(gen uint64, w answer) bool {
	if !m.Awaits(gen) || m.awaiting != w {
		return false
	}
	m.awaiting = noAnswer
	return true
}

// Failures is the count of failed calls (or lock tries) in a row.
func (m *Member) Failures() int { return m.failures }

// Step takes ev at now and returns what to do.
func (m *Member) Step(now time.Time, ev Event) []Effect {
	var out []Effect
	switch e := ev.(type) {
	case Start:
		out = m.start(now)
	case Wake:
		out = m.step(now)
	case LeadResult:
		if !m.answered(e.Gen, leadAnswer) {
			return nil
		}
		out = m.leadResult(now, e.Won, e.Err)
	case MasterReady:
		if !m.answered(e.Gen, masterAnswer) {
			return nil
		}
		if e.Err != nil {
			return m.giveUp(fmt.Errorf("reading the stored ring assignment: %w", e.Err))
		}
		m.role = messages.RoleMaster
		out = []Effect{StepMaster{}}
	case MasterAddr:
		if !m.answered(e.Gen, addrAnswer) {
			return nil
		}
		out = m.masterAddr_(now, e.Addr)
	case StorePing:
		if !m.answered(e.Gen, pingAnswer) {
			return nil
		}
		out = m.storePing(now, e.OK)
	case CallDone:
		if !m.answered(e.Gen, callAnswer) {
			return nil
		}
		out = m.callDone(now, e)
	case LeadLost:
		switch {
		case m.stopping:
			return nil
		case m.awaiting == masterAnswer:
			m.awaiting = noAnswer // lost before leading: the stored assignment is of no use now
		case m.role != messages.RoleMaster:
			return nil
		}
		out = m.standDown(now)
	case Fail:
		out = m.giveUp(e.Err)
	case Stop:
		if addr, ok := m.Joined(); ok {
			out = []Effect{LeaveMaster{Addr: addr}}
		}
		m.stopping = true
	}
	return out
}

// start takes the first role: master (taking the lock when the store
// elects), slave, or for auto whichever the lock decides.
func (m *Member) start(now time.Time) []Effect {
	switch {
	case m.cfg.Role == messages.RoleSlave:
		return m.becomeSlave(now)
	case !m.cfg.Elects:
		return []Effect{BecomeMaster{Gen: m.ask(masterAnswer)}}
	}
	m.leadFor = leadStart
	return []Effect{TryLead{Gen: m.ask(leadAnswer)}}
}

func (m *Member) leadResult(now time.Time, won bool, err error) []Effect {
	why := m.leadFor
	m.leadFor = leadNone
	if err == nil {
		err = errLockHeld
	}
	switch {
	case won && why == leadFailure:
		m.failures, m.joined, m.failedErr = 0, false, nil
		return append([]Effect{Log{Level: slog.LevelInfo, Msg: "took the ring master lock: this instance is the master now"}},
			BecomeMaster{Gen: m.ask(masterAnswer)})
	case won:
		m.waitLead, m.failures = false, 0
		return []Effect{BecomeMaster{Gen: m.ask(masterAnswer)}}
	case why == leadStart && m.cfg.Role == messages.RoleMaster:
		// A master that restarts fast may find its old session still
		// holding the lock: wait for it like a slave for its master.
		m.waitLead = true
		out := []Effect{Log{Level: slog.LevelWarn, Msg: "the ring master lock is held by another session; waiting for it"}}
		out = append(out, m.failed(now, err)...)
		return append(out, m.step(now)...)
	case why == leadStart:
		return m.becomeSlave(now)
	case why == leadWait:
		out := m.failed(now, err)
		if m.waitLead && !m.stopping {
			out = append(out, Schedule{At: m.retryAt})
		}
		return out
	case why == leadFailure:
		err := m.failedErr
		m.failedErr = nil
		return append(m.failedOn(now, err), m.step(now)...)
	}
	return nil
}

func (m *Member) becomeSlave(now time.Time) []Effect {
	if !m.cfg.CanCall {
		return m.giveUp(errNoTransport)
	}
	m.role = messages.RoleSlave
	return append([]Effect{BecameSlave{}}, m.step(now)...)
}

// step does what is due now and arms the next wake-up; nothing while an
// answer is awaited (it goes on from there).
func (m *Member) step(now time.Time) []Effect {
	if m.stopping || m.awaiting != noAnswer {
		return nil
	}
	if m.waitLead {
		if now.Before(m.retryAt) {
			return []Effect{Schedule{At: m.retryAt}}
		}
		m.leadFor = leadWait
		return []Effect{TryLead{Gen: m.ask(leadAnswer)}}
	}
	switch {
	case m.role == "":
		return nil
	case m.role == messages.RoleMaster:
		return []Effect{StepMaster{}}
	case now.Before(m.retryAt):
		return []Effect{Schedule{At: m.retryAt}}
	case m.masterAddr == "":
		if m.cfg.MasterAddr != "" && !m.movedOn {
			return m.masterAddr_(now, m.cfg.MasterAddr)
		}
		return []Effect{ResolveMaster{Gen: m.ask(addrAnswer)}}
	}
	return m.call(now)
}

// masterAddr_ takes the master's address (resolved, or --ring-master).
func (m *Member) masterAddr_(now time.Time, addr string) []Effect {
	if addr == "" {
		return m.failedThenStep(now, errNoMaster)
	}
	m.masterAddr = addr
	return m.call(now)
}

// call starts the next call to the master: a join, or (once joined and the
// store answers) a poll.
func (m *Member) call(now time.Time) []Effect {
	if !m.joined {
		return []Effect{CallMaster{Gen: m.ask(callAnswer), Join: true, Addr: m.masterAddr}}
	}
	return []Effect{PingStore{Gen: m.ask(pingAnswer)}}
}

func (m *Member) storePing(now time.Time, ok bool) []Effect {
	if !ok {
		// A poll confirms the epoch held; holding ranges that cannot be
		// worked (every claim fails) would freeze them. Without polls the
		// master drops this instance after its grace and gives them to
		// others; it joins again once the store answers.
		m.retryAt = now.Add(time.Second)
		return []Effect{Schedule{At: m.retryAt}}
	}
	return []Effect{CallMaster{Gen: m.ask(callAnswer), Addr: m.masterAddr}}
}

func (m *Member) callDone(now time.Time, d CallDone) []Effect {
	switch d.Kind {
	case transport.None:
		if d.Join {
			m.joined = true
		}
		m.failures, m.masterStopping = 0, time.Time{}
		return m.step(now)
	case transport.NotMember:
		m.joined = false // dropped, or a new master: join again at once
		return m.step(now)
	case transport.NotMaster:
		m.joined = false
		m.masterAddr = ""
		m.movedOn = true // the master moved: follow the store from now on
	case transport.Forbidden, transport.Refused:
		// Another site, cluster, region or services than the master's, or
		// a join it cannot read: trying again cannot help.
		return m.giveUp(fmt.Errorf("the ring master at %s refused this instance: %w", m.masterAddr, d.Err))
	case transport.Unavailable:
		if m.masterStopping.IsZero() {
			// The master is there but not serving: it is stopping (its
			// subscriptions end first), and its graceful stop may take its
			// whole --shutdown-timeout before it lets the lock go.
			m.masterStopping = now
			out := []Effect{Log{Level: slog.LevelInfo, Msg: "the ring master is stopping; waiting for it (or, with role auto, for its lock) without counting the failures",
				Args: []any{"master", m.masterAddr, "for", m.cfg.MasterStopGrace}}}
			return append(out, m.failedThenStep(now, d.Err)...)
		}
	}
	return m.failedThenStep(now, d.Err)
}

// failedThenStep counts a failure and goes on: at once, or once the lock
// try it asked for is answered.
func (m *Member) failedThenStep(now time.Time, err error) []Effect {
	out := m.failed(now, err)
	if m.leadFor != leadNone {
		return out // the lock try's answer goes on
	}
	return append(out, m.step(now)...)
}

// failed counts a failed call to the master (or lock try): the slave keeps
// working the partitions it holds (the store fences them if a newer
// assignment was published), tries to lead itself when the role is auto,
// and gives up after the configured attempts.
func (m *Member) failed(now time.Time, err error) []Effect {
	if m.masterStopping.IsZero() || now.Sub(m.masterStopping) >= m.cfg.MasterStopGrace {
		m.failures++
	}
	if !m.waitLead && m.cfg.Role == messages.RoleAuto && m.cfg.Elects {
		m.leadFor, m.failedErr = leadFailure, err
		return []Effect{TryLead{Gen: m.ask(leadAnswer)}}
	}
	return m.failedOn(now, err)
}

// failedOn goes on with a failure once leading was not an option.
func (m *Member) failedOn(now time.Time, err error) []Effect {
	if m.cfg.MasterAddr == "" || m.movedOn {
		m.masterAddr = "" // the master may have changed: read it again
	}
	if m.cfg.Reconnect.GiveUp(m.failures) {
		switch {
		case m.waitLead && errors.Is(err, errLockHeld):
			return m.giveUp(field.Errorf("Reconnect.MaxAttempts", "the ring master lock is still held after %d attempts: %w", m.failures, err))
		case m.waitLead:
			return m.giveUp(field.Errorf("Reconnect.MaxAttempts", "the ring master lock could not be taken after %d attempts: %w", m.failures, err))
		}
		return m.giveUp(field.Errorf("Reconnect.MaxAttempts", "the ring master is unreachable after %d attempts: %w", m.failures, err))
	}
	d := m.cfg.Reconnect.Delay(max(m.failures, 1), m.rng)
	m.retryAt = now.Add(d)
	if m.waitLead {
		return nil
	}
	return []Effect{Log{Level: slog.LevelWarn, Msg: "ring master unreachable; trying again",
		Args: []any{"attempt", m.failures, "of", m.cfg.Reconnect.MaxAttempts, "in", d, "err", err}}}
}

// standDown ends this instance's mastership: its lock is lost, or another
// master published over it. With role auto it goes on as a slave of
// whoever leads now (its partitions cleared until that master's
// assignment); one that cannot call a master (no Transport: a lone
// instance) waits for the lock instead, as a master that restarts does, so
// that a lock lost with its database session (a blip) is taken again and
// one another instance holds gives up after the reconnect policy. An
// explicit master stops.
func (m *Member) standDown(now time.Time) []Effect {
	switch {
	case m.cfg.Role != messages.RoleAuto:
		return m.giveUp(errors.New("this instance is no longer the ring master (its lock was lost or another master published); stopping so that another instance can lead"))
	case !m.cfg.CanCall:
		out := []Effect{
			Log{Level: slog.LevelWarn, Msg: "no longer the ring master (lock lost or another master published); with no way to reach another master, waiting to take the lock again"},
			StandDown{},
		}
		m.role, m.joined, m.masterAddr, m.failures, m.retryAt, m.masterStopping = "", false, "", 0, time.Time{}, time.Time{}
		m.waitLead = true
		return append(out, m.step(now)...)
	}
	out := []Effect{
		Log{Level: slog.LevelWarn, Msg: "no longer the ring master (lock lost or another master published); going on as a slave"},
		StandDown{},
	}
	m.joined, m.masterAddr, m.failures, m.retryAt, m.masterStopping = false, "", 0, time.Time{}, time.Time{}
	return append(out, m.becomeSlave(now)...)
}

func (m *Member) giveUp(err error) []Effect {
	if m.stopping {
		return nil
	}
	m.stopping = true
	return []Effect{GiveUp{Err: err}}
}
