package deploy

import (
	"fmt"
	"strconv"
	"strings"
)

// The module has no YAML parser among its requirements, and the files in
// deploy/ must not add one. They are written in the plain block style of
// YAML, and parseYAML reads exactly that subset:
//
//   - block mappings (`key: value`, `key:` followed by a deeper block, or by
//     a block sequence at the same indentation) with unique keys;
//   - block sequences (`- item`, `- key: value` opening a mapping);
//   - plain, 'single' and "double" quoted scalars, flow sequences of scalars
//     (`[a, "b"]`), `{}` and `[]`;
//   - literal and folded block scalars (`|`, `|-`, `>`, `>-`);
//   - comments, and documents separated by `---`.
//
// Scalars stay strings (no typing of numbers or booleans): the checks only
// need the shape and the text. Anything outside the subset (anchors, tags,
// flow mappings, multi-line plain scalars, tabs in indentation) is an error,
// so a file that leaves the subset fails the test rather than being half
// read.

type yamlLine struct {
	num    int    // 1-based line number in the file
	indent int    // leading spaces
	text   string // without the indentation; comments are still there
}

type yamlParser struct {
	lines []yamlLine
	pos   int
}

// parseYAML returns the documents of src, each a map[string]any, []any,
// string or nil (an empty document is dropped).
func parseYAML(src string) ([]any, error) {
	var docs []any
	var cur []yamlLine
	flush := func() error {
		p := &yamlParser{lines: cur}
		cur = nil
		p.skipBlank()
		if p.pos == len(p.lines) {
			return nil
		}
		v, err := p.block(p.lines[p.pos].indent)
		if err != nil {
			return err
		}
		p.skipBlank()
		if p.pos < len(p.lines) {
			l := p.lines[p.pos]
			return fmt.Errorf("line %d: unexpected %q at indentation %d", l.num, l.text, l.indent)
		}
		docs = append(docs, v)
		return nil
	}
	for i, raw := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimLeft(raw, " ")
		if strings.HasPrefix(trimmed, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", i+1)
		}
		if raw == "---" || strings.HasPrefix(raw, "--- ") {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(raw, "%") || raw == "..." {
			return nil, fmt.Errorf("line %d: directives and document end markers are outside the supported YAML subset", i+1)
		}
		cur = append(cur, yamlLine{num: i + 1, indent: len(raw) - len(trimmed), text: strings.TrimRight(trimmed, " ")})
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return docs, nil
}

// blank reports whether a line holds nothing but maybe a comment.
func (l yamlLine) blank() bool { return l.text == "" || strings.HasPrefix(l.text, "#") }

func (p *yamlParser) skipBlank() {
	for p.pos < len(p.lines) && p.lines[p.pos].blank() {
		p.pos++
	}
}

// block parses the mapping or sequence whose lines start at indent.
func (p *yamlParser) block(indent int) (any, error) {
	p.skipBlank()
	l := p.lines[p.pos]
	if l.indent != indent {
		return nil, fmt.Errorf("line %d: indentation %d, want %d", l.num, l.indent, indent)
	}
	if isSeqItem(l.text) {
		return p.sequence(indent)
	}
	if _, _, ok := splitKey(l.text); ok {
		return p.mapping(indent)
	}
	return nil, fmt.Errorf("line %d: %q is neither `key: value` nor `- item` (multi-line plain scalars are outside the supported YAML subset)", l.num, l.text)
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// splitKey splits `key: rest` (or `key:`); the key may be quoted.
func splitKey(text string) (key, rest string, ok bool) {
	if text == "" || text[0] == '#' || text[0] == '-' && isSeqItem(text) {
		return "", "", false
	}
	if text[0] == '"' || text[0] == '\'' {
		end := strings.IndexByte(text[1:], text[0])
		if end < 0 {
			return "", "", false
		}
		k, err := scalar(text[:end+2])
		if err != nil {
			return "", "", false
		}
		after := text[end+2:]
		if after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", false
		}
		return k.(string), strings.TrimSpace(strings.TrimPrefix(after, ":")), true
	}
	i := strings.Index(text, ": ")
	if i < 0 {
		if strings.HasSuffix(text, ":") {
			i = len(text) - 1
		} else {
			return "", "", false
		}
	}
	key = text[:i]
	if strings.ContainsAny(key, "#{}[],&*!|>%@`") {
		return "", "", false
	}
	return key, strings.TrimSpace(text[i+1:]), true
}

func (p *yamlParser) mapping(indent int) (map[string]any, error) {
	m := map[string]any{}
	for {
		p.skipBlank()
		if p.pos == len(p.lines) {
			return m, nil
		}
		l := p.lines[p.pos]
		if l.indent < indent {
			return m, nil
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation %d inside a mapping at %d", l.num, l.indent, indent)
		}
		if isSeqItem(l.text) {
			return m, nil // a sequence at the same indentation ends a mapping opened by `- key:`
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not `key: value`", l.num, l.text)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", l.num, key)
		}
		p.pos++
		v, err := p.value(l, indent, rest, true)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
}

func (p *yamlParser) sequence(indent int) ([]any, error) {
	s := []any{}
	for {
		p.skipBlank()
		if p.pos == len(p.lines) {
			return s, nil
		}
		l := p.lines[p.pos]
		if l.indent < indent || l.indent == indent && !isSeqItem(l.text) {
			return s, nil
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation %d inside a sequence at %d", l.num, l.indent, indent)
		}
		item := strings.TrimPrefix(strings.TrimPrefix(l.text, "-"), " ")
		inner := strings.TrimLeft(item, " ")
		if inner == "" || strings.HasPrefix(inner, "#") {
			p.pos++
			v, err := p.nested(l, indent, false)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
			continue
		}
		if _, _, ok := splitKey(inner); ok || isSeqItem(inner) {
			// `- key: value` opens a mapping (or `- - x` a sequence) whose
			// indentation is the column of its first key: re-read this line
			// as that block's first line.
			p.lines[p.pos] = yamlLine{num: l.num, indent: indent + len(l.text) - len(inner), text: inner}
			v, err := p.block(p.lines[p.pos].indent)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
			continue
		}
		p.pos++
		v, err := p.value(l, indent, inner, false)
		if err != nil {
			return nil, err
		}
		s = append(s, v)
	}
}

// value reads what follows `key:` or `- ` on line l (rest), and the lines
// that belong to it.
func (p *yamlParser) value(l yamlLine, indent int, rest string, inMapping bool) (any, error) {
	rest = stripComment(rest)
	switch {
	case rest == "":
		return p.nested(l, indent, inMapping)
	case rest[0] == '|' || rest[0] == '>':
		return p.blockScalar(l, indent, rest)
	case rest[0] == '&' || rest[0] == '*' || rest[0] == '!':
		return nil, fmt.Errorf("line %d: anchors, aliases and tags are outside the supported YAML subset", l.num)
	}
	v, err := scalar(rest)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", l.num, err)
	}
	if p.pos < len(p.lines) && !p.lines[p.pos].blank() && p.lines[p.pos].indent > indent {
		return nil, fmt.Errorf("line %d: continuation of a plain scalar (outside the supported YAML subset; use a block scalar)", p.lines[p.pos].num)
	}
	return v, nil
}

// nested reads the block under a `key:` or `-` that has no value on its
// line; nothing there is a null.
func (p *yamlParser) nested(l yamlLine, indent int, inMapping bool) (any, error) {
	p.skipBlank()
	if p.pos == len(p.lines) {
		return nil, nil
	}
	next := p.lines[p.pos]
	switch {
	case next.indent > indent:
		return p.block(next.indent)
	case next.indent == indent && inMapping && isSeqItem(next.text):
		return p.sequence(indent)
	}
	return nil, nil
}

func (p *yamlParser) blockScalar(l yamlLine, indent int, header string) (string, error) {
	chomp := ""
	switch header[1:] {
	case "", "-", "+":
		chomp = header[1:]
	default:
		return "", fmt.Errorf("line %d: block scalar header %q is outside the supported YAML subset", l.num, header)
	}
	var body []yamlLine
	for p.pos < len(p.lines) {
		n := p.lines[p.pos]
		if n.text != "" && n.indent <= indent {
			break
		}
		body = append(body, n)
		p.pos++
	}
	// Trailing blank lines belong to the chomping, not the text.
	for len(body) > 0 && body[len(body)-1].text == "" {
		body = body[:len(body)-1]
	}
	if len(body) == 0 {
		return "", nil
	}
	base := body[0].indent
	var out []string
	for _, b := range body {
		if b.text == "" {
			out = append(out, "")
			continue
		}
		if b.indent < base {
			return "", fmt.Errorf("line %d: block scalar line less indented than its first line", b.num)
		}
		out = append(out, strings.Repeat(" ", b.indent-base)+b.text)
	}
	var text string
	if header[0] == '|' {
		text = strings.Join(out, "\n")
	} else {
		text = fold(out)
	}
	if chomp != "-" {
		text += "\n"
	}
	return text, nil
}

// fold joins the lines of a folded scalar: single line breaks become
// spaces, empty lines become line breaks, more-indented lines are kept.
func fold(lines []string) string {
	var b strings.Builder
	for i, ln := range lines {
		if i > 0 {
			prev := lines[i-1]
			switch {
			case ln == "":
				b.WriteString("\n")
			case prev == "":
				// The empty lines before wrote the breaks.
			case strings.HasPrefix(ln, " ") || strings.HasPrefix(prev, " "):
				b.WriteString("\n")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString(ln)
	}
	return b.String()
}

// stripComment removes a trailing ` # comment` outside quotes.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0 && c == quote:
			if quote == '\'' && i+1 < len(s) && s[i+1] == '\'' {
				i++
				continue
			}
			quote = 0
		case quote == 0 && (c == '"' || c == '\'') && (i == 0 || s[i-1] == ' ' || s[i-1] == '[' || s[i-1] == ','):
			quote = c
		case quote == 0 && c == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimRight(s[:i], " ")
		}
	}
	return s
}

// scalar reads a one-line scalar or a flow sequence of scalars.
func scalar(s string) (any, error) {
	switch {
	case s == "{}":
		return map[string]any{}, nil
	case s[0] == '{':
		return nil, fmt.Errorf("flow mapping %q is outside the supported YAML subset", s)
	case s[0] == '[':
		if !strings.HasSuffix(s, "]") {
			return nil, fmt.Errorf("unterminated flow sequence %q", s)
		}
		out := []any{}
		inner := strings.TrimSpace(s[1 : len(s)-1])
		if inner == "" {
			return out, nil
		}
		for _, part := range splitFlow(inner) {
			part = strings.TrimSpace(part)
			if part == "" || part[0] == '[' || part[0] == '{' {
				return nil, fmt.Errorf("flow sequence %q: only scalars are supported", s)
			}
			v, err := scalar(part)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case s[0] == '"':
		if len(s) < 2 || s[len(s)-1] != '"' {
			return nil, fmt.Errorf("bad double-quoted scalar %s", s)
		}
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("double-quoted scalar %s: %w", s, err)
		}
		return v, nil
	case s[0] == '\'':
		if len(s) < 2 || s[len(s)-1] != '\'' {
			return nil, fmt.Errorf("bad single-quoted scalar %s", s)
		}
		body := s[1 : len(s)-1]
		if strings.Count(strings.ReplaceAll(body, "''", ""), "'") > 0 {
			return nil, fmt.Errorf("bad single-quoted scalar %s", s)
		}
		return strings.ReplaceAll(body, "''", "'"), nil
	case strings.ContainsAny(s[:1], "&*!|>%@`"):
		return nil, fmt.Errorf("scalar %q starts with an indicator outside the supported YAML subset", s)
	case strings.Contains(s, ": ") || strings.Contains(s, " #"):
		return nil, fmt.Errorf("plain scalar %q contains ': ' or ' #'; quote it", s)
	}
	return s, nil
}

// splitFlow splits the inside of a flow sequence at commas outside quotes.
func splitFlow(s string) []string {
	var parts []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == ',':
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
