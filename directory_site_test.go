package switchboard_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
)

// On a shared site the directory an instance holds may be stale: another
// instance changed the store (and may have died before it told the
// master, ring.md). The store checks the directory's rules as it writes:
// a frontend a route names is not deleted, a route to a local frontend
// that is gone is not made.

// siteDirectory starts one instance of a site with frontend fe and no
// route, and opens the store as another instance would write it.
func siteDirectory(t *testing.T) (*harness, *postgres.Store) {
	dsn := pgtest.DSN(t)
	cfg := siteConfig(t, dsn, "c1")
	cfg.RingPublishInterval = time.Minute // no periodic refresh in this test
	h := startNode(t, cfg)
	waitRing(t, []*harness{h}, "c1")
	h.pullFrontend("fe", "44")
	h.must(204, "DELETE", "/api/routes/44", nil, nil)
	st, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Logger: slog.New(slog.DiscardHandler), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return h, st
}

func TestSiteDeleteFrontendARouteNamesIsRefused(t *testing.T) {
	h, st := siteDirectory(t)
	if err := st.PutRoute(context.Background(), messages.Route{Prefix: "46", Frontend: "fe", UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.apiError(409, messages.CodeFrontendInUse, "DELETE", "/api/frontends/fe", nil)
	var fes struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &fes)
	if len(fes.Frontends) != 1 || fes.Frontends[0].Name != "fe" {
		t.Fatalf("frontends %+v after the refused delete, want fe", fes.Frontends)
	}
	// The refusal taught the instance the route: it routes by it now.
	if m := h.message(h.submit("to46", "461234")); m.Frontend != "fe" {
		t.Fatalf("to46 went to %q, want fe", m.Frontend)
	}
}

func TestSiteRouteToAFrontendDeletedElsewhereIsRefused(t *testing.T) {
	h, st := siteDirectory(t)
	if err := st.DeleteFrontend(context.Background(), "fe"); err != nil {
		t.Fatal(err)
	}
	h.apiError(422, messages.CodeUnknownFrontend, "PUT", "/api/routes/47", map[string]string{"frontend": "fe"})
	var routes struct{ Routes []messages.Route }
	h.must(200, "GET", "/api/routes", nil, &routes)
	if len(routes.Routes) != 0 {
		t.Fatalf("routes %+v after the refused put, want none", routes.Routes)
	}
}
