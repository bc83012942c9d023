package intake

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestLookupLongestPrefix(t *testing.T) {
	tb := NewTable([]messages.Route{
		{Prefix: "44", Frontend: "uk"},
		{Prefix: "447", Frontend: "uk-mobile"},
		{Prefix: "4479", Frontend: "uk-special"},
		{Prefix: "1", Frontend: "nanp"},
	}, nil)
	cases := []struct {
		dest, prefix, frontend string
		ok                     bool
	}{
		{"447911123456", "4479", "uk-special", true},
		{"+447811123456", "447", "uk-mobile", true},
		{"441234", "44", "uk", true},
		{"44", "44", "uk", true},
		{"4", "", "", false},
		{"15551234", "1", "nanp", true},
		{"33123", "", "", false},
		{"abc", "", "", false},
		{"", "", "", false},
	}
	for _, c := range cases {
		p, fe, ok := tb.Lookup(c.dest)
		if p != c.prefix || fe != c.frontend || ok != c.ok {
			t.Errorf("Lookup(%q) = %q, %q, %v; want %q, %q, %v", c.dest, p, fe, ok, c.prefix, c.frontend, c.ok)
		}
	}
}

func TestResolve(t *testing.T) {
	tb := NewTable(
		[]messages.Route{{Prefix: "44", Frontend: "uk"}, {Prefix: "33", Frontend: "ghost"}},
		[]messages.Frontend{{Name: "uk", Mode: messages.ModePull}},
	)
	fe, err := tb.Resolve("4412")
	if err != nil || fe.Frontend != "uk" || fe.Local.Name != "uk" || fe.Peer != "" {
		t.Fatalf("Resolve(4412) = %v, %v", fe, err)
	}
	for dest, want := range map[string]string{"3312": "neither this node nor a known peer", "9912": "no route"} {
		_, err := tb.Resolve(dest)
		var e *messages.Error
		if !errors.As(err, &e) || e.Code != messages.CodeNoRoute || !strings.Contains(e.Message, want) {
			t.Errorf("Resolve(%s) = %v; want no_route mentioning %q", dest, err, want)
		}
	}
}

func TestResolveRemote(t *testing.T) {
	tb := NewTable(
		[]messages.Route{{Prefix: "44", Frontend: "uk"}, {Prefix: "33", Frontend: "fr"}, {Prefix: "49", Frontend: "de"}},
		[]messages.Frontend{{Name: "uk", Mode: messages.ModePull}},
	)
	peers := map[string]struct {
		peer    string
		healthy bool
	}{"fr": {"paris", true}, "de": {"berlin", false}, "uk": {"london", true}}
	tb.SetRemote(func(fe string) (string, bool, bool) {
		p, ok := peers[fe]
		return p.peer, p.healthy, ok
	})
	cases := []struct {
		dest    string
		want    Target
		wantErr bool
	}{
		{dest: "4412", want: Target{Frontend: "uk", Local: messages.Frontend{Name: "uk", Mode: messages.ModePull}}},
		{dest: "3312", want: Target{Frontend: "fr", Peer: "paris", Healthy: true}},
		{dest: "4912", want: Target{Frontend: "de", Peer: "berlin"}},
		{dest: "9912", wantErr: true},
	}
	for _, tc := range cases {
		got, err := tb.Resolve(tc.dest)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Resolve(%s) = %+v, %v; want %+v", tc.dest, got, err, tc.want)
		}
	}
	if !tb.Known("fr") || !tb.Known("uk") || tb.Known("xx") {
		t.Fatal("Known")
	}
}

func TestDeleteRouteShrinksLongest(t *testing.T) {
	tb := NewTable([]messages.Route{{Prefix: "4", Frontend: "a"}, {Prefix: "44444", Frontend: "b"}}, nil)
	tb.DeleteRoute("44444")
	if tb.longest != 1 {
		t.Fatalf("longest = %d after deleting the longest route, want 1", tb.longest)
	}
	if _, fe, _ := tb.Lookup("444449"); fe != "a" {
		t.Fatalf("lookup after delete = %q, want a", fe)
	}
	if got := tb.RoutesTo("a"); len(got) != 1 || got[0] != "4" {
		t.Fatalf("RoutesTo(a) = %v", got)
	}
}

// TestLookupMatchesReference checks Lookup against the obvious model: scan
// every route, keep the longest prefix of the destination.
func TestLookupMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		digits := rapid.StringMatching(`[0-9]{1,6}`)
		routes := rapid.MapOf(digits, rapid.SampledFrom([]string{"a", "b", "c"})).Draw(t, "routes")
		var rs []messages.Route
		for p, fe := range routes {
			rs = append(rs, messages.Route{Prefix: p, Frontend: fe})
		}
		tb := NewTable(rs, nil)
		for _, p := range rapid.SliceOfN(digits, 0, 3).Draw(t, "deleted") {
			tb.DeleteRoute(p)
			delete(routes, p)
		}
		dest := rapid.StringMatching(`[0-9]{1,12}`).Draw(t, "dest")
		wantP, wantFE := "", ""
		for p, fe := range routes {
			if strings.HasPrefix(dest, p) && len(p) > len(wantP) {
				wantP, wantFE = p, fe
			}
		}
		p, fe, ok := tb.Lookup(dest)
		if p != wantP || fe != wantFE || ok != (wantP != "") {
			t.Fatalf("Lookup(%q) = %q,%q,%v; reference %q,%q", dest, p, fe, ok, wantP, wantFE)
		}
	})
}
