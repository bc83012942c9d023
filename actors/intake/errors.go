package intake

import (
	"errors"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// What the intake answers when the store, or the intake itself, fails a
// request: either way a retry with the same id is safe. It stores the
// message, or finds it stored if the failure came after it was (a commit
// whose answer was lost, or one that stored the message but could not
// read back whether it had been stored before: persistence.PartialAccept).

// commitError is what the submitters of a commit that failed are told: the
// store has no room (storage_full), or it is unavailable.
func commitError(err error) error {
	if errors.Is(err, persistence.ErrNoSpace) {
		return messages.Errorf(messages.CodeStorageFull, "the message store has no room left; retry later with the same id")
	}
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable; retry with the same id")
}

// storeError is what the caller of a directory or resubmit request is
// told when the store call op failed with err: unavailable, but for a call
// the store refused for its input (persistence.ErrInvalid: text Postgres
// does not take, such as NUL in an id or a name an embedder passed), which
// fails the same way however often it is repeated: invalid_request, as the
// gateway answers such a read.
func storeError(op string, err error) error {
	if errors.Is(err, persistence.ErrInvalid) {
		return messages.Errorf(messages.CodeInvalidRequest, "the message store refused the input (%s): %v", op, err)
	}
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable (%s)", op)
}

// restarted is what the senders of work the intake took but did not
// commit are told when it restarts, or when a commit's goroutine panicked
// before settling its batch.
func restarted() error {
	return messages.Errorf(messages.CodeUnavailable, "the intake restarted before answering; retry with the same id")
}

// stopped is what the callers of resubmits the intake took but did not
// answer are told when it stops.
func stopped() error {
	return messages.Errorf(messages.CodeUnavailable, "the intake stopped before answering; retry")
}
