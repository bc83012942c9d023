package switchboard_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// tableSeparator is the line under a Markdown table's header: |---|:--:|.
var tableSeparator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

// TestDocTablesAreWhole: every table row of the docs and the README belongs
// to a table. A row after a paragraph (one that splits a table, say) is
// rendered as plain text, the rows after it too: docs/api.md's failure
// reasons once lost forward_timeout, peer_rejected and peer_unsupported
// that way.
func TestDocTablesAreWhole(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i]) // tables in list items are indented
		}
		fenced := false
		for i, l := range lines {
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
			}
			if fenced || !strings.HasPrefix(l, "|") {
				continue
			}
			header := i+1 < len(lines) && tableSeparator.MatchString(lines[i+1])
			inTable := i > 0 && strings.HasPrefix(lines[i-1], "|")
			if !header && !inTable {
				t.Errorf("%s:%d: a table row outside a table (after %q), rendered as text: %.80s", file, i+1, lines[i-1], l)
			}
		}
	}
}

// TestPeerStatesAreDocumented: the row of switchboard_peer_state in
// docs/metrics.md and docs/federation.md names every state the gauge has
// (docs/federation.md once left out removed).
func TestPeerStatesAreDocumented(t *testing.T) {
	var want []string
	for _, s := range messages.AllPeerStates {
		want = append(want, string(s))
	}
	slices.Sort(want)
	for _, file := range []string{"docs/metrics.md", "docs/federation.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		row := regexp.MustCompile("(?m)^\\| `switchboard_peer_state` \\|.*current state \\(([^)]*)\\)").FindStringSubmatch(string(data))
		if row == nil {
			t.Errorf("%s: no row of switchboard_peer_state naming its states (\"current state (...)\")", file)
			continue
		}
		var got []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: switchboard_peer_state's states are %v, the gauge's %v", file, got, want)
		}
	}
}
