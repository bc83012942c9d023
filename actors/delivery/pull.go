package delivery

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Waiter is one long-poll waiting for messages.
type Waiter[T any] struct {
	Poll     T
	Deadline time.Time
}

// Waiters is the FIFO queue of a pull frontend's waiting long-polls. It is
// pure: the worker passes `now` and answers what comes out.
type Waiters[T any] struct {
	q []Waiter[T]
}

// Add queues a poll that waits until deadline.
func (w *Waiters[T]) Add(p T, deadline time.Time) {
	w.q = append(w.q, Waiter[T]{Poll: p, Deadline: deadline})
}

// Len is the number of waiting polls.
func (w *Waiters[T]) Len() int { return len(w.q) }

// Peek returns the oldest waiting poll.
func (w *Waiters[T]) Peek() (Waiter[T], bool) {
	if len(w.q) == 0 {
		return Waiter[T]{}, false
	}
	return w.q[0], true
}

// Items are the waiting polls, oldest first (not to be changed).
func (w *Waiters[T]) Items() []Waiter[T] { return w.q }

// Pop removes the oldest waiting poll (after it was answered).
func (w *Waiters[T]) Pop() {
	var zero Waiter[T]
	w.q[0] = zero
	w.q = w.q[1:]
}

// Expire removes and returns, oldest first, the polls whose deadline is not
// after now.
func (w *Waiters[T]) Expire(now time.Time) []T { return w.ExpireUnless(now, nil) }

// ExpireUnless is Expire but for the polls hold (nil: none) keeps waiting.
func (w *Waiters[T]) ExpireUnless(now time.Time, hold func(Waiter[T]) bool) []T {
	var out []T
	kept := w.q[:0]
	for _, x := range w.q {
		if !x.Deadline.After(now) && (hold == nil || !hold(x)) {
			out = append(out, x.Poll)
		} else {
			kept = append(kept, x)
		}
	}
	clear(w.q[len(kept):])
	w.q = kept
	return out
}

// All removes and returns every waiting poll, oldest first.
func (w *Waiters[T]) All() []T {
	out := make([]T, len(w.q))
	for i, x := range w.q {
		out[i] = x.Poll
	}
	w.q = nil
	return out
}

// NextDeadline is the earliest deadline, or zero when none wait.
func (w *Waiters[T]) NextDeadline() time.Time { return w.NextDeadlineUnless(nil) }

// NextDeadlineUnless is NextDeadline of the polls hold (nil: none) does
// not keep waiting.
func (w *Waiters[T]) NextDeadlineUnless(hold func(Waiter[T]) bool) time.Time {
	var next time.Time
	for _, x := range w.q {
		if hold != nil && hold(x) {
			continue
		}
		if next.IsZero() || x.Deadline.Before(next) {
			next = x.Deadline
		}
	}
	return next
}

// ackRead is an ack whose verdicts' attempt counts were read.
type ackRead struct {
	ack      *messages.Ack
	attempts Attempts
	err      error
}

// ack hands a pull frontend's verdicts to the dispatcher, first reading
// (off the actor) the attempt counts that retries and attempt-naming
// verdicts need.
func (w *Worker) ack(c actor.Context, a *messages.Ack, now time.Time) {
	var ids []string
	for _, r := range a.Results {
		if NeedsAttempts(r) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		w.apply(c, w.core.Ack(now, a, nil, nil, w.rng))
		return
	}
	self, root := w.self, w.sys.Root
	go func() {
		// Panicking, the read restarts the worker: the ack is answered
		// first (left to wait, its caller waited for its own timeout).
		defer supervision.CarryPanic(root, self, func() {
			a.Reply <- messages.AckReply{Err: errUnavailable("the delivery worker restarted; ack again")}
		})
		res := &ackRead{ack: a, attempts: Attempts{}}
		ctx, cancel := w.d.storeCtx()
		defer cancel()
		for _, id := range ids {
			m, err := w.d.Store.GetMessage(ctx, id)
			switch {
			case err == nil:
				res.attempts[id] = m.Attempts
			case !isNotFound(err):
				res.err = errUnavailable("cannot read message " + id)
			}
		}
		root.Send(self, res)
	}()
}
