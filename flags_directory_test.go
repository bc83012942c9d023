package switchboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// TestDirectoryFlagsOverwriteLoudly: --route and --frontend are applied at
// every start and win over what the API changed since, but never in
// silence: each overwrite is logged at warn with both values; an entry the
// flags do not name is left alone.
func TestDirectoryFlagsOverwriteLoudly(t *testing.T) {
	cfg := testConfig(t)
	cfg.Webhooks = []switchboard.WebhookSpec{{Name: "hook", URL: "https://flag.example/in"}}
	cfg.Routes = []switchboard.RouteSpec{{Prefix: "44", Frontend: "hook"}, {Prefix: "33", Frontend: "hook"}}
	h := startNode(t, cfg)
	var routes struct{ Routes []messages.Route }
	h.must(200, "GET", "/api/routes", nil, &routes)
	if len(routes.Routes) != 2 {
		t.Fatalf("routes after the first start: %+v", routes.Routes)
	}
	// The operator changes the directory through the API.
	h.pullFrontend("pullfe")
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "pullfe"}, nil)
	h.must(200, "PUT", "/api/routes/55", map[string]string{"frontend": "pullfe"}, nil)
	h.must(200, "PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": "https://api.example/in"}, nil)
	h.stop()

	log, buf := logtest.New()
	cfg.Logger = log
	cfg.Routes = append(cfg.Routes, switchboard.RouteSpec{Prefix: "1", Frontend: "hook"}) // a new one is created
	h = startNode(t, cfg)
	h.must(200, "GET", "/api/routes", nil, &routes)
	got := map[string]string{}
	for _, r := range routes.Routes {
		got[r.Prefix] = r.Frontend
	}
	if got["44"] != "hook" || got["33"] != "hook" || got["1"] != "hook" || got["55"] != "pullfe" || len(got) != 4 {
		t.Fatalf("routes after the restart: %v; want the flags' 44, 33 and 1, and the API's 55 kept", got)
	}
	var fes struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &fes)
	for _, f := range fes.Frontends {
		if f.Name == "hook" && f.URL != "https://flag.example/in" {
			t.Fatalf("frontend hook not set by its flag: %+v", f)
		}
	}
	rl := buf.Records(t, "--route overwrites the stored route (the flags win; a change made through the API is lost)")
	if len(rl) != 1 || rl[0]["prefix"] != "44" || rl[0]["flag_frontend"] != "hook" || rl[0]["stored_frontend"] != "pullfe" || rl[0]["level"] != "WARN" {
		t.Fatalf("route log lines %v, want one about 44", rl)
	}
	fl := buf.Records(t, "--frontend overwrites the stored frontend (the flags win; a change made through the API is lost)")
	if len(fl) != 1 || fl[0]["name"] != "hook" || fl[0]["stored_url"] != "https://api.example/in" || fl[0]["flag_url"] != "https://flag.example/in" {
		t.Fatalf("frontend log lines %v, want one about hook", fl)
	}
	if created := buf.Records(t, "route created from --route"); len(created) != 1 || created[0]["prefix"] != "1" {
		t.Fatalf("created log lines %v, want one about 1", created)
	}

	// Each change the flags made is in the audit trail as the API's are,
	// by "flags": the first start's three, the second's three (44 and
	// hook taken back from the API, 1 created), and none of a start that
	// changes nothing.
	h.stop()
	h = startNode(t, cfg)
	var trail struct{ Entries []messages.AuditEntry }
	h.must(200, "GET", "/api/audit?actor=flags", nil, &trail)
	var audited []string
	for _, e := range trail.Entries {
		audited = append(audited, e.Remote+" "+e.Action+" "+e.Target+" "+e.Detail)
	}
	hook := `frontend.put hook mode webhook, url "https://flag.example/in", signed false`
	want := []string{
		"--route route.put 1 frontend hook", "--route route.put 44 frontend hook", "--frontend " + hook,
		"--route route.put 33 frontend hook", "--route route.put 44 frontend hook", "--frontend " + hook,
	}
	if strings.Join(audited, "\n") != strings.Join(want, "\n") {
		t.Errorf("the flags' changes in the audit trail, newest first:\n%s\nwant\n%s", strings.Join(audited, "\n"), strings.Join(want, "\n"))
	}
}

// TestFrontendFlagOfAStoredFrontendsBusConsumerIsRefused: a --frontend
// whose delivery bus consumer is that of a frontend registered through
// the API ("a.b" and "a_b_108bf50c") was written to the store unchecked,
// where PUT /api/frontends refuses it: with the bus, each frontend's
// worker fetched the other's work. The start fails naming the flag and
// both names, and the store keeps only a.b.
func TestFrontendFlagOfAStoredFrontendsBusConsumerIsRefused(t *testing.T) {
	cfg := testConfig(t)
	h := startNode(t, cfg)
	h.pullFrontend("a.b")
	h.stop()

	cfg.Webhooks = []switchboard.WebhookSpec{{Name: "a_b_108bf50c", URL: "https://flag.example/in"}}
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err == nil {
		_ = n.Stop(context.Background())
		t.Fatal("started with --frontend a_b_108bf50c beside the stored a.b, which share one bus consumer")
	} else if msg := err.Error(); !strings.HasPrefix(msg, "Webhooks: ") || !strings.Contains(msg, `"a_b_108bf50c"`) || !strings.Contains(msg, `"a.b"`) {
		t.Fatalf("Start: %v; want a Webhooks error naming a_b_108bf50c and a.b", err)
	}
	cfg.Webhooks = nil
	h = startNode(t, cfg)
	var fes struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &fes)
	if len(fes.Frontends) != 1 || fes.Frontends[0].Name != "a.b" {
		t.Fatalf("frontends after the refused start: %+v, want a.b alone", fes.Frontends)
	}
}
