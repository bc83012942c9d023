package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/switchboard-dev/switchboard/messages"
)

// File is the credentials file (--credentials).
type File struct {
	Credentials []messages.Credential `json:"credentials"`
}

// MaxFileSize bounds the credentials file (1 MiB: thousands of
// credentials); a larger one is refused rather than read.
const MaxFileSize = 1 << 20

// ParseFile decodes a credentials file strictly and checks every
// credential: an unknown field, data after the document, an invalid
// credential, or a name or token given twice refuses the whole file, with
// every problem found.
func ParseFile(data []byte) (File, error) {
	var f File
	if len(data) > MaxFileSize {
		return f, fmt.Errorf("the file is larger than %d bytes", MaxFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		// An empty file is a valid one without credentials (a node that
		// has just been given --credentials, before the first add).
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("not a credentials file: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return File{}, errors.New("not a credentials file: data after the JSON document")
	}
	var errs []error
	names, hashes := map[string]bool{}, map[string]string{}
	for i, c := range f.Credentials {
		if err := c.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("credentials[%d]: %w", i, err))
		}
		if names[c.Name] {
			errs = append(errs, fmt.Errorf("credentials[%d]: name %q is given twice", i, c.Name))
		}
		names[c.Name] = true
		if other, ok := hashes[c.TokenHash]; ok && c.TokenHash != "" {
			errs = append(errs, fmt.Errorf("credentials[%d]: %q has the token of %q", i, c.Name, other))
		}
		hashes[c.TokenHash] = c.Name
		f.Credentials[i].Frontends = slices.Compact(slices.Sorted(slices.Values(c.Frontends)))
	}
	if err := errors.Join(errs...); err != nil {
		return File{}, err
	}
	return f, nil
}

// Format writes f as the file holds it: indented, credentials by name, a
// newline at the end.
func (f File) Format() []byte {
	cs := slices.Clone(f.Credentials)
	slices.SortFunc(cs, func(a, b messages.Credential) int { return strings.Compare(a.Name, b.Name) })
	if cs == nil {
		cs = []messages.Credential{}
	}
	data, _ := json.MarshalIndent(File{Credentials: cs}, "", "  ") // plain data: never fails
	return append(data, '\n')
}
