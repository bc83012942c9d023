package delivery

import (
	"errors"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func errUnavailable(why string) error {
	return messages.Errorf(messages.CodeUnavailable, "%s", why)
}

func isNotFound(err error) bool { return errors.Is(err, persistence.ErrNotFound) }
