package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

func routeCases() []testCase {
	return []testCase{
		{"PutListReplaceDelete", routesPutListReplaceDelete},
		{"DeleteMissingIsErrNotFound", routesDeleteMissing},
	}
}

func (f *fixture) routes() []persistence.Route {
	f.Helper()
	rs, err := f.store.Routes(f.ctx)
	if err != nil {
		f.Fatalf("Routes: %v", err)
	}
	return rs
}

func (f *fixture) wantRoutes(want ...persistence.Route) {
	f.Helper()
	got := f.routes()
	if len(got) != len(want) {
		f.Fatalf("Routes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Prefix != want[i].Prefix || got[i].Frontend != want[i].Frontend {
			f.Errorf("Routes[%d] = %+v, want %+v", i, got[i], want[i])
		}
		f.wantTime("Route "+want[i].Prefix+" UpdatedAt", got[i].UpdatedAt, want[i].UpdatedAt)
	}
}

func routesPutListReplaceDelete(f *fixture) {
	if rs := f.routes(); len(rs) != 0 {
		f.Errorf("Routes on an empty store = %+v", rs)
	}
	// Prefixes put out of order; the list is ordered by prefix.
	for _, r := range []persistence.Route{
		{Prefix: "447", Frontend: feB, UpdatedAt: at(2e9)},
		{Prefix: "1", Frontend: feA, UpdatedAt: base},
		{Prefix: "44", Frontend: feA, UpdatedAt: at(1e9)},
	} {
		if err := f.store.PutRoute(f.ctx, r); err != nil {
			f.Fatalf("PutRoute(%+v): %v", r, err)
		}
	}
	f.wantRoutes(
		persistence.Route{Prefix: "1", Frontend: feA, UpdatedAt: base},
		persistence.Route{Prefix: "44", Frontend: feA, UpdatedAt: at(1e9)},
		persistence.Route{Prefix: "447", Frontend: feB, UpdatedAt: at(2e9)},
	)
	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "44", Frontend: feB, UpdatedAt: at(time.Hour)}); err != nil {
		f.Fatalf("PutRoute(replace): %v", err)
	}
	f.wantRoutes(
		persistence.Route{Prefix: "1", Frontend: feA, UpdatedAt: base},
		persistence.Route{Prefix: "44", Frontend: feB, UpdatedAt: at(time.Hour)},
		persistence.Route{Prefix: "447", Frontend: feB, UpdatedAt: at(2e9)},
	)
	if err := f.store.DeleteRoute(f.ctx, "44"); err != nil {
		f.Fatalf("DeleteRoute: %v", err)
	}
	f.wantRoutes(
		persistence.Route{Prefix: "1", Frontend: feA, UpdatedAt: base},
		persistence.Route{Prefix: "447", Frontend: feB, UpdatedAt: at(2e9)},
	)
}

func routesDeleteMissing(f *fixture) {
	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "44", Frontend: feA, UpdatedAt: base}); err != nil {
		f.Fatalf("PutRoute: %v", err)
	}
	if err := f.store.DeleteRoute(f.ctx, "33"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("DeleteRoute(missing): err %v, want ErrNotFound", err)
	}
	if err := f.store.DeleteRoute(f.ctx, "44"); err != nil {
		f.Fatalf("DeleteRoute: %v", err)
	}
	if err := f.store.DeleteRoute(f.ctx, "44"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("DeleteRoute(deleted): err %v, want ErrNotFound", err)
	}
}

func frontendCases() []testCase {
	return []testCase{
		{"PutListReplaceDelete", frontendsPutListReplaceDelete},
		{"CreatedAtKeptOnReplace", frontendsCreatedAtKept},
		{"DeleteMissingIsErrNotFound", frontendsDeleteMissing},
		{"DeleteNamedByARouteIsErrFrontendInUse", frontendsDeleteInUse},
		{"LocalRouteNeedsTheFrontend", frontendsLocalRouteNeedsIt},
		{"DeleteRacesLocalRoutes", frontendsDeleteRacesRoutes},
	}
}

// frontendsDeleteInUse: a frontend that a route names (a local route or
// not: the store knows no peers) is not deleted until no route does.
func frontendsDeleteInUse(f *fixture) {
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	for _, r := range []persistence.Route{{Prefix: "44", Frontend: "fe", UpdatedAt: base}, {Prefix: "46", Frontend: "fe", UpdatedAt: base, Local: true}} {
		if err := f.store.PutRoute(f.ctx, r); err != nil {
			f.Fatalf("PutRoute(%+v): %v", r, err)
		}
	}
	for _, prefix := range []string{"44", "46"} {
		if err := f.store.DeleteFrontend(f.ctx, "fe"); !errors.Is(err, persistence.ErrFrontendInUse) {
			f.Fatalf("DeleteFrontend while route %s names it: err %v, want ErrFrontendInUse", prefix, err)
		}
		f.wantFrontends(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
		if err := f.store.DeleteRoute(f.ctx, prefix); err != nil {
			f.Fatalf("DeleteRoute(%s): %v", prefix, err)
		}
	}
	if err := f.store.DeleteFrontend(f.ctx, "fe"); err != nil {
		f.Fatalf("DeleteFrontend once no route names it: %v", err)
	}
	f.wantFrontends()
}

// frontendsLocalRouteNeedsIt: a route to a local frontend is taken only
// while the frontend is stored; a route to a peer's is not checked.
func frontendsLocalRouteNeedsIt(f *fixture) {
	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "44", Frontend: "gone", UpdatedAt: base, Local: true}); !errors.Is(err, persistence.ErrUnknownFrontend) {
		f.Errorf("PutRoute to a local frontend not stored: err %v, want ErrUnknownFrontend", err)
	}
	f.wantRoutes()
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "44", Frontend: "fe", UpdatedAt: base, Local: true}); err != nil {
		f.Fatalf("PutRoute to a stored local frontend: %v", err)
	}
	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "46", Frontend: "peers-fe", UpdatedAt: base}); err != nil {
		f.Fatalf("PutRoute to a peer's frontend: %v", err)
	}
	f.wantRoutes(persistence.Route{Prefix: "44", Frontend: "fe", UpdatedAt: base}, persistence.Route{Prefix: "46", Frontend: "peers-fe", UpdatedAt: base})
}

// frontendsDeleteRacesRoutes: instances of a site delete a frontend while
// others route to it: whatever the interleaving, no route is left naming a
// local frontend that is gone.
func frontendsDeleteRacesRoutes(f *fixture) {
	const rounds = 20
	fe := persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base}
	for i := range rounds {
		f.putFrontend(fe)
		prefix := fmt.Sprintf("4%d", i)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: prefix, Frontend: "fe", UpdatedAt: base, Local: true})
			if err != nil && !errors.Is(err, persistence.ErrUnknownFrontend) {
				f.Errorf("round %d: PutRoute: %v", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			err := f.store.DeleteFrontend(f.ctx, "fe")
			if err != nil && !errors.Is(err, persistence.ErrFrontendInUse) {
				f.Errorf("round %d: DeleteFrontend: %v", i, err)
			}
		}()
		wg.Wait()
		routed := false
		for _, r := range f.routes() {
			routed = routed || r.Prefix == prefix
		}
		if stored := len(f.frontends()) == 1; routed && !stored {
			f.Fatalf("round %d: route %s names frontend fe, which is gone", i, prefix)
		}
		if routed {
			if err := f.store.DeleteRoute(f.ctx, prefix); err != nil {
				f.Fatalf("DeleteRoute: %v", err)
			}
		}
	}
}

func (f *fixture) frontends() []persistence.Frontend {
	f.Helper()
	fs, err := f.store.Frontends(f.ctx)
	if err != nil {
		f.Fatalf("Frontends: %v", err)
	}
	return fs
}

func (f *fixture) wantFrontends(want ...persistence.Frontend) {
	f.Helper()
	got := f.frontends()
	if len(got) != len(want) {
		f.Fatalf("Frontends = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Mode != want[i].Mode || got[i].URL != want[i].URL {
			f.Errorf("Frontends[%d] = %+v, want %+v", i, got[i], want[i])
		}
		f.wantTime("Frontend "+want[i].Name+" CreatedAt", got[i].CreatedAt, want[i].CreatedAt)
		f.wantTime("Frontend "+want[i].Name+" UpdatedAt", got[i].UpdatedAt, want[i].UpdatedAt)
	}
}

func (f *fixture) putFrontend(fe persistence.Frontend) {
	f.Helper()
	if err := f.store.PutFrontend(f.ctx, fe); err != nil {
		f.Fatalf("PutFrontend(%+v): %v", fe, err)
	}
}

func frontendsPutListReplaceDelete(f *fixture) {
	if fs := f.frontends(); len(fs) != 0 {
		f.Errorf("Frontends on an empty store = %+v", fs)
	}
	hook := persistence.Frontend{Name: "webhook-b", Mode: persistence.ModeWebhook, URL: "https://example.test/hook", CreatedAt: base, UpdatedAt: base}
	pull := persistence.Frontend{Name: "pull-a", Mode: persistence.ModePull, CreatedAt: at(1e9), UpdatedAt: at(1e9)}
	actor := persistence.Frontend{Name: "inproc-c", Mode: persistence.ModeActor, CreatedAt: at(2e9), UpdatedAt: at(2e9)}
	f.putFrontend(hook)
	f.putFrontend(pull)
	f.putFrontend(actor)
	f.wantFrontends(actor, pull, hook)

	hook2 := hook
	hook2.URL, hook2.UpdatedAt = "https://example.test/v2", at(time.Hour)
	f.putFrontend(hook2)
	f.wantFrontends(actor, pull, hook2)

	if err := f.store.DeleteFrontend(f.ctx, "pull-a"); err != nil {
		f.Fatalf("DeleteFrontend: %v", err)
	}
	f.wantFrontends(actor, hook2)
}

func frontendsCreatedAtKept(f *fixture) {
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModeWebhook, URL: "https://one.test", CreatedAt: base, UpdatedAt: base})
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	f.wantFrontends(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: at(time.Hour)})
}

func frontendsDeleteMissing(f *fixture) {
	if err := f.store.DeleteFrontend(f.ctx, "nope"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("DeleteFrontend(missing): err %v, want ErrNotFound", err)
	}
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	if err := f.store.DeleteFrontend(f.ctx, "fe"); err != nil {
		f.Fatalf("DeleteFrontend: %v", err)
	}
	if err := f.store.DeleteFrontend(f.ctx, "fe"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("DeleteFrontend(deleted): err %v, want ErrNotFound", err)
	}
}
