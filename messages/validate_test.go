package messages

import "testing"

// TestSearchableSource: a source is accepted only when the search of its
// own value finds it: the stores compare it without its leading '+' with
// NumberKey of the search, so the two must agree and the key must be its
// own key. " Bank" and "ACME " were stored as given and never found.
func TestSearchableSource(t *testing.T) {
	for s, want := range map[string]bool{
		"ACME": true, "+15550100": true, "15550100": true, "ACME Bank": true, "++44": true, "Ümlaut": true,
		"ACME ": false, " Bank": false, "+ 5": false, "+ +5": false, " +5": false, "+": false, "": false,
		"ACME\u00a0": false, "\u3000x": false,
	} {
		if got := SearchableSource(s); got != want {
			t.Errorf("SearchableSource(%q) = %v, want %v", s, got, want)
		}
		sub := Submission{SourceMSISDN: s, DestinationMSISDN: "441", Body: "x"}
		if err := sub.Validate(); (err == nil) != want {
			t.Errorf("a submission from %q: %v, want valid %v", s, err, want)
		}
		if want {
			// What the stores compare (the source without its '+') is
			// the key of a search for the source as given.
			if key := NumberKey(s); key != trimPlus(s) || NumberKey(key) != key {
				t.Errorf("%q: search key %q, stored key %q", s, key, trimPlus(s))
			}
		}
	}
}

func trimPlus(s string) string {
	for len(s) > 0 && s[0] == '+' {
		s = s[1:]
	}
	return s
}
