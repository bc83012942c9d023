package deploy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// What the dashboard and the alerts ask of the node's metrics is read from
// their PromQL with a small lexer: enough to find every metric name, the
// label matchers on it and the labels grouped by, without a PromQL parser
// (the module has none and must not get one for a test).

// selector is one `metric{label="value", ...}` in an expression.
type selector struct {
	metric   string
	matchers []matcher
}

type matcher struct {
	label, op, value string
}

// promqlUse is what one expression uses.
type promqlUse struct {
	selectors []selector
	// grouping holds the labels of by (...), without (...), on (...),
	// ignoring (...) and group_left/right (...).
	grouping []string
}

// promqlKeywords are identifiers that are not metric names when not followed
// by "(".
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "inf": true, "nan": true, "atan2": true,
}

// aggregations may be followed by a grouping clause before their "(".
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

type promToken struct {
	kind byte // 'i' identifier, 's' string, 'n' number or duration, else the punctuation itself
	text string
}

// grafanaVar matches Grafana's template variables ($x, ${x}, ${x:format},
// [[x]]); they are replaced before lexing.
var grafanaVar = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]`)

func lexPromQL(expr string) ([]promToken, error) {
	var toks []promToken
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			text := s[i+1 : j]
			if c != '`' {
				text = unescape(text)
			}
			toks = append(toks, promToken{'s', text})
			i = j + 1
		case c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == ':' || 'a' <= s[j] && s[j] <= 'z' || 'A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
				j++
			}
			toks = append(toks, promToken{'i', s[i:j]})
			i = j
		case '0' <= c && c <= '9' || c == '.':
			j := i
			for j < len(s) && (s[j] == '.' || 'a' <= s[j] && s[j] <= 'z' || 'A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
				j++
			}
			toks = append(toks, promToken{'n', s[i:j]})
			i = j
		default:
			// Two-character operators of matchers; the rest one by one.
			if i+1 < len(s) && strings.Contains("=~ != !~ == <= >=", s[i:i+2]) {
				toks = append(toks, promToken{s[i], s[i : i+2]})
				i += 2
				continue
			}
			toks = append(toks, promToken{c, string(c)})
			i++
		}
	}
	return toks, nil
}

// unescape undoes the backslash escapes of a quoted PromQL string (\n, \t
// and \x for any other x).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parsePromQL finds the metric selectors and grouping labels of expr.
// Grafana variables become placeholders first.
func parsePromQL(expr string) (promqlUse, error) {
	var use promqlUse
	clean := grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		return "__grafana_var__"
	})
	toks, err := lexPromQL(clean)
	if err != nil {
		return use, err
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.kind {
		case '[':
			// A range or subquery: durations and variables only.
			for i < len(toks) && toks[i].kind != ']' {
				i++
			}
		case '{':
			return use, fmt.Errorf("selector without a metric name in %q", expr)
		case 'i':
			next := byte(0)
			if i+1 < len(toks) {
				next = toks[i+1].kind
			}
			switch {
			case groupingKeywords[t.text] && next == '(':
				i += 2
				for ; i < len(toks) && toks[i].kind != ')'; i++ {
					if toks[i].kind == 'i' {
						use.grouping = append(use.grouping, toks[i].text)
					}
				}
			case next == '(' || aggregations[t.text] || promqlKeywords[t.text] || t.text == "__grafana_var__":
				// A function, an aggregation or a keyword.
			default:
				sel := selector{metric: t.text}
				if next == '{' {
					i += 2
					for ; i < len(toks) && toks[i].kind != '}'; i++ {
						if toks[i].kind == ',' {
							continue
						}
						if i+2 >= len(toks) || toks[i].kind != 'i' || toks[i+2].kind != 's' {
							return use, fmt.Errorf("bad label matcher in %q", expr)
						}
						sel.matchers = append(sel.matchers, matcher{label: toks[i].text, op: toks[i+1].text, value: toks[i+2].text})
						i += 2
					}
				}
				use.selectors = append(use.selectors, sel)
			}
		}
	}
	return use, nil
}

// labelValuesQuery matches Grafana's label_values(selector, label) variable
// query.
var labelValuesQuery = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// parseVariableQuery reads a Grafana variable query: label_values(expr,
// label) counts as expr plus a use of label; anything else is PromQL.
func parseVariableQuery(q string) (promqlUse, error) {
	if m := labelValuesQuery.FindStringSubmatch(q); m != nil {
		use, err := parsePromQL(m[1])
		use.grouping = append(use.grouping, m[2])
		return use, err
	}
	return parsePromQL(q)
}

// scrape is a parsed text exposition: every sample's labels by sample name.
type scrape map[string][]map[string]string

// sample is one line of a text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  string
}

// parseScrape reads the Prometheus text format (the node serves it to a
// plain GET).
func parseScrape(text string) (scrape, error) {
	samples, err := parseSamples(text)
	if err != nil {
		return nil, err
	}
	out := scrape{}
	for _, s := range samples {
		out[s.name] = append(out[s.name], s.labels)
	}
	return out, nil
}

// parseSamples reads the samples of a text exposition in their order.
func parseSamples(text string) ([]sample, error) {
	var out []sample
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end <= 0 {
			return nil, fmt.Errorf("line %d: %q", n+1, line)
		}
		name, rest := line[:end], line[end:]
		labels := map[string]string{}
		if rest[0] == '{' {
			i := 1
			for i < len(rest) && rest[i] != '}' {
				eq := strings.IndexByte(rest[i:], '=')
				if eq < 0 || i+eq+1 >= len(rest) || rest[i+eq+1] != '"' {
					return nil, fmt.Errorf("line %d: bad labels in %q", n+1, line)
				}
				key := strings.TrimSpace(rest[i : i+eq])
				j := i + eq + 2
				var val strings.Builder
				for j < len(rest) && rest[j] != '"' {
					if rest[j] == '\\' && j+1 < len(rest) {
						j++
						switch rest[j] {
						case 'n':
							val.WriteByte('\n')
						default:
							val.WriteByte(rest[j])
						}
					} else {
						val.WriteByte(rest[j])
					}
					j++
				}
				labels[key] = val.String()
				i = j + 1
				if i < len(rest) && rest[i] == ',' {
					i++
				}
			}
			rest = rest[min(i+1, len(rest)):]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d: no value in %q", n+1, line)
		}
		out = append(out, sample{name: name, labels: labels, value: fields[0]})
	}
	return out, nil
}

// prometheusMade are series Prometheus makes itself at scrape time; the node
// cannot serve them.
var prometheusMade = map[string]bool{"up": true}

// targetLabels are attached by Prometheus to every scraped series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// missing returns what use asks that sc lacks: metric names without a
// sample, label names no sample of the metric has, and literal equality
// values no sample has. Grouping labels must be a label of one of the
// expression's metrics.
func (sc scrape) missing(use promqlUse) []string {
	var out []string
	labelsOf := map[string]bool{}
	for _, sel := range use.selectors {
		if prometheusMade[sel.metric] {
			continue
		}
		samples, ok := sc[sel.metric]
		if !ok {
			out = append(out, "metric "+sel.metric)
			continue
		}
		for _, s := range samples {
			for k := range s {
				labelsOf[k] = true
			}
		}
		for _, m := range sel.matchers {
			if targetLabels[m.label] || m.label == "__name__" {
				continue
			}
			has, hasValue := false, false
			for _, s := range samples {
				v, ok := s[m.label]
				has = has || ok
				hasValue = hasValue || ok && v == m.value
			}
			switch {
			case !has:
				out = append(out, fmt.Sprintf("label %s on %s", m.label, sel.metric))
			case m.op == "=" && m.value != "__grafana_var__" && !hasValue:
				out = append(out, fmt.Sprintf("%s{%s=%q}", sel.metric, m.label, m.value))
			}
		}
	}
	for _, g := range use.grouping {
		if !targetLabels[g] && !labelsOf[g] {
			out = append(out, "grouping label "+g)
		}
	}
	sort.Strings(out)
	return out
}
