package messages

// State is where a message is in its life. The names are public (the API,
// the metrics, the database rows; docs/api.md, "Message states") and never
// change.
//
//	local frontend:      pending -> delivered | retry -> ... -> delivered | failed
//	healthy peer:        pending -> forwarded -> delivered | failed
//	unreachable peer:    pending -> forward_queued -> forwarded ... | forward_failed
//
// failed and forward_failed are left only by an explicit resubmit.
type State string

// The message states (docs/api.md, "Message states").
const (
	StatePending       State = "pending"
	StateRetry         State = "retry"
	StateDelivered     State = "delivered"
	StateFailed        State = "failed"
	StateForwarded     State = "forwarded"
	StateForwardQueued State = "forward_queued"
	StateForwardFailed State = "forward_failed"
)

// AllStates lists every state in a fixed order (used for counts and metrics).
var AllStates = []State{
	StatePending, StateRetry, StateDelivered, StateFailed,
	StateForwarded, StateForwardQueued, StateForwardFailed,
}

// Valid reports whether s is one of the message states.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if s == v {
			return true
		}
	}
	return false
}

// Final reports whether no automatic transition leaves s. Only an operator's
// resubmit moves a message out of failed or forward_failed.
func (s State) Final() bool {
	return s == StateDelivered || s == StateFailed || s == StateForwardFailed
}

// Resubmittable reports whether an operator may resubmit a message in s.
func (s State) Resubmittable() bool {
	return s == StateFailed || s == StateForwardFailed
}
