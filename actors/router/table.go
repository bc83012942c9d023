package router

import (
	"sort"

	"github.com/switchboard-dev/switchboard/messages"
)

// Table is the routing directory: destination prefixes to frontend names,
// and the frontends this node serves. It is not safe for concurrent use; the
// intake actor owns it.
type Table struct {
	routes    map[string]string // prefix -> frontend
	frontends map[string]messages.Frontend
	longest   int // longest prefix, bounds a lookup
}

// NewTable builds a table.
func NewTable(routes []messages.Route, frontends []messages.Frontend) *Table {
	t := &Table{routes: map[string]string{}, frontends: map[string]messages.Frontend{}}
	for _, r := range routes {
		t.PutRoute(r.Prefix, r.Frontend)
	}
	for _, f := range frontends {
		t.PutFrontend(f)
	}
	return t
}

// Lookup returns the longest route prefix of dest and its frontend.
func (t *Table) Lookup(dest string) (prefix, frontend string, ok bool) {
	digits, valid := messages.RoutingDigits(dest)
	if !valid {
		return "", "", false
	}
	n := min(len(digits), t.longest)
	for ; n > 0; n-- {
		if fe, found := t.routes[digits[:n]]; found {
			return digits[:n], fe, true
		}
	}
	return "", "", false
}

// Resolve returns the frontend that serves dest, or a no_route *Error when
// no route matches or the route names a frontend nobody serves.
func (t *Table) Resolve(dest string) (messages.Frontend, error) {
	prefix, name, ok := t.Lookup(dest)
	if !ok {
		return messages.Frontend{}, messages.Errorf(messages.CodeNoRoute, "no route for destination %s", dest)
	}
	fe, ok := t.frontends[name]
	if !ok {
		return messages.Frontend{}, messages.Errorf(messages.CodeNoRoute,
			"route %s names frontend %q, which is not registered", prefix, name)
	}
	return fe, nil
}

// PutRoute adds or replaces a route.
func (t *Table) PutRoute(prefix, frontend string) {
	t.routes[prefix] = frontend
	t.longest = max(t.longest, len(prefix))
}

// DeleteRoute removes a route.
func (t *Table) DeleteRoute(prefix string) {
	delete(t.routes, prefix)
	if len(prefix) == t.longest {
		t.longest = 0
		for p := range t.routes {
			t.longest = max(t.longest, len(p))
		}
	}
}

// PutFrontend adds or replaces a local frontend.
func (t *Table) PutFrontend(f messages.Frontend) { t.frontends[f.Name] = f }

// DeleteFrontend removes a local frontend.
func (t *Table) DeleteFrontend(name string) { delete(t.frontends, name) }

// Frontend returns a local frontend by name.
func (t *Table) Frontend(name string) (messages.Frontend, bool) {
	f, ok := t.frontends[name]
	return f, ok
}

// RoutesTo returns, sorted, the prefixes whose route names frontend.
func (t *Table) RoutesTo(frontend string) []string {
	var out []string
	for p, fe := range t.routes {
		if fe == frontend {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
