package switchboard_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/switchboard-dev/switchboard"
)

// Method names docs/embedding.md gives as calls of a node: node.X / Node.X
// / n.X, and `X(` at the start of a code span (`Message(ctx, id)`).
var (
	docNodeCall = regexp.MustCompile(`\b(?:node|Node|n)\.([A-Z][A-Za-z0-9]*)`)
	docSpanCall = regexp.MustCompile("`([A-Z][A-Za-z0-9]*)\\(")
)

// docPackageFuncs are the package-level functions the guide names as
// `X(`: not methods of Node.
var docPackageFuncs = []string{"New", "DefaultConfig"}

// missingNodeMethods returns the names doc calls on a node that
// *switchboard.Node has no method of, and every name it found.
func missingNodeMethods(doc string) (missing, found []string) {
	typ := reflect.TypeFor[*switchboard.Node]()
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		found = append(found, name)
		if _, ok := typ.MethodByName(name); !ok {
			missing = append(missing, name)
		}
	}
	for _, m := range docNodeCall.FindAllStringSubmatch(doc, -1) {
		add(m[1])
	}
	for _, m := range docSpanCall.FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(docPackageFuncs, m[1]) {
			add(m[1])
		}
	}
	return missing, found
}

// docs/embedding.md once named Node methods that did not exist (Messages,
// Routes, Status, Resubmit ...): every method it names must be one.
func TestEmbeddingDocNamesOnlyNodeMethods(t *testing.T) {
	b, err := os.ReadFile("docs/embedding.md")
	if err != nil {
		t.Fatal(err)
	}
	missing, found := missingNodeMethods(string(b))
	for _, name := range missing {
		t.Errorf("docs/embedding.md names Node.%s, which *switchboard.Node does not have", name)
	}
	// The patterns must still find what the guide names, or this test
	// would pass on nothing.
	for _, name := range []string{"Spawn", "StopActor", "Subscribe", "Props", "Messages", "Resubmit"} {
		if !slices.Contains(found, name) {
			t.Errorf("the check found no %s in docs/embedding.md (found %v): are its patterns still right?", name, found)
		}
	}

	// The check itself reports a name that is not a method.
	if m, _ := missingNodeMethods("call `node.NoSuchCall(ctx)` or `AlsoMissing(x)`, `New(cfg)`"); !slices.Equal(m, []string{"NoSuchCall", "AlsoMissing"}) {
		t.Errorf("the check reported %v, want [NoSuchCall AlsoMissing]", m)
	}
}
