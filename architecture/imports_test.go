package architecture

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/switchboard-dev/switchboard"

// A rule forbids packages matching From to import packages matching To,
// except those matching Allow; importers matching Except are not bound by
// it. Patterns are module-relative: "" is the root package, "x/..." is x
// and everything under it, anything else one package.
type rule struct {
	From, To []string
	Allow    []string
	Except   []string
	Why      string
}

// rules are the import rules of docs/architecture.md. Only production
// imports count: a test may import what it needs to set things up.
var rules = []rule{
	{From: []string{"messages"}, To: []string{"..."}, Allow: []string{"gsm7"},
		Why: "messages are plain data: they import no package of ours but the GSM alphabet"},
	{From: []string{"gsm7", "smpp"}, To: []string{"..."}, Allow: []string{"gsm7", "messages", "clock"},
		Why: "the codecs (and SMPP's session) know messages and the clock, nothing that runs the node"},
	{From: []string{"clock"}, To: []string{"..."},
		Why: "the clock is below everything"},
	{From: []string{"field"}, To: []string{"..."},
		Why: "a configuration's field errors are below everything that has a configuration"},
	{From: []string{"persistence/..."}, To: []string{"..."}, Allow: []string{"messages", "gsm7", "persistence/..."},
		Except: []string{"persistence/lock"},
		Why:    "the stores know messages and nothing that runs them (no actors, gateway, telemetry or node)"},
	{From: []string{"persistence/lock"}, To: []string{"..."}, Allow: []string{"persistence", "clock"},
		Why: "the lock keeper knows the store's Elector and the clock it waits on, nothing that runs it"},
	{From: []string{"actors/...", "smsc"}, To: []string{"", "httpapi/...", "cmd/...", "sim/...", "examples/..."},
		Allow: []string{"httpapi/auth", "httpapi/certs"},
		Why:   "actors (and the SMPP listener) know the store and messages; the gateway calls them, not the other way round (httpapi/auth, the credentials' check, and httpapi/certs, the TLS material, are shared)"},
	{From: []string{"httpapi/..."}, To: []string{"", "actors/...", "cmd/...", "sim/...", "persistence/sqlite", "persistence/postgres"},
		Why: "the gateway talks to the node through its Backend, and to other nodes through the transport package's seams"},
	{From: []string{"transport"}, To: []string{"..."}, Allow: []string{"messages"},
		Why: "what crosses between nodes is plain: the calls' interfaces, their error, messages"},
	{From: []string{"supervision/..."}, To: []string{"..."}, Allow: []string{"supervision/..."},
		Why: "supervision is below everything"},
	{From: []string{"telemetry/..."}, To: []string{"..."}, Allow: []string{"supervision/...", "telemetry/...", "field"},
		Why: "telemetry is below the node: it knows no message, store or actor"},
	{From: []string{"...", ""}, To: []string{"sim/..."}, Allow: []string{},
		Why: "production code never imports the sim (only cmd/sim does, and the sim's own packages)"},
	{From: []string{"...", ""}, To: []string{"cmd/..."},
		Why: "nothing imports a command"},
	{From: []string{"...", ""}, To: []string{"nodetest", "polltest"}, Except: []string{"nodetest"},
		Why: "the started-node and polling helpers are for tests: only _test files import them (and the node helper the polling one)"},
}

// exempt are importers a rule never applies to: the sim and its command
// run the node (they may reach into anything), and a command's own packages.
var exempt = []string{"sim/...", "cmd/sim"}

// match reports whether the module-relative package p matches pattern.
func match(pattern, p string) bool {
	switch {
	case pattern == "...":
		return p != "" // every package of the module but the root
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// violations are the imports (from -> to, module-relative) that break a rule.
func violations(rs []rule, imports map[string][]string) []string {
	var out []string
	for from, tos := range imports {
		if matchAny(exempt, from) {
			continue
		}
		for _, to := range tos {
			if to == from {
				continue
			}
			for _, r := range rs {
				if matchAny(r.From, from) && !matchAny(r.Except, from) && matchAny(r.To, to) && !matchAny(r.Allow, to) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", show(from), show(to), r.Why))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func show(p string) string {
	if p == "" {
		return "switchboard (the root package)"
	}
	return p
}

// moduleImports lists each package of the module with the module's
// packages it imports (production code: not its tests).
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		from, _ := rel(f[0])
		imports[from] = []string{}
		for _, imp := range f[1:] {
			if to, ok := rel(imp); ok {
				imports[from] = append(imports[from], to)
			}
		}
	}
	return imports
}

// TestImportRules fails on every import of the module that a rule forbids.
func TestImportRules(t *testing.T) {
	imports := moduleImports(t)
	for _, v := range violations(rules, imports) {
		t.Error(v)
	}
	// A rule whose packages were renamed away would hold for nothing: every
	// pattern a rule names must match a package of the module.
	for _, r := range rules {
		for _, pat := range slices.Concat(r.From, r.To, r.Allow, r.Except) {
			found := false
			for p := range imports {
				if match(pat, p) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("rule %q names %q, which matches no package of the module", r.Why, pat)
			}
		}
	}
}

// TestViolationsFound: the checker reports a forbidden import, keeps an
// allowed one, and leaves the exempt sim (and a rule's excepted importer)
// alone.
func TestViolationsFound(t *testing.T) {
	imports := map[string][]string{
		"persistence/sqlite": {"messages", "persistence", "actors/ring"},
		"httpapi":            {"transport", "actors/delivery", "messages", "nodetest"},
		"nodetest":           {"apiclient", "polltest"},
		"apiclient":          {"httpapi", "messages"},
		"messages":           {"gsm7"},
		"actors/forward":     {"httpapi"},
		"":                   {"sim"},
		"sim":                {"", "actors/ring", "persistence/sqlite"},
		"cmd/node":           {"", "httpapi"},
	}
	got := violations(rules, imports)
	want := []string{
		"actors/forward imports httpapi",
		"httpapi imports actors/delivery",
		"httpapi imports nodetest",
		"persistence/sqlite imports actors/ring",
		"switchboard (the root package) imports sim",
	}
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant %d starting with:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+":") {
			t.Errorf("violation %d: %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
