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

// storeUnavailable is what the caller of a directory or resubmit request
// is told when the store call op failed.
func storeUnavailable(op string) error {
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
