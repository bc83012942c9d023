package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOverviewCountsOnlySwitchboardTargets: the Prometheus the dashboard
// reads scrapes other jobs too (itself, node exporters). Opened as it is
// shipped, every variable on All, the Overview's "Nodes up" and "Nodes
// down" count the targets of the jobs that serve Switchboard's metrics,
// not every target Prometheus has. Grafana sends a variable's allValue for
// All when it has one, else the values its query found as one regular
// expression.
func TestOverviewCountsOnlySwitchboardTargets(t *testing.T) {
	promtool := lookPromtool(t, "test rules of the Overview's node counts")
	d, _ := loadDashboard(t)

	// What the variables' queries find in the series below.
	found := map[string][]string{"job": {"switchboard"}, "instance": {"a:9568"}, "peer": nil}
	all := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if !v.IncludeAll {
			t.Fatalf("variable %s has no All: the dashboard does not open on every node", v.Name)
		}
		values, ok := found[v.Name]
		if !ok {
			t.Fatalf("variable %s: this test does not know what its query finds", v.Name)
		}
		all[v.Name] = v.AllValue
		if v.AllValue == "" {
			quoted := make([]string, len(values))
			for i, s := range values {
				quoted[i] = regexp.QuoteMeta(s)
			}
			all[v.Name] = "(" + strings.Join(quoted, "|") + ")"
		}
	}
	exprOf := func(title string) string {
		var found []string
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if p.Title == title {
					for _, tg := range p.Targets {
						found = append(found, tg.Expr)
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		if len(found) != 1 {
			t.Fatalf("panel %q has %d targets, want 1", title, len(found))
		}
		return grafanaVar.ReplaceAllStringFunc(found[0], func(v string) string {
			name := strings.Trim(v, "${}[]")
			value, ok := all[name]
			if !ok {
				t.Fatalf("%s: no value for the variable %s", found[0], v)
			}
			return value
		})
	}

	file := fmt.Sprintf(`rule_files: []
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # A Switchboard node, up.
      - series: 'up{job="switchboard", instance="a:9568"}'
        values: '1'
      - series: 'switchboard_messages{job="switchboard", instance="a:9568", node="a", state="pending"}'
        values: '0'
      # Prometheus itself, and a node exporter that is down.
      - series: 'up{job="prometheus", instance="localhost:9090"}'
        values: '1'
      - series: 'up{job="node", instance="host:9100"}'
        values: '0'
    promql_expr_test:
      - expr: %s
        eval_time: 0m
        exp_samples:
          - labels: '{}'
            value: 1
      - expr: %s
        eval_time: 0m
        exp_samples:
          - labels: '{}'
            value: 0
`, yamlQuote(exprOf("Nodes up")), yamlQuote(exprOf("Nodes down")))
	path := filepath.Join(t.TempDir(), "overview.yml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	if promtool == "" {
		return
	}
	if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the Overview's node counts, every variable on All, count other jobs' targets: %v\n%s", err, out)
	}
}
