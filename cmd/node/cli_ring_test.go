package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestCLIRingShowsWhoIsSubscribed: on a master, the ring status lists the
// members whose subscription call is open (ring.md: one missing from it
// for more than a moment lost its connection to the master). `switchboard
// ring` left that out: during a dead slave's grace the master's table
// showed it like the live ones, with coverage 100%. It has a SUBSCRIBED
// column: yes or no for the master's members, - for the master itself and
// on a slave, which does not know.
func TestCLIRingShowsWhoIsSubscribed(t *testing.T) {
	member := func(id string) messages.RingMember {
		return messages.RingMember{InstanceID: id, Address: id + ":8443", Services: []string{"delivery", "forward"},
			Ranges: []messages.TokenRange{{Lo: 0, Hi: 1 << 60}}}
	}
	for _, c := range []struct {
		role string
		want map[string]string // member -> SUBSCRIBED
	}{
		{messages.RoleMaster, map[string]string{"i1": "-", "i2": "yes", "i3": "no"}},
		{messages.RoleSlave, map[string]string{"i1": "-", "i2": "-", "i3": "-"}},
	} {
		st := messages.RingStatus{InstanceID: "i1", Role: c.role, Master: "i1", Epoch: 4, Coverage: 1,
			Members: []messages.RingMember{member("i1"), member("i2"), member("i3")}}
		if c.role == messages.RoleMaster {
			st.Subscribed = []string{"i2"}
		}
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/ring/status" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(st)
		}))
		var out, errOut bytes.Buffer
		code := mainCode([]string{"ring", "--addr", srv.URL, "--insecure", "--token", cliTestToken}, &out, &errOut, envMap(nil))
		srv.Close()
		if code != 0 {
			t.Fatalf("ring on a %s: exit %d: %s", c.role, code, errOut.String())
		}
		rows := cliTableRows(out.String())
		header := cliRow(t, rows, "MEMBER")
		col := -1
		for i, h := range header {
			if h == "SUBSCRIBED" {
				col = i
			}
		}
		if col < 0 {
			t.Fatalf("ring on a %s: no SUBSCRIBED column in\n%s", c.role, out.String())
		}
		for id, want := range c.want {
			if r := cliRow(t, rows, id); len(r) != len(header) || r[col] != want {
				t.Errorf("ring on a %s: %s's row %q, want SUBSCRIBED %s in\n%s", c.role, id, r, want, strings.TrimSpace(out.String()))
			}
		}
	}
}
