package deploy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseYAML(t *testing.T) {
	src := `# comment
a: 1   # trailing comment
b:
  - x
  - "y # not a comment"
  - name: n
    value: v
  -
    k: 'it''s'
c:
- s1
- [p, "q", 'r']
d: |
  line one
    indented
  # kept
e: >-
  folded
  text

  para
f: {}
"quoted key": "tab\there"
g:
---
second: doc
`
	docs, err := parseYAML(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{
			"a":          "1",
			"b":          []any{"x", "y # not a comment", map[string]any{"name": "n", "value": "v"}, map[string]any{"k": "it's"}},
			"c":          []any{"s1", []any{"p", "q", "r"}},
			"d":          "line one\n  indented\n# kept\n",
			"e":          "folded text\npara",
			"f":          map[string]any{},
			"quoted key": "tab\there",
			"g":          nil,
		},
		map[string]any{"second": "doc"},
	}
	if !reflect.DeepEqual(docs, want) {
		t.Fatalf("got  %#v\nwant %#v", docs, want)
	}

	for _, bad := range []string{
		"a: 1\na: 2",           // duplicate key
		"a:\n\t- x",            // tab
		"a: &anchor x",         // anchor
		"a: {b: c}",            // flow mapping
		"a: one\n  two",        // multi-line plain scalar
		"a: x: y",              // ': ' in a plain scalar
		"a:\n  b: 1\n c: 2",    // bad dedent
		"- a\nb: c",            // sequence then mapping at one level
		"a: \"unterminated",    // bad quote
		"a: [x, [nested]]",     // nested flow
		"just a scalar line\n", // not a block
	} {
		if _, err := parseYAML(bad); err == nil {
			t.Errorf("parseYAML(%q) accepted it", bad)
		}
	}
}

func TestParsePromQL(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		want     string // selectors as metric{label op value}, then | grouping
		variable bool
	}{
		{`up{job="switchboard"} == 0`, `up{job=switchboard} |`, false},
		{`sum by (le, peer) (rate(x_bucket{peer=~"$peer"}[$__rate_interval]))`, `x_bucket{peer=~__grafana_var__} | le peer`, false},
		{`a - (a offset 15m) > 0`, `a{} a{} |`, false},
		{`up == 1 unless on (job, instance) b`, `up{} b{} | job instance`, false},
		{"sum without (state) (\n  s{state=\"x\"} * 1\n  or s{state='y'} * 2\n)", `s{state=x} s{state=y} | state`, false},
		{`histogram_quantile(0.99, sum(rate(h_bucket[5m])) by (le))`, `h_bucket{} | le`, false},
		{`count(m{a!="b"} == 0) or vector(0)`, `m{a!=b} |`, false},
		{`label_values(m{job=~"$job"}, instance)`, `m{job=~__grafana_var__} | instance`, true},
	} {
		var use promqlUse
		var err error
		if tc.variable {
			use, err = parseVariableQuery(tc.expr)
		} else {
			use, err = parsePromQL(tc.expr)
		}
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		var parts []string
		for _, s := range use.selectors {
			var ms []string
			for _, m := range s.matchers {
				ms = append(ms, m.label+m.op+m.value)
			}
			parts = append(parts, fmt.Sprintf("%s{%s}", s.metric, strings.Join(ms, ",")))
		}
		got := strings.TrimSpace(strings.Join(parts, " ") + " | " + strings.Join(use.grouping, " "))
		if got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.expr, got, tc.want)
		}
	}
}

func TestScrapeMissing(t *testing.T) {
	sc, err := parseScrape(`# HELP h x
# TYPE h histogram
h_bucket{kind="intake",le="0.1"} 1
h_bucket{kind="intake",le="+Inf"} 1
h_sum{kind="intake"} 0.01
h_count{kind="intake"} 1
g{state="a \"quoted\""} 3
plain 1
`)
	if err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]string{
		`histogram_quantile(0.9, sum by (le, kind) (rate(h_bucket{kind="intake"}[5m])))`: ``,
		`rate(h[5m])`:                              `metric h`,
		`h_count{kind="other"}`:                    `h_count{kind="other"}`,
		`g{state="a \"quoted\""} + plain`:          ``,
		`sum by (frontend) (g{instance=~"$i"})`:    `grouping label frontend`,
		`g{nolabel=~".*"} and up{job="x"} == 0`:    `label nolabel on g`,
		`sum by (job) (g{state=~"$state"}) > 1`:    ``,
		`g{state="$state"} or g{state="${state}"}`: ``,
	} {
		use, err := parsePromQL(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := strings.Join(sc.missing(use), "; "); got != want {
			t.Errorf("%s: missing %q, want %q", expr, got, want)
		}
	}
}
