package httpapi

import (
	"bytes"
	"context"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
)

// MaxBody is the largest request body accepted (docs/api.md: 1 MiB).
const MaxBody = 1 << 20

// decode reads exactly one JSON document of at most MaxBody bytes into v,
// strictly: the client and directory API (submits, routes, frontends,
// polls, acks) refuses a field it does not know (400 unknown_field: a typo
// such as "msg_id" for "id" would otherwise be dropped in silence), text
// that a JSON decoder would silently change (invalid UTF-8, a \u escape of
// half a UTF-16 surrogate pair: both become U+FFFD), and what
// encoding/json would take in silence about names (exactKeys): a name in
// another case ("ID" fills id) and a name given twice (the last wins).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(raw, v)
}

// decodeNone is decode for a call that takes no body (a single resubmit,
// a DELETE): none, or an empty object. Anything else is refused as decode
// refuses it, before the call changes anything: it was ignored, so that
// a field such as {"msg_id":"other"} was dropped in silence and the call
// acted on its path alone.
func decodeNone(w http.ResponseWriter, r *http.Request) error {
	raw, err := readUpTo(w, r)
	if err != nil || len(bytes.TrimSpace(raw)) == 0 {
		return err
	}
	return decodeStrict(raw, &struct{}{})
}

// decodeStrict is decode of the body raw. A body of null is refused: a
// decoder takes it for an object without fields in silence (a poll of
// null polled with the defaults).
func decodeStrict(raw []byte, v any) error {
	if err := textError(raw); err != nil {
		return err
	}
	if string(bytes.TrimSpace(raw)) == "null" {
		return messages.Errorf(messages.CodeInvalidJSON, "the request body is null; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := decodeOne(raw, dec, v); err != nil {
		return err
	}
	return exactKeys(raw, reflect.TypeOf(v))
}

// givenString is a string field of a request body that tells one left
// out (Given false) from one given as "" or null (Given true, Value ""):
// a plain string reads all three as "".
type givenString struct {
	Given bool
	Value string
}

// UnmarshalJSON is called for the field only when the body names it,
// null included.
func (g *givenString) UnmarshalJSON(b []byte) error {
	g.Given = true
	if string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &g.Value)
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
	return decodePeerBody(raw, v)
}

// decodePeerBody is decodePeer of the body raw. Text a decoder would
// change is refused as the client API refuses it (textError: 400
// invalid_request): decoded, a peer's invalid UTF-8 or lone surrogate
// escape would be stored and delivered as U+FFFD.
func decodePeerBody(raw []byte, v any) error {
	if err := textError(raw); err != nil {
		return err
	}
	return decodeOne(raw, json.NewDecoder(bytes.NewReader(raw)), v)
}

// bodyWait bounds the reading of a request's body: 30 s, 35 KB/s for a
// body of MaxBody (tests shorten it). The server bounds only the headers' reading
// (ReadHeaderTimeout): a client that sent its body slowly, or less of it
// than its Content-Length, held its connection and handler for ever. (The
// server's ReadTimeout would bound the body too, but it stays on the
// connection after the body was read, and its expiry ends a long poll's
// request context.)
var bodyWait = 30 * time.Second

// answerWait bounds the writing of an answer, from its first byte (tests
// shorten it): a client that asked and did not read the answer held its
// connection, a goroutine and the socket's buffers for ever once they
// were full (the server bounds no write: its WriteTimeout would count from
// the request's headers, and cut long-polls and bulk changes short).
var answerWait = 30 * time.Second

// readBody reads the whole body, at most MaxBody bytes (413 beyond),
// within bodyWait; an empty one is refused.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	raw, err := readUpTo(w, r)
	if err == nil && len(bytes.TrimSpace(raw)) == 0 {
		return nil, messages.Errorf(messages.CodeInvalidJSON, "the request body is empty; a JSON object is required")
	}
	return raw, err
}

// readUpTo reads the whole body, at most MaxBody bytes (413 beyond),
// within bodyWait.
func readUpTo(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBody {
		return nil, tooLarge(w)
	}
	stop, _ := r.Context().Value(stopKey{}).(context.Context)
	if stop != nil && stop.Err() != nil {
		return nil, stopping(w)
	}
	rc := http.NewResponseController(w)
	limited := rc.SetReadDeadline(time.Now().Add(bodyWait)) == nil
	cut := cutOnStop(stop, rc)
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if cut() {
		return nil, stopping(w)
	}
	if err == nil && limited {
		_ = rc.SetReadDeadline(time.Time{})
	}
	// On an error the deadline stays: the server reads what is left of a
	// body its handler did not (up to 256 KiB) before it answers, and a
	// body that stopped coming would hold that read for ever.
	var mb *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mb):
		return nil, tooLarge(w)
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		return nil, messages.Errorf(messages.CodeInvalidJSON, "the request body did not come within %v", bodyWait)
	case err != nil:
		return nil, messages.Errorf(messages.CodeInvalidJSON, "the request body could not be read: %v", err)
	}
	return raw, nil
}

// stopKey is the key of the context a server's Stopping ends, in the
// base context of its requests (Server.BaseContext).
type stopKey struct{}

// cutOnStop makes stop's end cut the body read under way with rc short
// (its read deadline set to now: the read fails at once). The function
// it returns, called once the read has returned, reports whether it was
// cut; then the body, whole or not, must not be used: the deadline may
// have come after the read's end and failed the server's background read
// of the connection, which cancels the request's context. A nil stop (a
// server without BaseContext) never cuts.
func cutOnStop(stop context.Context, rc *http.ResponseController) func() bool {
	if stop == nil {
		return func() bool { return false }
	}
	done := make(chan struct{})
	keep := context.AfterFunc(stop, func() {
		_ = rc.SetReadDeadline(time.Now())
		close(done)
	})
	return func() bool {
		if keep() {
			return false
		}
		<-done // the handler may not use rc once it returns
		return true
	}
}

// stopping is the answer to a request whose body the node's stop no longer
// waits for: nothing was done for it, and its connection is closed (what
// is left of the body is not read).
func stopping(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return messages.Errorf(messages.CodeUnavailable, "the node is stopping: send the request again (to another instance of the site, or once the node is back)")
}

// decodeOne decodes one document from dec, a decoder of raw, into v and
// refuses anything after it, mapping the decoder's errors to the API's.
func decodeOne(raw []byte, dec *json.Decoder, v any) error {
	if err := dec.Decode(v); err != nil {
		return decodeError(err, raw)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return messages.Errorf(messages.CodeInvalidJSON, "the request body has data after the JSON object")
	}
	return nil
}

// decodeError maps an error of encoding/json decoding raw to the API's
// error: an unknown field and a field's bad value name the field (a time
// that does not parse: the field raw gives it in, stringField); a value
// of the wrong JSON type names the field and the type wanted (typeError);
// the rest is malformed JSON.
func decodeError(err error, raw []byte) error {
	var (
		b64 base64.CorruptInputError
		te  *time.ParseError
		ute *json.UnmarshalTypeError
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
		field := "a time"
		if name := stringField(raw, te.Value); name != "" {
			field = name
		}
		return messages.Errorf(messages.CodeInvalidRequest, "%s is not RFC 3339 (e.g. 2026-05-01T12:00:00Z): %q", field, te.Value)
	case errors.As(err, &ute):
		return typeError(ute)
	case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON: "):
		return messages.Errorf(messages.CodeInvalidJSON, "a time is not a JSON string (RFC 3339, e.g. \"2026-05-01T12:00:00Z\")")
	}
	return messages.Errorf(messages.CodeInvalidJSON, "the request body is not valid JSON: %v", err)
}

// stringField is the name of the one member of raw's objects, at any
// depth, whose value is the JSON string value ("" when none is, or more
// than one: the decoder's time error gives the value, not its field).
func stringField(raw []byte, value string) string {
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				if s, ok := m.(string); ok && s == value {
					names = append(names, k)
				}
				walk(m)
			}
		case []any:
			for _, m := range v {
				walk(m)
			}
		}
	}
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	walk(doc)
	if len(names) != 1 {
		return ""
	}
	return names[0]
}

// typeError is the invalid_json of a value of the wrong JSON type, in the
// API's words: the field's JSON name and the JSON type it takes. The
// decoder's own message names Go types ("cannot unmarshal array into Go
// value of type struct { Max *int ... }", "Go struct field
// Submission.destination_msisdn"), which tell a client nothing.
func typeError(e *json.UnmarshalTypeError) error {
	if e.Field == "" {
		return messages.Errorf(messages.CodeInvalidJSON, "the request body is %s; a JSON object is required", jsonValue(e.Value))
	}
	return messages.Errorf(messages.CodeInvalidJSON, "%s must be %s, not %s", e.Field, jsonKind(e.Type), jsonValue(e.Value))
}

// jsonValue names a JSON value that encoding/json describes as v
// ("array", "number", "number 1.5").
func jsonValue(v string) string {
	switch {
	case strings.Contains(v, " "):
		return "the " + v
	case v == "array", v == "object":
		return "an " + v
	case v == "bool":
		return "a boolean"
	}
	return "a " + v
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	}
	return "an object"
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

// tooLarge is the 413 of a body over MaxBody. It lets the handler read the
// rest of the body after it has written the answer (linger): an HTTP/1
// handler otherwise cannot.
func tooLarge(w http.ResponseWriter) error {
	_ = http.NewResponseController(w).EnableFullDuplex()
	w.Header().Set("Connection", "close")
	return messages.Errorf(messages.CodeBodyTooLarge, "the request body is larger than %d bytes", MaxBody)
}

// How long and how much of an oversize body linger reads (the way nginx
// lingers before it closes): 16 MiB in at most 10 s covers a client that
// sends a few MiB over any link worth serving, and bounds what a client
// can make the node read for nothing.
const (
	lingerBytes = 16 << 20
	lingerTime  = 10 * time.Second
)

// linger is called after a 413 was written: it sends the answer at once,
// then reads and discards what the client still sends (up to lingerBytes
// within lingerTime), so that the connection closes after the client
// finished sending. Closing while unread data waits in the socket makes
// the kernel reset the connection, and a client that sends its whole body
// before it reads (Python's urllib, most simple clients) then sees a
// broken connection ("EOF occurred in violation of protocol") instead of
// the 413. A client that asked "Expect: 100-continue" was never told to
// send the body: nothing to read.
func linger(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, r.Body, lingerBytes)
}

// exactKeys refuses what encoding/json accepts in silence about the names
// of raw, a document already decoded into a value of type t (so valid
// JSON): a name that is a field's name only in another case (400
// unknown_field: {"id":"a","ID":"b"} would store id b) and a name given
// twice in one object (400 invalid_json: the last one wins). Objects that
// decode into a struct must use its fields' exact names; those that decode
// into a map, any name once; values decoded by their own UnmarshalJSON
// (times, token ranges) or into an interface are not looked into. One pass
// over raw, without allocating unless a name has escapes.
func exactKeys(raw []byte, t reflect.Type) error {
	k := keyScan{raw: raw}
	return k.value(shapeOf(t))
}

// shape is what exactKeys knows of a Go type: the exact JSON names of a
// struct's fields (with the shape of each), the values of a map, the
// elements of a slice or array; opaque for the rest.
type shape struct {
	kind   shapeKind
	fields map[string]field // kind struct
	elem   *shape           // kind map, slice
}

type field struct {
	bit   int // the field's bit in the set of names seen
	shape *shape
}

type shapeKind int

const (
	opaqueShape shapeKind = iota
	structShape
	mapShape
	sliceShape
)

var (
	shapes      sync.Map // reflect.Type -> *shape
	opaqueValue = &shape{kind: opaqueShape}
)

// shapeOf is the shape of t, built once per type.
func shapeOf(t reflect.Type) *shape {
	if sh, ok := shapes.Load(t); ok {
		return sh.(*shape)
	}
	sh := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, sh)
	return sh
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// buildShape follows encoding/json's rules for the names it decodes into;
// building holds the shapes under construction (a type may refer to
// itself).
func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if sh, ok := building[t]; ok {
		return sh
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return opaqueValue
	}
	switch t.Kind() {
	case reflect.Struct:
		sh := &shape{kind: structShape, fields: map[string]field{}}
		building[t] = sh
		addFields(sh, t, building)
		return sh
	case reflect.Map:
		sh := &shape{kind: mapShape}
		building[t] = sh
		sh.elem = buildShape(t.Elem(), building)
		return sh
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return opaqueValue // []byte is a base64 string
		}
		sh := &shape{kind: sliceShape}
		building[t] = sh
		sh.elem = buildShape(t.Elem(), building)
		return sh
	}
	return opaqueValue
}

// addFields adds t's JSON fields to sh: a field's tag name or Go name, an
// untagged embedded struct's fields promoted (an outer name wins), "-"
// left out.
func addFields(sh *shape, t reflect.Type, building map[reflect.Type]*shape) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := sh.fields[name]; !ok {
			sh.fields[name] = field{bit: len(sh.fields), shape: buildShape(f.Type, building)}
		}
	}
	for _, et := range embedded {
		addFields(sh, et, building)
	}
}

// keyScan walks a valid JSON document.
type keyScan struct {
	raw []byte
	at  int
}

func (k *keyScan) space() {
	for k.at < len(k.raw) {
		switch k.raw[k.at] {
		case ' ', '\t', '\n', '\r':
			k.at++
		default:
			return
		}
	}
}

// value checks the value at k.at, of shape sh, and moves past it.
func (k *keyScan) value(sh *shape) error {
	k.space()
	if k.at >= len(k.raw) {
		return nil
	}
	switch c := k.raw[k.at]; {
	case c == '{' && (sh.kind == structShape || sh.kind == mapShape):
		return k.object(sh)
	case c == '[' && sh.kind == sliceShape:
		k.at++
		k.space()
		if k.at < len(k.raw) && k.raw[k.at] == ']' {
			k.at++
			return nil
		}
		for k.at < len(k.raw) {
			if err := k.value(sh.elem); err != nil {
				return err
			}
			k.space()
			if k.at >= len(k.raw) || k.raw[k.at] == ']' {
				k.at++
				return nil
			}
			k.at++ // ','
		}
		return nil
	}
	k.skip()
	return nil
}

// object checks the object at k.at, of a struct or map shape.
func (k *keyScan) object(sh *shape) error {
	k.at++ // '{'
	var (
		seen  uint64              // the struct's fields named so far, by bit
		names map[string]struct{} // the names so far of a map (or past bit 63)
	)
	for {
		k.space()
		if k.at >= len(k.raw) || k.raw[k.at] == '}' {
			k.at++
			return nil
		}
		name := k.name()
		k.space()
		k.at++ // ':'
		next, bit := sh.elem, -1
		if sh.kind == structShape {
			f, ok := sh.fields[string(name)]
			if !ok {
				return caseError(sh, string(name))
			}
			next, bit = f.shape, f.bit
		}
		dup := false
		if bit >= 0 && bit < 64 {
			dup, seen = seen&(1<<bit) != 0, seen|1<<bit
		} else {
			if names == nil {
				names = map[string]struct{}{}
			}
			_, dup = names[string(name)]
			names[string(name)] = struct{}{}
		}
		if dup {
			return messages.Errorf(messages.CodeInvalidJSON, "the request body names %q twice in one object; a name may appear once", name)
		}
		if err := k.value(next); err != nil {
			return err
		}
		k.space()
		if k.at < len(k.raw) && k.raw[k.at] == ',' {
			k.at++
		}
	}
}

// caseError is the unknown_field of a name that decoding matched to a
// field only by folding its case (a name no field has at all was refused
// by the decoder already).
func caseError(sh *shape, name string) error {
	for known := range sh.fields {
		if strings.EqualFold(known, name) {
			return messages.Errorf(messages.CodeUnknownField,
				"unknown field %q: field names are case-sensitive; did you mean %q? (see GET /api/openapi.json)", name, known)
		}
	}
	return messages.Errorf(messages.CodeUnknownField,
		"unknown field %q: this API refuses fields it does not know (see GET /api/openapi.json)", name)
}

// str moves past the string at k.at and returns its raw content (between
// the quotes) and whether it has escapes.
func (k *keyScan) str() (content []byte, escaped bool) {
	start := k.at + 1
	rest := k.raw[start:]
	if q := bytes.IndexByte(rest, '"'); q >= 0 && bytes.IndexByte(rest[:q], '\\') < 0 {
		k.at = start + q + 1 // the common case, found fast
		return rest[:q], false
	}
	for k.at = start; k.at < len(k.raw) && k.raw[k.at] != '"'; k.at++ {
		if k.raw[k.at] == '\\' {
			escaped = true
			k.at++
		}
	}
	end := min(k.at, len(k.raw))
	k.at++ // the closing quote
	return k.raw[start:end], escaped
}

// name reads the string at k.at, an object's name, unescaped when it has
// escapes (a \u0069d is id, as the decoder read it).
func (k *keyScan) name() []byte {
	content, escaped := k.str()
	if !escaped {
		return content
	}
	var s string
	if err := json.Unmarshal(k.raw[k.at-len(content)-2:k.at], &s); err != nil {
		return content // cannot happen: raw was decoded
	}
	return []byte(s)
}

// skip moves past the value at k.at, whatever it holds.
func (k *keyScan) skip() {
	depth := 0
	for k.at < len(k.raw) {
		switch k.raw[k.at] {
		case '"':
			k.str()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the enclosing value: a scalar was skipped
			}
			depth--
			if depth == 0 {
				k.at++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
		k.at++
	}
}
