package messages

import (
	"errors"
	"testing"
)

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
		// A forward's origin accepted it (one before this rule may have):
		// its peer takes it rather than fail it in a rolling upgrade.
		fwd := Forward{ID: "f1", SourceMSISDN: s, DestinationMSISDN: "441", Body: "x", SourceSMSC: "a", DestSMSC: "b", Frontend: "fe"}
		if err := fwd.Validate(); (err == nil) != (s != "") {
			t.Errorf("a forward from %q: %v, want valid %v", s, err, s != "")
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

// TestRedactURL: a URL's password is shown as RedactedPassword, and an
// http(s) URL's user without one (a service's API key: it was shown and
// recorded whole); another URL without a password (an smpp frontend's
// system_id) is shown as given; a webhook URL with the placeholder as its
// password, or as its user without one, is refused (it would overwrite
// the real one).
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://bob:secret@host/hook?x=1": "https://bob:xxxxx@host/hook?x=1",
		"https://bob@host/hook":            "https://xxxxx@host/hook",
		"http://sk_live_4f2a@host/hook":    "http://xxxxx@host/hook",
		"https://host/hook":                "https://host/hook",
		"smpp://acme@smsc:2775?window=10":  "smpp://acme@smsc:2775?window=10",
		"":                                 "",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
	for _, u := range []string{"https://bob:xxxxx@host/hook", "https://xxxxx@host/hook"} {
		if err := ValidWebhookURL(u); err == nil {
			t.Errorf("a webhook URL with the placeholder as its password or user (%s): accepted", u)
		}
	}
	f := Frontend{Name: "h", Mode: ModeWebhook, URL: "https://bob:secret@host/hook", Secret: "s"}.Shown()
	if f.URL != "https://bob:xxxxx@host/hook" || f.Secret != "" {
		t.Errorf("Shown: %+v", f)
	}
}

// TestWebhookURLPort: a webhook URL's port is 1-65535. url.Parse takes any
// digits, so https://h:99999/x and https://127.0.0.1:0/x were stored and
// every delivery to them failed ("dial tcp: address 99999: invalid port").
func TestWebhookURLPort(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://h:99999/x": false, "https://127.0.0.1:0/x": false, "http://h:65536/": false, "https://[::1]:70000/x": false,
		"https://h:00000/x": false,
		"https://h:1/x":     true, "https://h:65535/x": true, "https://h/x": true, "http://[::1]:8080/x": true, "https://h:0443/x": true,
	} {
		err := ValidWebhookURL(u)
		if (err == nil) != ok {
			t.Errorf("ValidWebhookURL(%q) = %v, want valid %v", u, err, ok)
		}
		fe := Frontend{Name: "wh", Mode: ModeWebhook, URL: u}
		var e *Error
		if err := fe.Validate(); (err == nil) != ok || (!ok && (!errors.As(err, &e) || e.Code != CodeInvalidRequest)) {
			t.Errorf("a webhook frontend with %q: %v, want valid %v (else invalid_request)", u, err, ok)
		}
	}
}
