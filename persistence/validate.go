package persistence

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/switchboard-dev/switchboard/messages"
)

// The validators of every Store call's input. Each reports every problem
// it finds (errors.Join), naming the operation and the item; a store
// prefixes its own name ("sqlite: ...") and changes nothing when one fails.

// ValidateNew reports what is wrong with a batch for Accept.
func ValidateNew(batch []NewMessage) error {
	var errs []error
	for i, m := range batch {
		if m.ID == "" {
			errs = append(errs, fmt.Errorf("accept: message %d: empty id", i))
		}
		if m.StoredOnly {
			if m.State != "" || m.Work != nil || m.Lease != nil || m.Publish {
				errs = append(errs, fmt.Errorf("accept: message %d (%q): a stored-only submission has no state, work, lease or publish", i, m.ID))
			}
			continue
		}
		if !m.State.Valid() {
			errs = append(errs, fmt.Errorf("accept: message %d (%q): unknown state %q", i, m.ID, m.State))
		}
		if err := validateWork(m.Work); err != nil {
			errs = append(errs, fmt.Errorf("accept: message %d (%q): %w", i, m.ID, err))
		}
		if l := m.Lease; l != nil && (m.Work == nil || l.Owner == "" || l.Until.IsZero()) {
			errs = append(errs, fmt.Errorf("accept: message %d (%q): a lease needs work, an owner and an end", i, m.ID))
		}
		if m.Publish && (m.Work == nil || m.Work.Kind != WorkDelivery || m.Lease != nil) {
			errs = append(errs, fmt.Errorf("accept: message %d (%q): only delivery work written unleased is published by its writer", i, m.ID))
		}
	}
	return errors.Join(errs...)
}

// validateWork reports what is wrong with a work spec (nil is none).
func validateWork(w *WorkSpec) error {
	if w == nil {
		return nil
	}
	var errs []error
	if !w.Kind.Valid() {
		errs = append(errs, fmt.Errorf("unknown work kind %q", w.Kind))
	}
	if w.Target == "" {
		errs = append(errs, errors.New("work without target"))
	}
	return errors.Join(errs...)
}

// ValidateOutcomes reports what is wrong with outcomes for CompleteWork.
func ValidateOutcomes(outcomes []Outcome) error {
	var errs []error
	for i, o := range outcomes {
		if !o.Kind.Valid() {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: unknown kind %q", i, o.Kind))
		}
		if o.Target == "" {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: empty target", i))
		}
		if o.MessageID == "" {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: empty message id", i))
		}
		switch o.Result {
		case ResultDelivered, ResultFailed, ResultRetry:
		default:
			errs = append(errs, fmt.Errorf("complete work: outcome %d: unknown result %q", i, o.Result))
		}
		if err := validateRefs(i, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ValidateStatuses reports what is wrong with updates for ApplyStatus.
func ValidateStatuses(updates []StatusUpdate) error {
	var errs []error
	for i, u := range updates {
		if u.ID == "" {
			errs = append(errs, fmt.Errorf("apply status: update %d: empty id", i))
		}
		if u.From == "" {
			errs = append(errs, fmt.Errorf("apply status: update %d (%q): empty from", i, u.ID))
		}
		if u.Result != ResultDelivered && u.Result != ResultFailed {
			errs = append(errs, fmt.Errorf("apply status: update %d (%q): result %q is neither delivered nor failed", i, u.ID, u.Result))
		}
	}
	return errors.Join(errs...)
}

// ValidateReroutes reports what is wrong with reroutes for Resubmit: a
// message restarts in a state that is not final (a resubmit is new work).
func ValidateReroutes(reroutes []Reroute) error {
	var errs []error
	for i, r := range reroutes {
		if r.ID == "" {
			errs = append(errs, fmt.Errorf("resubmit: reroute %d: empty id", i))
		}
		switch {
		case !r.State.Valid():
			errs = append(errs, fmt.Errorf("resubmit: reroute %d (%q): unknown state %q", i, r.ID, r.State))
		case r.State.Final():
			errs = append(errs, fmt.Errorf("resubmit: reroute %d (%q): cannot restart in final state %q", i, r.ID, r.State))
		}
		if err := validateWork(r.Work); err != nil {
			errs = append(errs, fmt.Errorf("resubmit: reroute %d (%q): %w", i, r.ID, err))
		}
	}
	return errors.Join(errs...)
}

// ValidateQueue reports what is wrong with QueueForwards' arguments.
func ValidateQueue(peer string, limit int) error {
	var errs []error
	if peer == "" {
		errs = append(errs, errors.New("queue forwards: empty peer"))
	}
	if limit <= 0 {
		errs = append(errs, fmt.Errorf("queue forwards: limit %d must be positive", limit))
	}
	return errors.Join(errs...)
}

// Validate reports what is wrong with an expiry request.
func (r ExpireRequest) Validate() error {
	if r.Limit <= 0 {
		return fmt.Errorf("expire messages: limit %d must be positive", r.Limit)
	}
	return nil
}

// Validate reports what is wrong with a forward expiry request.
func (r ForwardExpiry) Validate() error {
	if r.Limit <= 0 {
		return fmt.Errorf("fail forwards: limit %d must be positive", r.Limit)
	}
	return nil
}

// Validate reports every problem of a purge request: a positive limit,
// and cutoffs only for states whose messages have come to rest.
func (r PurgeRequest) Validate() error {
	var errs []error
	if r.Limit <= 0 {
		errs = append(errs, fmt.Errorf("purge: limit %d must be positive", r.Limit))
	}
	if len(r.Before) == 0 {
		errs = append(errs, errors.New("purge: no state to purge"))
	}
	for _, st := range slices.Sorted(maps.Keys(r.Before)) {
		if !Resting(st) {
			errs = append(errs, fmt.Errorf("purge: messages in state %q are never purged", st))
		}
	}
	return errors.Join(errs...)
}

// Validate reports what is wrong with a list query.
func (q ListQuery) Validate() error {
	var errs []error
	if q.State != "" && !q.State.Valid() {
		errs = append(errs, fmt.Errorf("list messages: unknown state %q", q.State))
	}
	if q.Limit <= 0 {
		errs = append(errs, fmt.Errorf("list messages: limit %d must be positive", q.Limit))
	}
	if q.Before < 0 {
		errs = append(errs, fmt.Errorf("list messages: cursor %d must not be negative", q.Before))
	}
	if q.Budget < 0 {
		errs = append(errs, fmt.Errorf("list messages: budget %d must not be negative", q.Budget))
	}
	if !q.BeforeAt.IsZero() && (!q.ByTime() || q.Before == 0) {
		errs = append(errs, errors.New("list messages: a time cursor is for a time range without a number, with a seq"))
	}
	if q.ByTime() && q.Before > 0 && q.BeforeAt.IsZero() {
		// Read as a cursor at the zero time, it gave an empty last page.
		errs = append(errs, errors.New("list messages: the cursor of a time range is the page's NextAt (BeforeAt) with its Next"))
	}
	for name, m := range map[string]NumberMatch{"destination": q.Destination, "source": q.Source} {
		if m.Key != messages.NumberKey(m.Key) || (m.Prefix && m.Key == "") {
			errs = append(errs, fmt.Errorf("list messages: %s %q is not a number key", name, m.Key))
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		errs = append(errs, fmt.Errorf("list messages: since %v is not before until %v", q.Since, q.Until))
	}
	return errors.Join(errs...)
}

// ValidateRegistry reports what is wrong with a peer registry to store and
// returns its frontends sorted, each once.
func ValidateRegistry(r PeerRegistry) ([]string, error) {
	var errs []error
	if r.Peer == "" {
		errs = append(errs, errors.New("put peer registry: empty peer"))
	}
	if slices.Contains(r.Frontends, "") {
		errs = append(errs, fmt.Errorf("put peer registry %q: empty frontend name", r.Peer))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Compact(slices.Sorted(slices.Values(r.Frontends))), nil
}

// ValidateRoute reports what is wrong with a route to store. The empty
// prefix is a route like any other: it matches every destination.
func ValidateRoute(r Route) error {
	if r.Frontend == "" {
		return fmt.Errorf("put route %q: empty frontend", r.Prefix)
	}
	return nil
}

// ValidateFrontend reports what is wrong with a frontend to store.
func ValidateFrontend(f Frontend) error {
	var errs []error
	if f.Name == "" {
		errs = append(errs, errors.New("put frontend: empty name"))
	}
	if !f.Mode.Valid() {
		errs = append(errs, fmt.Errorf("put frontend %q: unknown mode %q", f.Name, f.Mode))
	}
	return errors.Join(errs...)
}

// ValidateOwner reports what is wrong with ReleaseLeases' owner.
func ValidateOwner(owner string) error {
	if owner == "" {
		return errors.New("release leases: empty owner")
	}
	return nil
}
