package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/switchboard-dev/switchboard/messages"
)

// MaxBody is the largest request body accepted (CONTRACT.md: 1 MiB).
const MaxBody = 1 << 20

// decode reads exactly one JSON document of at most MaxBody bytes into v.
// Unknown fields are ignored (newer clients may send more).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength > MaxBody {
		return tooLarge()
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		switch {
		case errors.As(err, &mb):
			return tooLarge()
		case errors.Is(err, io.EOF):
			return messages.Errorf(messages.CodeInvalidJSON, "the request body is empty; a JSON object is required")
		}
		return messages.Errorf(messages.CodeInvalidJSON, "the request body is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return tooLarge()
		}
		return messages.Errorf(messages.CodeInvalidJSON, "the request body has data after the JSON object")
	}
	return nil
}

func tooLarge() error {
	return messages.Errorf(messages.CodeBodyTooLarge, "the request body is larger than %d bytes", MaxBody)
}
