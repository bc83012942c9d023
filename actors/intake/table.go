package intake

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
	// remote finds the peer serving a frontend this node does not serve.
	remote func(frontend string) (peer string, healthy, ok bool)
}

// Target is where a destination's messages go: a local frontend, or a
// peer that serves the frontend (Peer set).
type Target struct {
	Frontend string
	// Local is the local frontend's registration (zero when Peer is set).
	Local messages.Frontend
	// Peer serves the frontend; Healthy says whether it gets forwards now
	// (when not, the message waits in forward_queued).
	Peer    string
	Healthy bool
}

// SetRemote sets how frontends served by peers are found (the node's peer
// book). A local frontend of the same name wins: a message is never sent
// away from a frontend this node serves.
func (t *Table) SetRemote(remote func(frontend string) (peer string, healthy, ok bool)) {
	t.remote = remote
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

// Resolve returns where dest's messages go, or a no_route *Error when no
// route matches or the route names a frontend nobody serves (neither this
// node nor a peer).
func (t *Table) Resolve(dest string) (Target, error) {
	prefix, name, ok := t.Lookup(dest)
	if !ok {
		return Target{}, messages.Errorf(messages.CodeNoRoute, "no route for destination %s", dest)
	}
	return t.target(prefix, name)
}

func (t *Table) target(prefix, name string) (Target, error) {
	if fe, ok := t.frontends[name]; ok {
		return Target{Frontend: name, Local: fe}, nil
	}
	if t.remote != nil {
		if peer, healthy, ok := t.remote(name); ok {
			return Target{Frontend: name, Peer: peer, Healthy: healthy}, nil
		}
	}
	return Target{}, messages.Errorf(messages.CodeNoRoute,
		"route %s names frontend %q, which neither this node nor a known peer serves", prefix, name)
}

// Known reports whether frontend is served here or by a known peer.
func (t *Table) Known(frontend string) bool {
	_, err := t.target("", frontend)
	return err == nil
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

// LocalNames returns the local frontends' names, sorted.
func (t *Table) LocalNames() []string {
	names := make([]string, 0, len(t.frontends))
	for name := range t.frontends {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
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
