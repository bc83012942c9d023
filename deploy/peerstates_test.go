package deploy

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestPeerStatesPanelShowsEveryState: the "Peer states" panel folds
// switchboard_peer_state into one number per peer (a sum over its
// state="X"} * N terms: the series of the current state is 1, the others
// 0) and maps the number back to a state's name. Every state a peer can
// be in must come out under its own name: a removed peer (listed while
// messages still wait for it) must not read "healthy".
func TestPeerStatesPanelShowsEveryState(t *testing.T) {
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "deploy/grafana/switchboard.json")), &d); err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		FieldConfig struct {
			Defaults struct {
				Mappings []struct {
					Options map[string]struct {
						Text string `json:"text"`
					} `json:"options"`
				} `json:"mappings"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
	}
	var found *panel
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Title == "Peer states" {
				found = &p
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if found == nil || len(found.Targets) != 1 || len(found.FieldConfig.Defaults.Mappings) == 0 {
		t.Fatal("no Peer states panel with one query and a value mapping")
	}
	weight := map[string]int{}
	for _, m := range regexp.MustCompile(`state="([a-z_]+)"\}\s*\*\s*(\d+)`).FindAllStringSubmatch(found.Targets[0].Expr, -1) {
		n, _ := strconv.Atoi(m[2])
		weight[m[1]] = n
	}
	names := found.FieldConfig.Defaults.Mappings[0].Options
	for _, st := range messages.AllPeerStates {
		value := weight[string(st)] // 0 when the query has no term for it: every term is 0
		if got := names[strconv.Itoa(value)].Text; got != string(st) {
			t.Errorf("a peer in state %s: the panel's query gives %d, shown as %q", st, value, got)
		}
	}
}
