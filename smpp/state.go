package smpp

// Role is the side a session plays: the ESME binds and submits, the SMSC
// accepts binds and delivers.
type Role int

// The roles.
const (
	RoleESME Role = iota + 1
	RoleSMSC
)

func (r Role) String() string {
	switch r {
	case RoleESME:
		return "esme"
	case RoleSMSC:
		return "smsc"
	}
	return "role?"
}

// Peer is the other side's role.
func (r Role) Peer() Role {
	if r == RoleESME {
		return RoleSMSC
	}
	return RoleESME
}

// BindState is the state of a session (SMPP v3.4 section 2.2): open
// (connected, not bound), bound as one of the three bind types, or closed
// (unbound or disconnected).
type BindState int

// The bind states.
const (
	StateOpen BindState = iota
	StateBoundTX
	StateBoundRX
	StateBoundTRX
	StateClosed
)

var bindStateNames = [...]string{"open", "bound_tx", "bound_rx", "bound_trx", "closed"}

// String is the state's name as metrics and the API show it.
func (s BindState) String() string {
	if s >= 0 && int(s) < len(bindStateNames) {
		return bindStateNames[s]
	}
	return "state?"
}

// Bound reports whether s is one of the bound states.
func (s BindState) Bound() bool { return s == StateBoundTX || s == StateBoundRX || s == StateBoundTRX }

// BoundState is the state a successful bind of command c leads to.
func BoundState(c CommandID) (BindState, bool) {
	switch c {
	case BindTransmitter, BindTransmitterResp:
		return StateBoundTX, true
	case BindReceiver, BindReceiverResp:
		return StateBoundRX, true
	case BindTransceiver, BindTransceiverResp:
		return StateBoundTRX, true
	}
	return StateOpen, false
}

// IsBind reports whether c is one of the three bind requests.
func (c CommandID) IsBind() bool {
	_, ok := BoundState(c)
	return ok && !c.IsResponse()
}

// Allowed is the command_status with which a request of command c sent by
// a peer of role from is answered in state st: StatusOK when the
// specification lets it through (SMPP v3.4 section 2.3). The ESME binds
// once, then a transmitter submits, a receiver is delivered to, a
// transceiver both; enquire_link goes any time the session is open, unbind
// only when bound.
func Allowed(st BindState, from Role, c CommandID) Status {
	if st == StateClosed {
		return StatusInvalidBindState
	}
	switch c {
	case EnquireLink:
		return StatusOK
	case Unbind:
		if st.Bound() {
			return StatusOK
		}
		return StatusInvalidBindState
	case BindTransmitter, BindReceiver, BindTransceiver:
		switch {
		case from != RoleESME:
			return StatusInvalidBindState
		case st.Bound():
			return StatusAlreadyBound
		}
		return StatusOK
	}
	tx := st == StateBoundTX || st == StateBoundTRX
	rx := st == StateBoundRX || st == StateBoundTRX
	switch c {
	case SubmitSM, QuerySM:
		if from == RoleESME && tx {
			return StatusOK
		}
	case DeliverSM:
		if from == RoleSMSC && rx {
			return StatusOK
		}
	case DataSM:
		if (from == RoleESME && tx) || (from == RoleSMSC && rx) {
			return StatusOK
		}
	default:
		return StatusInvalidCmdID
	}
	return StatusInvalidBindState
}
