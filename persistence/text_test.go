package persistence

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"clean text is kept", "HTTP 503: busy, réessayez", "HTTP 503: busy, réessayez"},
		{"a character cut in half", "busy \xc3", "busy \uFFFD"},
		{"NUL and line breaks", "a\x00b\r\nc\td", "a b  c d"},
		{"C1 controls", "a\u0085b", "a b"},
		{"long text is cut at the bound", strings.Repeat("a", MaxTextBytes+10), strings.Repeat("a", MaxTextBytes)},
		{"cut on a character boundary", strings.Repeat("a", MaxTextBytes-1) + "é", strings.Repeat("a", MaxTextBytes-1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CleanText(c.in)
			if got != c.want {
				t.Errorf("CleanText(%q) = %q, want %q", c.in, got, c.want)
			}
			if !utf8.ValidString(got) || len(got) > MaxTextBytes || CleanText(got) != got {
				t.Errorf("CleanText(%q) = %q: not clean, or not a fixed point", c.in, got)
			}
		})
	}
}
