package storetest

import (
	"errors"
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
