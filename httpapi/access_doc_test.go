package httpapi

import (
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/messages"
)

// apiDocSection is the text of the section of docs/api.md titled title
// (a "## " heading), up to the next one.
func apiDocSection(t *testing.T, title string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/api.md has no section %s", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// A row of docs/api.md's table of calls and their roles:
// | `METHOD /api/path` | `role`, `role` (a note) |.
var (
	docCallRow  = regexp.MustCompile("(?m)^\\| `([A-Z]+) (/[^`]*)` \\| (.*) \\|$")
	docRoleName = regexp.MustCompile("`([^`]*)`")
)

// TestEveryRouteRequiresTheRolesTheDocsName: every /api/* route the
// router serves (but the federation calls and a ring member's, which are
// authenticated otherwise, as docs/api.md's conventions say) has its row
// in docs/api.md's table of calls and roles, and the gateway lets in
// exactly the roles the row names; every row is a route served. A route
// added without its row, or with other roles than its row, fails.
func TestEveryRouteRequiresTheRolesTheDocsName(t *testing.T) {
	documented := map[string][]messages.Role{}
	for _, m := range docCallRow.FindAllStringSubmatch(apiDocSection(t, "Credentials and roles"), -1) {
		call := m[1] + " " + m[2]
		if _, twice := documented[call]; twice {
			t.Errorf("docs/api.md lists %s twice", call)
		}
		var roles []messages.Role
		for _, r := range docRoleName.FindAllStringSubmatch(m[3], -1) {
			role := messages.Role(r[1])
			if !role.Valid() {
				t.Errorf("docs/api.md: %s names %q, which is no role", call, r[1])
			}
			roles = append(roles, role)
		}
		if len(roles) == 0 {
			t.Errorf("docs/api.md: %s names no role", call)
		}
		documented[call] = roles
	}
	s, err := New(Config{Backend: stubBackend{}, Ring: stubRing{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	guarded := s.RouteRoles()
	served := map[string]bool{}
	err = s.Router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return err
		}
		if !strings.HasPrefix(tpl, "/api/") || strings.HasPrefix(tpl, "/api/federation/") || ringMemberPath(tpl) {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			return err
		}
		for _, method := range methods {
			call := method + " " + tpl
			served[call] = true
			want, listed := documented[call]
			got := guarded[call]
			if !listed {
				t.Errorf("%s: the gateway lets in %v; docs/api.md has no row for it", call, got)
				continue
			}
			if !slices.Equal(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(got))) {
				t.Errorf("%s: docs/api.md names the roles %v, the gateway lets in %v", call, want, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for call := range documented {
		if !served[call] {
			t.Errorf("docs/api.md has a row for %s, which the router does not serve", call)
		}
	}
}

// TestReadyzDocNamesWhatTheNodeAnswers: docs/api.md's /readyz names each
// field of a ready node's answer (the OpenAPI Probe, held to the node by
// TestOpenAPIAnswers) and each value of storage and of bus in its turn.
// It gave storage the bus's values (off, up, down), where the node
// answers ok or full with a storage_reason.
func TestReadyzDocNamesWhatTheNodeAnswers(t *testing.T) {
	_, text, ok := strings.Cut(apiDocSection(t, "Node"), "\n- `GET /healthz`")
	if !ok {
		t.Fatal("docs/api.md's section Node has no bullet for GET /healthz and /readyz")
	}
	text, _, _ = strings.Cut(text, "\n- ")
	text, _, _ = strings.Cut(text, "\n\n")
	storage, bus, ok := strings.Cut(text, "`bus`")
	if !ok {
		t.Fatalf("docs/api.md's /readyz does not name bus: %s", text)
	}
	probe := loadOpenAPI(t).schema("Probe")["properties"].(map[string]any)
	for field, in := range map[string]string{"storage": storage, "bus": bus} {
		for _, v := range probe[field].(map[string]any)["enum"].([]any) {
			if !strings.Contains(in, "`"+v.(string)+"`") {
				t.Errorf("docs/api.md's /readyz does not give %s the value %q: %s", field, v, in)
			}
		}
	}
	for field := range probe {
		if !strings.Contains(text, "`"+field+"`") && !strings.Contains(text, `"`+field+`"`) {
			t.Errorf("docs/api.md's /readyz does not name the field %s: %s", field, text)
		}
	}
}

// TestResubmitDocNamesItsErrors: docs/api.md's Resubmit names every error
// the OpenAPI document lists for a single resubmit besides the common
// ones (a bad body, the token, the role, the size, the node's own
// trouble), with its status. It left out 422 no_route, which the node
// answers for a message no route serves now.
func TestResubmitDocNamesItsErrors(t *testing.T) {
	_, section, ok := strings.Cut(apiDocSection(t, "Messages"), "\n### Resubmit\n")
	if !ok {
		t.Fatal("docs/api.md's section Messages has no Resubmit")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	d := loadOpenAPI(t)
	for status, v := range d.operation("POST", "/api/messages/{id}/resubmit")["responses"].(map[string]any) {
		if status < "400" || slices.Contains([]string{"400", "401", "403", "413", "500", "503"}, status) {
			continue
		}
		code := docRoleName.FindStringSubmatch(v.(map[string]any)["description"].(string))
		if code == nil {
			t.Fatalf("the OpenAPI document's resubmit %s names no code", status)
		}
		if !strings.Contains(section, "`"+status+" "+code[1]+"`") {
			t.Errorf("docs/api.md's Resubmit does not name %s %s", status, code[1])
		}
	}
}
