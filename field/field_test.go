package field

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestErrorNamesItsField(t *testing.T) {
	err := Errorf("Max", "must be at least %s (%v), got %v", Ref("Min"), 2, 1)
	if got, want := err.Error(), "Max: must be at least Min (2), got 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var fe *Error
	if !errors.As(fmt.Errorf("start: %w", err), &fe) || fe.Field != "Max" {
		t.Errorf("errors.As found %v", fe)
	}
}

func TestWrapKeepsTheCause(t *testing.T) {
	if Wrap("Path", nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
	err := Wrap("Path", fs.ErrNotExist)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "Path: "+fs.ErrNotExist.Error() {
		t.Errorf("Wrap = %v", err)
	}
	if !errors.Is(Rename(err, strings.ToLower), fs.ErrNotExist) {
		t.Error("the renamed error lost its cause")
	}
}

func TestRename(t *testing.T) {
	flags := Map(map[string]string{"Min": "--min", "Max": "--max", "URL": "--url"})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"field and ref", Errorf("Max", "must be at least %s", Ref("Min")), "--max: must be at least --min"},
		{"unknown paths stay", Errorf("Other", "bad %s", Ref("Else")), "Other: bad Else"},
		{"joined", errors.Join(Errorf("Min", "x"), errors.New("plain"), errors.Join(Errorf("URL", "y"))),
			"--min: x\nplain\n--url: y"},
		{"quoted by a wrapper", fmt.Errorf("ring: %w (gave up)", Errorf("URL", "down")), "ring: --url: down (gave up)"},
		{"nested field error", Errorf("Max", "%w", Errorf("Min", "z")), "--max: --min: z"},
		{"made as a literal", &Error{Field: "URL", Err: errors.New("down")}, "--url: down"},
		{"no field error", fmt.Errorf("a: %w", errors.New("b")), "a: b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Rename(tc.err, flags)
			if got.Error() != tc.want {
				t.Errorf("Rename = %q, want %q", got.Error(), tc.want)
			}
		})
	}
	if Rename(nil, flags) != nil {
		t.Error("Rename of nil is not nil")
	}
	plain := errors.New("plain")
	if Rename(plain, flags) != plain {
		t.Error("an error without fields was rewritten")
	}
	var fe *Error
	if !errors.As(Rename(fmt.Errorf("ring: %w", Errorf("URL", "down")), flags), &fe) || fe.Field != "--url" {
		t.Errorf("the renamed field error is not found: %v", fe)
	}
}

func TestErrorRefs(t *testing.T) {
	inner := Errorf("Min", "see %s", Ref("Other"))
	err := Errorf("Max", "must be at least %s: %w, not %s", Ref("Min"), inner, Ref("Max"))
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatal("not a field error")
	}
	if got, want := fe.Refs(), []string{"Min", "Min", "Other", "Max"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Refs() = %v, want %v", got, want)
	}
	renamed := Rename(err, func(p string) string { return "--" + p })
	if !errors.As(renamed, &fe) || strings.Join(fe.Refs(), ",") != "--Min,--Min,--Other,--Max" {
		t.Errorf("after Rename: %v", fe.Refs())
	}
}
