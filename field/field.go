// Package field names the field of a configuration that an error is
// about. A package's Config.Validate reports each problem as an *Error
// whose Field is the field's path in that Config ("URL", "Reconnect.Min"),
// and names any other field its text mentions by a Ref. Whoever fills
// that Config from fields of its own renames them (Rename) to its own
// names: the node to its Config's fields, the command to its flags. So
// the library's errors speak the embedder's language and the command's
// speak the operator's, from one text.
package field

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a problem with the value of one field.
type Error struct {
	// Field is the field's path in its configuration ("Reconnect.Min").
	Field string
	// Err is what is wrong with the value; its text names other fields
	// by the Refs it was made with.
	Err error

	format string
	args   []any
}

// Ref names another field in an Error's text (Errorf("Max", "must be at
// least %s", Ref("Min"))), so that Rename renames it too.
type Ref string

// Errorf is the error of field path, its text formatted as fmt.Errorf
// does (%w wraps).
func Errorf(path, format string, args ...any) error {
	return &Error{Field: path, Err: fmt.Errorf(format, args...), format: format, args: args}
}

// Wrap is err as the error of field path; nil stays nil.
func Wrap(path string, err error) error {
	if err == nil {
		return nil
	}
	return Errorf(path, "%w", err)
}

func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }

// Refs are the other fields e's text names: its Refs, and the field and
// Refs of each field error it was made with (by %w or %v), in order.
func (e *Error) Refs() []string {
	var out []string
	for _, a := range e.args {
		switch a := a.(type) {
		case Ref:
			out = append(out, string(a))
		case error:
			var inner *Error
			if errors.As(a, &inner) {
				out = append(out, inner.Field)
				out = append(out, inner.Refs()...)
			}
		}
	}
	return out
}

func (e *Error) Unwrap() error { return e.Err }

// Rename returns err with every field named by name(path) instead of
// path: each Error's Field and the Refs in its text. It looks into
// errors joined by errors.Join and through errors that wrap one error and
// quote its text (fmt.Errorf("start: %w", err)); what it rewrites keeps
// its text around the field error but no longer its type. Other errors
// are returned as they are.
func Rename(err error, name func(path string) string) error {
	renamed, _ := rename(err, name)
	return renamed
}

// rename is Rename, and whether it found a field error to rename.
func rename(err error, name func(path string) string) (error, bool) {
	switch e := err.(type) {
	case *Error:
		format, args := e.format, append([]any(nil), e.args...)
		if format == "" { // made as a literal, not by Errorf
			format, args = "%w", []any{e.Err}
		}
		for i, a := range args {
			switch a := a.(type) {
			case Ref:
				args[i] = Ref(name(string(a)))
			case error:
				args[i], _ = rename(a, name)
			}
		}
		return &Error{Field: name(e.Field), Err: fmt.Errorf(format, args...), format: format, args: args}, true
	case interface{ Unwrap() []error }:
		list := e.Unwrap()
		out, found := make([]error, len(list)), false
		for i, inner := range list {
			var ok bool
			out[i], ok = rename(inner, name)
			found = found || ok
		}
		if !found {
			return err, false
		}
		return errors.Join(out...), true
	case interface{ Unwrap() error }:
		inner := e.Unwrap()
		if inner == nil {
			return err, false
		}
		msg, text := err.Error(), inner.Error()
		i := strings.Index(msg, text)
		if i < 0 {
			return err, false
		}
		renamed, ok := rename(inner, name)
		if !ok {
			return err, false
		}
		return &quoted{before: msg[:i], after: msg[i+len(text):], err: renamed}, true
	}
	return err, false
}

// quoted is an error that wrapped a field error and quoted its text,
// with the field error renamed.
type quoted struct {
	before, after string
	err           error
}

func (q *quoted) Error() string { return q.before + q.err.Error() + q.after }

func (q *quoted) Unwrap() error { return q.err }

// Under is err with its fields' paths under prefix: what a Config reports
// of a Config it holds in its field prefix ("Reconnect" makes "Min"
// "Reconnect.Min").
func Under(prefix string, err error) error {
	return Rename(err, func(path string) string { return prefix + "." + path })
}

// Map is a name for Rename from a table: paths it does not hold keep
// their name.
func Map(names map[string]string) func(string) string {
	return func(path string) string {
		if n, ok := names[path]; ok {
			return n
		}
		return path
	}
}
