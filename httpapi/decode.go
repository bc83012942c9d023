package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
)

// MaxBody is the largest request body accepted (docs/api.md: 1 MiB).
const MaxBody = 1 << 20

// decode reads exactly one JSON document of at most MaxBody bytes into v,
// strictly: the client and directory API (submits, routes, frontends,
// polls, acks) refuses a field it does not know (400 unknown_field: a typo
// such as "msg_id" for "id" would otherwise be dropped in silence) and text
// that a JSON decoder would silently change (invalid UTF-8, a \u escape of
// half a UTF-16 surrogate pair: both become U+FFFD).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	if err := textError(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return decodeOne(dec, v)
}

// decodePeer is decode for the federation and ring APIs: unknown fields are
// ignored there, because the instances and peers that call them run
// different versions during an upgrade (a newer peer's additions must not
// break an older node; a field that changes meaning goes only to a peer
// announcing a capability for it).
func decodePeer(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeOne(json.NewDecoder(bytes.NewReader(raw)), v)
}

// readBody reads the whole body, at most MaxBody bytes (413 beyond).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBody {
		return nil, tooLarge()
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return nil, tooLarge()
	case err != nil:
		return nil, messages.Errorf(messages.CodeInvalidJSON, "the request body could not be read: %v", err)
	case len(bytes.TrimSpace(raw)) == 0:
		return nil, messages.Errorf(messages.CodeInvalidJSON, "the request body is empty; a JSON object is required")
	}
	return raw, nil
}

// decodeOne decodes one document from dec into v and refuses anything after
// it, mapping the decoder's errors to the API's.
func decodeOne(dec *json.Decoder, v any) error {
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return messages.Errorf(messages.CodeInvalidJSON, "the request body has data after the JSON object")
	}
	return nil
}

// decodeError maps an error of encoding/json to the API's error: an
// unknown field and a field's bad value name the field; the rest is
// malformed JSON.
func decodeError(err error) error {
	var (
		b64 base64.CorruptInputError
		te  *time.ParseError
	)
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return messages.Errorf(messages.CodeUnknownField,
			"unknown field %s: this API refuses fields it does not know (see GET /api/openapi.json)", name)
	}
	switch {
	case errors.As(err, &b64):
		return messages.Errorf(messages.CodeInvalidRequest,
			"message_body_base64 is not standard base64 (with padding): bad data at byte %d", int64(b64))
	case errors.As(err, &te):
		return messages.Errorf(messages.CodeInvalidRequest, "a time is not RFC 3339 (e.g. 2026-05-01T12:00:00Z): %q", te.Value)
	}
	return messages.Errorf(messages.CodeInvalidJSON, "the request body is not valid JSON: %v", err)
}

// textError reports the first thing in the raw JSON raw that a decoder
// would change instead of refusing: a byte sequence that is not UTF-8, or
// a \u escape of a lone UTF-16 surrogate. A backslash can only appear
// inside a string of valid JSON, and what is not valid JSON the decoder
// refuses anyway, so the scan needs no JSON state.
func textError(raw []byte) error {
	if !utf8.Valid(raw) {
		at := 0
		for at < len(raw) {
			r, n := utf8.DecodeRune(raw[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return messages.Errorf(messages.CodeInvalidRequest, "the request body is not valid UTF-8 (byte %d is 0x%02x)", at, raw[at])
	}
	for i := 0; i+1 < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character: a second backslash is skipped with it
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			continue // malformed: the decoder refuses it
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return loneSurrogate(r)
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := rune(0), i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u'
			if ok {
				low, ok = hex4(raw, i+3)
			}
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return loneSurrogate(r)
			}
			i += 6
		}
	}
	return nil
}

func loneSurrogate(r rune) error {
	return messages.Errorf(messages.CodeInvalidRequest,
		`the request body escapes half a UTF-16 surrogate pair (\u%04X), which is not a character`, r)
}

// hex4 reads the 4 hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func tooLarge() error {
	return messages.Errorf(messages.CodeBodyTooLarge, "the request body is larger than %d bytes", MaxBody)
}
