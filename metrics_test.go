package switchboard_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/polltest"
)

// documentedKinds reads the actor kinds of the paragraph of docs/metrics.md
// that starts with intro (every `name` up to the paragraph's end).
func documentedKinds(t *testing.T, intro string) []string {
	t.Helper()
	doc, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(doc), "\n"+intro)
	if !ok {
		t.Fatalf("docs/metrics.md has no paragraph %q", intro)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	para = regexp.MustCompile(`\[[^]]*\]\([^)]*\)`).ReplaceAllString(para, "") // links
	var kinds []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1) {
		kinds = append(kinds, m[1])
	}
	slices.Sort(kinds)
	return kinds
}

// TestActorKindsAreDocumented: the actor kinds on /metrics of a node with
// a frontend are those docs/metrics.md lists.
func TestActorKindsAreDocumented(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe", "1")
	doc := documentedKinds(t, "Actor kinds of a node:")
	// The frontend's worker (kind delivery) is spawned after the PUT's answer.
	polltest.Eventually(t, 10*time.Second, func() error {
		var kinds []string
		for l := range strings.SplitSeq(scrape(t, h), "\n") {
			if rest, ok := strings.CutPrefix(l, `switchboard_actor_restarts_total{kind="`); ok {
				kinds = append(kinds, rest[:strings.IndexByte(rest, '"')])
			}
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, doc) {
			return fmt.Errorf("actor kinds on /metrics %v, docs/metrics.md lists %v", kinds, doc)
		}
		return nil
	})
}
