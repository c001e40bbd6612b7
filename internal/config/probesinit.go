package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxProbesInitLines is gala-gopher's limit on probe lines in probes.init
// (blank and comment lines not counted).
const MaxProbesInitLines = 30

// maxInitLine bounds one line: a 1 MiB REST body plus the feature name.
const maxInitLine = 1<<20 + 256

// InitLine is one probes.init line: `<feature> <json>`, the REST call
// PUT /<feature> with body json=<json> to make at start-up.
type InitLine struct {
	Feature string // e.g. "tcp"
	JSON    string // a JSON object without whitespace
}

// InitError is a malformed probes.init line.
type InitError struct {
	Line int
	Msg  string
}

func (e *InitError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseProbesInit reads probes.init the way gala-gopher's init_probes.sh
// does: blank lines and lines starting with # are skipped; the first word
// is the feature; all ASCII whitespace is stripped from the rest, inside
// JSON strings too (so "my app" becomes "myapp", as in gala-gopher). Unlike
// the script, which stops at the first bad line, a line without JSON or
// whose JSON is not an object is an *InitError naming the line, and so is a
// 31st probe line; the good lines are still returned, so one typo does not
// keep every probe from starting. Several bad lines give a joined error.
func ParseProbesInit(r io.Reader) ([]InitLine, error) {
	var out []InitLine
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxInitLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		feature, rest, _ := strings.Cut(strings.Map(tabToSpace, line), " ")
		body := stripSpace(rest)
		switch {
		case body == "":
			errs = append(errs, &InitError{n, fmt.Sprintf("feature %q has no JSON after it", feature)})
		case len(out) == MaxProbesInitLines:
			errs = append(errs, &InitError{n, fmt.Sprintf("more than %d probe lines", MaxProbesInitLines)})
		default:
			if err := checkObject([]byte(body)); err != nil {
				errs = append(errs, &InitError{n, fmt.Sprintf("%s: %v", feature, err)})
				continue
			}
			out = append(out, InitLine{Feature: feature, JSON: body})
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = &InitError{n + 1, fmt.Sprintf("longer than %d bytes", maxInitLine)}
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// WriteProbesInit writes lines in the format ParseProbesInit reads. The
// JSON is compacted and spaces inside its strings are written as \u0020,
// so that reading the file back gives the same values.
func WriteProbesInit(w io.Writer, lines []InitLine) error {
	if len(lines) > MaxProbesInitLines {
		return fmt.Errorf("probes.init: %d probe lines, more than %d", len(lines), MaxProbesInitLines)
	}
	var b bytes.Buffer
	for _, l := range lines {
		if l.Feature == "" || l.Feature[0] == '#' || strings.ContainsAny(l.Feature, " \t\n\v\f\r") {
			return fmt.Errorf("probes.init: invalid feature name %q", l.Feature)
		}
		if err := checkObject([]byte(l.JSON)); err != nil {
			return fmt.Errorf("probes.init: %s: %w", l.Feature, err)
		}
		b.WriteString(l.Feature)
		b.WriteByte(' ')
		start := b.Len()
		if err := json.Compact(&b, []byte(l.JSON)); err != nil {
			return fmt.Errorf("probes.init: %s: %w", l.Feature, err)
		}
		escapeSpaces(&b, start)
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ProbesInit returns the start-up probe settings: ProbesInitContent when
// set, else the ProbesInitFile, whose absence means none. As with
// ParseProbesInit, the good lines come back even when some are bad.
func (c *Config) ProbesInit() ([]InitLine, error) {
	if c.ProbesInitContent != "" {
		lines, err := ParseProbesInit(strings.NewReader(c.ProbesInitContent))
		return lines, prefixInitErrors("env GOPHER_PROBES_INIT: line %d: %s", "env GOPHER_PROBES_INIT", err)
	}
	f, err := os.Open(c.ProbesInitFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lines, err := ParseProbesInit(f)
	return lines, prefixInitErrors(c.ProbesInitFile+":%d: %s", c.ProbesInitFile, err)
}

// prefixInitErrors rewrites each *InitError of a (joined) error with format,
// which takes the line number and the message; other errors get the prefix
// other.
func prefixInitErrors(format, other string, err error) error {
	if err == nil {
		return nil
	}
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var ie *InitError
		if errors.As(e, &ie) {
			out = append(out, fmt.Errorf(format, ie.Line, ie.Msg))
		} else {
			out = append(out, fmt.Errorf("%s: %w", other, e))
		}
	}
	return errors.Join(out...)
}

func tabToSpace(r rune) rune {
	if r == '\t' {
		return ' '
	}
	return r
}

// stripSpace removes ASCII whitespace, as sed 's/[[:space:]]//g' does.
func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			return -1
		}
		return r
	}, s)
}

func checkObject(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("JSON is a %s, want an object", te.Value)
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if obj == nil {
		return errors.New("JSON is null, want an object")
	}
	return nil
}

// escapeSpaces rewrites, from start on, spaces inside JSON strings of
// compact JSON as \u0020.
func escapeSpaces(b *bytes.Buffer, start int) {
	src := append([]byte(nil), b.Bytes()[start:]...)
	b.Truncate(start)
	inStr, esc := false, false
	for _, c := range src {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr && c == ' ':
			b.WriteString(`\u0020`)
			continue
		}
		b.WriteByte(c)
	}
}
