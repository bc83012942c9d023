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

// An instance whose directory is stale routes a submit to a frontend that
// another instance moved the route from and deleted (and died before it
// told the master, so no touch came): the store refuses to create the
// message for a frontend it no longer has, and the instance reads the
// directory again and stores the message for the route's frontend now.
func TestSiteSubmitToAFrontendDeletedElsewhereGoesByTheRoute(t *testing.T) {
	h, st := siteDirectory(t)
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "fe"}, nil)
	ctx, now := context.Background(), time.Now()
	if err := st.PutFrontend(ctx, messages.Frontend{Name: "nu", Mode: messages.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRoute(ctx, messages.Route{Prefix: "44", Frontend: "nu", UpdatedAt: now, Local: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteFrontend(ctx, "fe"); err != nil {
		t.Fatal(err)
	}
	id := h.submit("s1", "441234")
	if m := h.message(id); m.Frontend != "nu" {
		t.Errorf("%s was stored for frontend %q, which the store no longer has (the route names nu)", id, m.Frontend)
	}
	if got := h.poll("nu", 10, 500, 10_000); len(got) != 1 || got[0].ID != id {
		t.Errorf("a poll of nu got %+v, want %s", got, id)
	}
	// A retry of the stored id is the stored message (200).
	var again messages.Message
	h.must(200, "POST", "/api/messages", map[string]string{
		"id": id, "source_msisdn": "15550001", "destination_msisdn": "441234", "message_body": "hello " + id}, &again)
	if again.ID != id || again.Frontend != "nu" {
		t.Errorf("a retry of %s answered %s for %q", id, again.ID, again.Frontend)
	}
}

// As above, but the other instance deleted the route too: the directory
// read again has none, and the submit is answered no_route.
func TestSiteSubmitToAFrontendDeletedElsewhereWithItsRouteIsNoRoute(t *testing.T) {
	h, st := siteDirectory(t)
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "fe"}, nil)
	ctx := context.Background()
	if err := st.DeleteRoute(ctx, "44"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteFrontend(ctx, "fe"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "with-id"} {
		sub := map[string]string{"source_msisdn": "15550001", "destination_msisdn": "441234", "message_body": "x"}
		if id != "" { // else left out: the node would make one
			sub["id"] = id
		}
		h.apiError(422, messages.CodeNoRoute, "POST", "/api/messages", sub)
	}
	var page struct{ Messages []messages.Message }
	h.must(200, "GET", "/api/messages", nil, &page)
	if len(page.Messages) != 0 {
		t.Errorf("stored %+v for a frontend and route deleted elsewhere, want nothing", page.Messages)
	}
}
