package delivery

import "time"

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
func (w *Waiters[T]) Expire(now time.Time) []T {
	var out []T
	kept := w.q[:0]
	for _, x := range w.q {
		if !x.Deadline.After(now) {
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
func (w *Waiters[T]) NextDeadline() time.Time {
	var next time.Time
	for _, x := range w.q {
		if next.IsZero() || x.Deadline.Before(next) {
			next = x.Deadline
		}
	}
	return next
}
