package persistence

import (
	"context"
	"errors"
	"time"
)

// Write is the work of one transaction, in parts done in this order:
// Outcomes and Statuses are decided item by item, outcomes first (as
// CompleteWork and ApplyStatus would, in one), then the new messages of
// Accept are stored, then each of Claims is made (as ClaimWork would). A
// claim the ring fence refuses is only that claim's failure: its Claim
// comes back Refused and the other parts commit.
type Write struct {
	Outcomes []Outcome
	Statuses []StatusUpdate
	Accept   []NewMessage
	Claims   []ClaimRequest
}

// Written is what a Write did, each part in its input order.
type Written struct {
	Completions []Completion // of Outcomes
	Reported    []Completion // of Statuses
	Accepted    []Accepted
	Claims      []Claim
}

// Empty reports whether w has nothing to do.
func (w Write) Empty() bool {
	return len(w.Outcomes)+len(w.Statuses)+len(w.Accept)+len(w.Claims) == 0
}

// Validate reports every problem of every part.
func (w Write) Validate() error {
	errs := []error{ValidateOutcomes(w.Outcomes), ValidateStatuses(w.Statuses), ValidateNew(w.Accept)}
	for _, c := range w.Claims {
		errs = append(errs, c.Validate())
	}
	return errors.Join(errs...)
}

// Decisions are the ids of the messages w's outcomes and statuses name
// (once each, outcomes' first), and the decisions to make on them.
func (w Write) Decisions(out *Written) (ids []string, decide func(*Loaded, *Changes)) {
	n := len(w.Outcomes) + len(w.Statuses)
	if n == 0 {
		return nil, nil
	}
	ids = Distinct(n, func(i int) string {
		if i < len(w.Outcomes) {
			return w.Outcomes[i].MessageID
		}
		return w.Statuses[i-len(w.Outcomes)].ID
	})
	return ids, func(l *Loaded, c *Changes) {
		out.Completions = make([]Completion, len(w.Outcomes))
		for i, o := range w.Outcomes {
			out.Completions[i] = Complete(l, c, o)
		}
		out.Reported = make([]Completion, len(w.Statuses))
		for i, u := range w.Statuses {
			out.Reported[i] = Status(l, c, u)
		}
	}
}

// Writer is the part of a Store that Calls needs.
type Writer interface {
	Write(ctx context.Context, now time.Time, w Write) (Written, error)
}

// Calls gives a store the one-part forms of its Write: Accept,
// CompleteWork, ApplyStatus and ClaimWork. A store embeds it, set to
// itself.
type Calls struct{ Writer Writer }

// Accept implements Store.Accept.
func (c Calls) Accept(ctx context.Context, now time.Time, batch []NewMessage) ([]Accepted, error) {
	w, err := c.Writer.Write(ctx, now, Write{Accept: batch})
	if err != nil {
		return nil, err
	}
	if w.Accepted == nil {
		w.Accepted = []Accepted{}
	}
	return w.Accepted, nil
}

// CompleteWork implements Store.CompleteWork.
func (c Calls) CompleteWork(ctx context.Context, now time.Time, outcomes []Outcome) ([]Completion, error) {
	w, err := c.Writer.Write(ctx, now, Write{Outcomes: outcomes})
	if err != nil {
		return nil, err
	}
	if w.Completions == nil {
		w.Completions = []Completion{}
	}
	return w.Completions, nil
}

// ApplyStatus implements Store.ApplyStatus.
func (c Calls) ApplyStatus(ctx context.Context, now time.Time, updates []StatusUpdate) ([]Completion, error) {
	w, err := c.Writer.Write(ctx, now, Write{Statuses: updates})
	if err != nil {
		return nil, err
	}
	if w.Reported == nil {
		w.Reported = []Completion{}
	}
	return w.Reported, nil
}

// ClaimWork implements Store.ClaimWork: a refused claim is ErrStaleEpoch.
func (c Calls) ClaimWork(ctx context.Context, req ClaimRequest) (Claim, error) {
	w, err := c.Writer.Write(ctx, req.Now, Write{Claims: []ClaimRequest{req}})
	if err != nil {
		return Claim{}, err
	}
	if w.Claims[0].Refused {
		return Claim{}, ErrStaleEpoch
	}
	return w.Claims[0], nil
}
