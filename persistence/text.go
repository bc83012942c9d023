package persistence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTextBytes bounds the text of an outcome (Reason, Detail) and of a
// status update (Reason) as stored: 1,024 bytes, the bound of an ack's
// reason (docs/api.md), enough for a frontend's explanation without
// letting one fill a history row.
const MaxTextBytes = 1024

// CleanText is s as the stores keep a reason or a detail: valid UTF-8
// (each invalid byte becomes U+FFFD), every control character (NUL, line
// breaks, tabs) a blank, at most MaxTextBytes bytes cut on a character
// boundary. The text comes from outside (a webhook's error body, an
// in-process frontend's reason, an SMSC, a peer) and Postgres refuses
// invalid UTF-8 and NUL: refused, the round that records it would fail
// for ever. The decision core (Complete, Status) cleans what it writes,
// so that both stores keep the same text.
func CleanText(s string) string {
	if len(s) <= MaxTextBytes && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return cutText(s, MaxTextBytes)
}

// cutText is s cut to at most n bytes on a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
