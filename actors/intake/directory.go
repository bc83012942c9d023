package intake

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The intake owns the directory: routes and local frontends, in the store
// and in its routing table.

// reload reads the directory again: another instance of the site may have
// changed it in the shared store. Frontends that appeared or changed get
// their worker (FrontendUp of an unchanged one only kicks it), those that
// went away lose it.
func (a *Intake) reload(c actor.Context) {
	old := a.table.LocalNames()
	frontends, err := a.readDirectory()
	if err != nil {
		a.log.Warn("reloading the directory failed; keeping the one known", "err", err)
		return
	}
	now := map[string]bool{}
	for _, f := range frontends {
		now[f.Name] = true
		c.Send(a.cfg.Frontends, &messages.FrontendUp{Frontend: f})
	}
	for _, name := range old {
		if !now[name] {
			c.Send(a.cfg.Frontends, &messages.FrontendDown{Name: name})
		}
	}
	a.localChanged()
}

// load reads the directory. A store that cannot be read is a failure the
// supervisor retries (within its budget).
func (a *Intake) load() {
	_, err := a.readDirectory()
	if err != nil {
		panic(fmt.Errorf("intake: %w", err))
	}
	a.localChanged()
}

// readDirectory builds the routing table from the store's routes and
// frontends and returns the frontends.
func (a *Intake) readDirectory() ([]messages.Frontend, error) {
	ctx, cancel := a.storeCtx()
	defer cancel()
	routes, err := a.cfg.Store.Routes(ctx)
	if err != nil {
		return nil, fmt.Errorf("load routes: %w", err)
	}
	frontends, err := a.cfg.Store.Frontends(ctx)
	if err != nil {
		return nil, fmt.Errorf("load frontends: %w", err)
	}
	a.table = NewTable(routes, frontends)
	if a.cfg.Remote != nil {
		a.table.SetRemote(a.cfg.Remote.Owner)
	}
	return frontends, nil
}

// localChanged tells Local the local frontends' names.
func (a *Intake) localChanged() {
	if a.cfg.Local != nil {
		a.cfg.Local.SetLocal(a.table.LocalNames())
	}
}

func (a *Intake) putRoute(c actor.Context, r messages.Route) error {
	if !messages.ValidPrefix(r.Prefix) {
		return messages.Errorf(messages.CodeInvalidRequest, "prefix %q must be 1-20 digits", r.Prefix)
	}
	if !messages.ValidName(r.Frontend) {
		return messages.Errorf(messages.CodeInvalidRequest, "frontend %q is not a valid name", r.Frontend)
	}
	if !a.table.Known(r.Frontend) && a.cfg.Shared {
		a.reload(c) // another instance of the site may have registered it
	}
	if !a.table.Known(r.Frontend) {
		return messages.Errorf(messages.CodeUnknownFrontend, "frontend %q is served neither here nor by a known peer", r.Frontend)
	}
	r.UpdatedAt = a.cfg.Clock.Now()
	// The table may be stale (another instance of a site deleted the
	// frontend): the store checks a local one again as it writes.
	_, r.Local = a.table.Frontend(r.Frontend)
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.cfg.Store.PutRoute(ctx, r); errors.Is(err, persistence.ErrUnknownFrontend) {
		a.reload(c)
		return messages.Errorf(messages.CodeUnknownFrontend, "frontend %q is no longer registered here", r.Frontend)
	} else if err != nil {
		return a.storeFailed("put route", err)
	}
	a.table.PutRoute(r.Prefix, r.Frontend)
	a.log.Info("route set", "prefix", r.Prefix, "frontend", r.Frontend)
	return nil
}

func (a *Intake) deleteRoute(prefix string) error {
	if err := a.remove("delete route", fmt.Sprintf("no route with prefix %q", prefix), func(ctx context.Context) error {
		return a.cfg.Store.DeleteRoute(ctx, prefix)
	}); err != nil {
		return err
	}
	a.table.DeleteRoute(prefix)
	a.log.Info("route deleted", "prefix", prefix)
	return nil
}

// ownConsumer refuses a frontend name whose delivery bus consumer is
// another frontend's (bus.OwnConsumer).
func (a *Intake) ownConsumer(name string) error {
	if err := bus.OwnConsumer(name, a.table.LocalNames()); err != nil {
		return messages.Errorf(messages.CodeInvalidRequest, "%v", err)
	}
	return nil
}

func (a *Intake) putFrontend(c actor.Context, f messages.Frontend) error {
	f, err := f.Normalized()
	if err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if err := a.ownConsumer(f.Name); err != nil {
		return err
	}
	now := a.cfg.Clock.Now()
	f.CreatedAt, f.UpdatedAt = now, now
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.cfg.Store.PutFrontend(ctx, f); err != nil {
		return a.storeFailed("put frontend", err)
	}
	a.table.PutFrontend(f)
	a.localChanged()
	c.Send(a.cfg.Frontends, &messages.FrontendUp{Frontend: f})
	a.log.Info("frontend registered", "frontend", f.Name, "mode", f.Mode, "url", messages.RedactURL(f.URL))
	return nil
}

func (a *Intake) deleteFrontend(c actor.Context, name string) error {
	if prefixes := a.table.RoutesTo(name); len(prefixes) > 0 {
		return messages.Errorf(messages.CodeFrontendInUse,
			"frontend %q is still named by routes %v; delete or change them first", name, prefixes)
	}
	// The table may be stale (another instance of a site made a route to
	// it): the store checks again as it deletes.
	err := a.remove("delete frontend", fmt.Sprintf("no frontend named %q", name), func(ctx context.Context) error {
		return a.cfg.Store.DeleteFrontend(ctx, name)
	})
	if errors.Is(err, persistence.ErrFrontendInUse) {
		a.reload(c)
		return messages.Errorf(messages.CodeFrontendInUse,
			"frontend %q is still named by routes %v; delete or change them first", name, a.table.RoutesTo(name))
	}
	if err != nil {
		return err
	}
	a.table.DeleteFrontend(name)
	a.localChanged()
	c.Send(a.cfg.Frontends, &messages.FrontendDown{Name: name})
	a.log.Info("frontend deleted", "frontend", name)
	return nil
}

// remove runs a store delete of the directory: a row that is not there is
// the API's not_found with notFound, any other failure unavailable.
func (a *Intake) remove(op, notFound string, del func(context.Context) error) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	err := del(ctx)
	if errors.Is(err, persistence.ErrNotFound) {
		return messages.Errorf(messages.CodeNotFound, "%s", notFound)
	}
	if errors.Is(err, persistence.ErrFrontendInUse) {
		return err
	}
	if err != nil {
		return a.storeFailed(op, err)
	}
	return nil
}
