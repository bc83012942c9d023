package gsm7

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestEncodeKnownSeptets(t *testing.T) {
	cases := []struct {
		in   string
		want []byte
	}{
		{"@", []byte{0x00}},
		{"Hello", []byte{0x48, 0x65, 0x6C, 0x6C, 0x6F}},
		{"£$¥", []byte{0x01, 0x02, 0x03}},
		{"Δ_", []byte{0x10, 0x11}},
		{"ÆæßÉ", []byte{0x1C, 0x1D, 0x1E, 0x1F}},
		{"¤", []byte{0x24}},
		{"¡¿", []byte{0x40, 0x60}},
		{"à", []byte{0x7F}},
		{"€", []byte{0x1B, 0x65}},
		{"[x]", []byte{0x1B, 0x3C, 0x78, 0x1B, 0x3E}},
		{"{|}~^\\\f", []byte{0x1B, 0x28, 0x1B, 0x40, 0x1B, 0x29, 0x1B, 0x3D, 0x1B, 0x14, 0x1B, 0x2F, 0x1B, 0x0A}},
	}
	for _, c := range cases {
		got, err := Encode(c.in)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("Encode(%q) = % X, %v; want % X", c.in, got, err, c.want)
		}
		back, err := Decode(got)
		if err != nil || back != c.in {
			t.Errorf("Decode(% X) = %q, %v; want %q", got, back, err, c.in)
		}
		if n := Septets(c.in); n != len(c.want) {
			t.Errorf("Septets(%q) = %d, want %d", c.in, n, len(c.want))
		}
	}
}

func TestEncodeRefusesOutsideTheAlphabet(t *testing.T) {
	for _, s := range []string{"ş", "a€bç", "日本", "`"} {
		if _, err := Encode(s); err == nil {
			t.Errorf("Encode(%q) accepted", s)
		}
		if Septets(s) != -1 {
			t.Errorf("Septets(%q) = %d, want -1", s, Septets(s))
		}
		if _, _, ok := Offending(s); ok {
			t.Errorf("Offending(%q) found nothing", s)
		}
	}
	r, at, ok := Offending("abcç")
	if ok || r != 'ç' || at != 3 {
		t.Errorf("Offending = %q %d %v", r, at, ok)
	}
}

func TestDecodeEdges(t *testing.T) {
	cases := []struct {
		in   []byte
		want string
	}{
		{[]byte{0x41, 0x1B}, "A"},         // a trailing escape
		{[]byte{0x1B, 0x41}, "A"},         // an escape of an unassigned extension: the basic character
		{[]byte{0x1B, 0x1B}, " "},         // escape escape
		{[]byte{0x0A, 0x0D}, "\n\r"},      // line feed, carriage return
		{[]byte{0x1B, 0x0A, 0x00}, "\f@"}, // form feed
		{[]byte{}, ""},
	}
	for _, c := range cases {
		got, err := Decode(c.in)
		if err != nil || got != c.want {
			t.Errorf("Decode(% X) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{{0x80}, {0x41, 0xFF}, {0x1B, 0x90}} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(% X) accepted", bad)
		}
	}
}

// Every septet sequence decodes to text that encodes back to an
// equivalent sequence (the same text again).
func FuzzDecode(f *testing.F) {
	f.Add([]byte("Hello"))
	f.Add([]byte{0x1B, 0x65, 0x00, 0x7F})
	f.Add([]byte{0x1B})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if !utf8.ValidString(s) {
			t.Fatalf("Decode(% X) = invalid UTF-8", b)
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("Decode(% X) = %q, which does not encode: %v", b, s, err)
		}
		again, err := Decode(enc)
		if err != nil || again != s {
			t.Fatalf("round trip of %q: %q, %v", s, again, err)
		}
	})
}
