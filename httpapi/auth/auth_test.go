package auth

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/switchboard-dev/switchboard/messages"
)

func cred(name string, role messages.Role, token string, fes ...string) messages.Credential {
	return messages.Credential{Name: name, Role: role, TokenHash: Hash(token), Frontends: fes,
		CreatedAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
}

func TestNewTokenIsRandomAndHashed(t *testing.T) {
	a, ha := NewToken()
	b, hb := NewToken()
	if a == b || ha == hb {
		t.Fatal("two tokens alike")
	}
	if !strings.HasPrefix(a, TokenPrefix) || len(a) != len(TokenPrefix)+43 || !ValidToken(a) {
		t.Errorf("token %q: want %s and 43 base64url characters", a, TokenPrefix)
	}
	if ha != Hash(a) || len(ha) != 64 || strings.ToLower(ha) != ha {
		t.Errorf("hash %q is not the lower-case hex SHA-256 of the token", ha)
	}
	c := cred("x", messages.RoleAdmin, a)
	if err := c.Validate(); err != nil {
		t.Errorf("a credential of a new token is invalid: %v", err)
	}
}

func TestSetAuthenticates(t *testing.T) {
	s := NewSet([]messages.Credential{
		cred("root", messages.RoleAdmin, "tok-root-0123456789"),
		cred("gw", messages.RoleFrontend, "tok-gw-0123456789", "sms-uk"),
		cred("dup-name", messages.RoleClient, "tok-a-0123456789"),
		cred("dup-name", messages.RoleAdmin, "tok-b-0123456789"),     // ignored: name taken
		cred("dup-token", messages.RoleAdmin, "tok-root-0123456789"), // ignored: token taken
	}, true)
	if s.Open() || s.Len() != 3 {
		t.Fatalf("open %v, %d credentials; want closed, 3", s.Open(), s.Len())
	}
	for _, c := range []struct {
		token string
		name  string
		role  messages.Role
		ok    bool
	}{
		{"tok-root-0123456789", "root", messages.RoleAdmin, true},
		{"tok-gw-0123456789", "gw", messages.RoleFrontend, true},
		{"tok-a-0123456789", "dup-name", messages.RoleClient, true},
		{"tok-b-0123456789", "", "", false},
		{"", "", "", false},
		{"tok-root-012345678", "", "", false},
	} {
		p, ok := s.Authenticate(c.token)
		if ok != c.ok || p.Name != c.name || p.Role != c.role {
			t.Errorf("Authenticate(%q) = %+v, %v; want %s %s %v", c.token, p, ok, c.name, c.role, c.ok)
		}
	}
	gw, _ := s.Authenticate("tok-gw-0123456789")
	root, _ := s.Authenticate("tok-root-0123456789")
	if !gw.Bound("sms-uk") || gw.Bound("sms-fr") || !root.Bound("sms-fr") {
		t.Error("Bound: a frontend credential is bound to its frontends only, an admin to all")
	}
	if p, ok := s.Check("gw", "tok-gw-0123456789"); !ok || p.Name != "gw" {
		t.Errorf("Check(gw, its token) = %+v, %v", p, ok)
	}
	if _, ok := s.Check("gw", "tok-root-0123456789"); ok {
		t.Error("Check(gw, root's token) passed")
	}
	if _, ok := s.Check("nobody", "x"); ok {
		t.Error("Check of an unknown name passed")
	}

	// Without credentials: open unless required.
	if open := NewSet(nil, false); !open.Open() {
		t.Error("an empty set that requires nothing is not open")
	} else if p, ok := open.Authenticate("anything"); !ok || p.Name != Anonymous.Name || p.Role != messages.RoleAdmin {
		t.Errorf("open set: %+v, %v", p, ok)
	}
	if closed := NewSet(nil, true); closed.Open() {
		t.Error("an empty set that requires credentials is open")
	} else if _, ok := closed.Authenticate("anything"); ok {
		t.Error("an empty required set let a token in")
	}
}

func TestSetDiff(t *testing.T) {
	old := NewSet([]messages.Credential{cred("a", messages.RoleAdmin, "ta"), cred("b", messages.RoleClient, "tb"),
		cred("c", messages.RoleOperator, "tc")}, true)
	next := NewSet([]messages.Credential{cred("a", messages.RoleAdmin, "ta"), cred("c", messages.RoleOperator, "tc2"),
		cred("d", messages.RoleClient, "td")}, true)
	added, removed := old.Diff(next)
	if !slices.Equal(added, []string{"c", "d"}) || !slices.Equal(removed, []string{"b", "c"}) {
		t.Errorf("Diff = added %v, removed %v; want [c d], [b c]", added, removed)
	}
}

func TestParseFile(t *testing.T) {
	valid := `{"credentials":[
	  {"name":"ops","role":"operator","token_sha256":"` + Hash("t1") + `","created_at":"2026-05-01T12:00:00Z"},
	  {"name":"gw","role":"frontend","token_sha256":"` + Hash("t2") + `","frontends":["b","a","b"]},
	  {"name":"shop","role":"client","token_sha256":"` + Hash("t3") + `","submit_rate":2.5}]}`
	f, err := ParseFile([]byte(valid))
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	if len(f.Credentials) != 3 || !slices.Equal(f.Credentials[1].Frontends, []string{"a", "b"}) || f.Credentials[2].SubmitRate != 2.5 {
		t.Errorf("parsed %+v", f.Credentials)
	}
	again, err := ParseFile(f.Format())
	if err != nil || len(again.Credentials) != 3 || again.Credentials[0].Name != "gw" {
		t.Errorf("Format, then ParseFile: %+v, %v (want sorted by name)", again.Credentials, err)
	}
	if f, err := ParseFile([]byte(" \n")); err != nil || len(f.Credentials) != 0 {
		t.Errorf("an empty file: %+v, %v; want no credentials", f, err)
	}
	h := Hash("t1")
	for name, bad := range map[string]string{
		"not json":        `credentials: []`,
		"unknown field":   `{"credentials":[],"tokens":[]}`,
		"unknown in one":  `{"credentials":[{"name":"a","role":"admin","token_sha256":"` + h + `","password":"x"}]}`,
		"trailing data":   `{"credentials":[]} {}`,
		"bad role":        `{"credentials":[{"name":"a","role":"root","token_sha256":"` + h + `"}]}`,
		"bad hash":        `{"credentials":[{"name":"a","role":"admin","token_sha256":"abc"}]}`,
		"upper-case hash": `{"credentials":[{"name":"a","role":"admin","token_sha256":"` + strings.ToUpper(h) + `"}]}`,
		"bad name":        `{"credentials":[{"name":"a b","role":"admin","token_sha256":"` + h + `"}]}`,
		"reserved name":   `{"credentials":[{"name":"api-token","role":"admin","token_sha256":"` + h + `"}]}`,
		"name twice": `{"credentials":[{"name":"a","role":"admin","token_sha256":"` + h + `"},` +
			`{"name":"a","role":"admin","token_sha256":"` + Hash("t2") + `"}]}`,
		"token twice": `{"credentials":[{"name":"a","role":"admin","token_sha256":"` + h + `"},` +
			`{"name":"b","role":"admin","token_sha256":"` + h + `"}]}`,
		"unbound frontend":  `{"credentials":[{"name":"a","role":"frontend","token_sha256":"` + h + `"}]}`,
		"bound admin":       `{"credentials":[{"name":"a","role":"admin","token_sha256":"` + h + `","frontends":["x"]}]}`,
		"operator rate":     `{"credentials":[{"name":"a","role":"operator","token_sha256":"` + h + `","submit_rate":5}]}`,
		"negative rate":     `{"credentials":[{"name":"a","role":"client","token_sha256":"` + h + `","submit_rate":-1}]}`,
		"too large":         `{"credentials":[]}` + strings.Repeat(" ", MaxFileSize),
		"credentials twice": `{"credentials":[],"credentials":null} x`,
	} {
		if _, err := ParseFile([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestLimiterBoundsEachCredential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(0.5, 200).Draw(t, "rate")
		l := NewLimiter()
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := start
		allowed := 0
		steps := rapid.SliceOfN(rapid.Int64Range(0, int64(2*time.Second)), 1, 300).Draw(t, "gaps")
		for _, gap := range steps {
			now = now.Add(time.Duration(gap))
			ok, wait := l.Allow("app", rate, now)
			if ok {
				allowed++
				continue
			}
			if wait <= 0 {
				t.Fatalf("refused without a wait")
			}
			// After the wait it is allowed (nothing else took from it).
			if ok, _ := l.Allow("app", rate, now.Add(wait)); !ok {
				t.Fatalf("still refused after the wait %v", wait)
			}
			allowed++
			now = now.Add(wait)
		}
		limit := math.Max(1, rate) + rate*now.Sub(start).Seconds()
		if float64(allowed) > limit+1e-6 {
			t.Fatalf("%d allowed in %v at %g/s: more than the burst plus the rate (%g)", allowed, now.Sub(start), rate, limit)
		}
		// Another credential has its own bucket; no rate, no bound.
		if ok, _ := l.Allow("other", rate, now); !ok {
			t.Fatal("another credential was refused")
		}
		for range 1000 {
			if ok, _ := l.Allow("free", 0, now); !ok {
				t.Fatal("a credential without a rate was refused")
			}
		}
	})
}

// TestLimiterRefund: a submit given back is taken again at once, and
// giving back never makes a bucket hold more than its burst.
func TestLimiterRefund(t *testing.T) {
	l := NewLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, _ := l.Allow("app", 0.1, now); !ok {
		t.Fatal("the first submit was refused")
	}
	if ok, _ := l.Allow("app", 0.1, now); ok {
		t.Fatal("a second submit within the burst of one was allowed")
	}
	l.Refund("app", 0.1)
	if ok, _ := l.Allow("app", 0.1, now); !ok {
		t.Fatal("the submit given back was not allowed again")
	}
	l.Refund("app", 0.1)
	l.Refund("app", 0.1) // beyond the burst
	if ok, _ := l.Allow("app", 0.1, now); !ok {
		t.Fatal("refused after a refund")
	}
	if ok, _ := l.Allow("app", 0.1, now); ok {
		t.Fatal("two refunds gave more than the burst of one")
	}
}

// TestLimiterTakeGoesIntoDebt: a submit taken whatever the bucket holds
// leaves it in debt, and the submits after it wait the debt out.
func TestLimiterTakeGoesIntoDebt(t *testing.T) {
	l := NewLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, _ := l.Allow("app", 1, now); !ok {
		t.Fatal("the first submit was refused")
	}
	for range 3 {
		l.Take("app", 1, now)
	}
	ok, wait := l.Allow("app", 1, now.Add(3*time.Second))
	if ok || wait != time.Second {
		t.Fatalf("3 s after a debt of 3: %v, wait %v; want refused for 1s more", ok, wait)
	}
	if ok, _ := l.Allow("app", 1, now.Add(4*time.Second)); !ok {
		t.Fatal("refused once the debt was paid")
	}
	l.Take("free", 0, now) // no rate: nothing to take
	if ok, _ := l.Allow("free", 0, now); !ok {
		t.Fatal("a credential without a rate was refused")
	}
}

func FuzzCredentialsFile(f *testing.F) {
	f.Add([]byte(`{"credentials":[{"name":"ops","role":"operator","token_sha256":"` + Hash("t") + `"}]}`))
	f.Add([]byte(`{"credentials":[{"name":"gw","role":"frontend","token_sha256":"` + Hash("t") + `","frontends":["a"]}]}`))
	f.Add([]byte(`{"credentials":[{"name":"shop","role":"client","token_sha256":"` + Hash("t") + `","submit_rate":1e308}]}`))
	f.Add([]byte(`{"credentials":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data)
		if err != nil {
			return
		}
		// What parses is valid, and survives a round trip unchanged.
		for _, c := range file.Credentials {
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed an invalid credential: %v", err)
			}
		}
		again, err := ParseFile(file.Format())
		if err != nil {
			t.Fatalf("the formatted file does not parse: %v", err)
		}
		if len(again.Credentials) != len(file.Credentials) {
			t.Fatalf("round trip: %d credentials, then %d", len(file.Credentials), len(again.Credentials))
		}
		s := NewSet(again.Credentials, true)
		if s.Len() != len(file.Credentials) {
			t.Fatalf("a set of %d parsed credentials holds %d", len(file.Credentials), s.Len())
		}
	})
}

// An SMPP account opens an SMPP bind (Check) and never the API
// (Authenticate), whatever its password.
func TestSMPPAccountIsNotAnAPIToken(t *testing.T) {
	pw, h := NewSMPPPassword()
	if len(pw) != SMPPPasswordLen || h != Hash(pw) || strings.Trim(pw, smppAlphabet) != "" {
		t.Fatalf("password %q (hash %s)", pw, h)
	}
	if again, _ := NewSMPPPassword(); again == pw {
		t.Fatal("two passwords alike")
	}
	acct := cred("esme1", messages.RoleClient, pw)
	acct.SMPP = true
	s := NewSet([]messages.Credential{acct, cred("shop", messages.RoleClient, "tok-shop-0123456789")}, true)
	if p, ok := s.Authenticate(pw); ok {
		t.Errorf("the API took an SMPP password: %+v", p)
	}
	if p, ok := s.Check("esme1", pw); !ok || !p.SMPP || p.Role != messages.RoleClient {
		t.Errorf("Check(esme1) = %+v, %v", p, ok)
	}
	if p, ok := s.Check("shop", "tok-shop-0123456789"); !ok || p.SMPP {
		t.Errorf("Check(shop) = %+v, %v; want a principal that is no SMPP account", p, ok)
	}
	other := acct
	other.SMPP = false
	if added, removed := s.Diff(NewSet([]messages.Credential{other, cred("shop", messages.RoleClient, "tok-shop-0123456789")}, true)); len(added) != 1 || len(removed) != 1 {
		t.Errorf("Diff does not see the smpp flag change: %v %v", added, removed)
	}
	for _, bad := range []messages.Credential{
		func() messages.Credential { c := acct; c.Role = messages.RoleAdmin; return c }(),
		func() messages.Credential { c := acct; c.Name = "a-system-id-of-16"; return c }(),
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "smpp") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
