package config

import (
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

// maxInitFile bounds the whole file: the 30 longest lines and room for
// comments. A bigger file is not read, so it is not rewritten either.
const maxInitFile = 32 << 20

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

// InitEntry is one line of probes.init as read, kept whole so that a save
// can write back every line galago did not apply exactly as it was.
type InitEntry struct {
	Num int    // 1-based line number
	Raw string // the line without its '\n' (a '\r' before it is kept)
	// Probe is the parsed line; nil for blank, comment and malformed lines.
	Probe *InitLine
	// Err says why a line that is neither blank nor a comment was not
	// parsed; nil otherwise.
	Err *InitError
	// Applied is set by the caller once the line took effect. Lines left
	// unapplied (malformed, or refused by the manager) are saved unchanged.
	Applied bool
}

// Skipped reports whether the line is blank or a comment.
func (e *InitEntry) Skipped() bool { return e.Probe == nil && e.Err == nil }

// InitFile is probes.init as read at start: every line, in order.
type InitFile struct {
	// Source names where the lines came from, for messages: the file's
	// path or "env GOPHER_PROBES_INIT".
	Source  string
	Entries []InitEntry
}

// Lines returns the parsed probe lines.
func (f *InitFile) Lines() []InitLine {
	var out []InitLine
	for _, e := range f.Entries {
		if e.Probe != nil {
			out = append(out, *e.Probe)
		}
	}
	return out
}

// Where names line n of the source for messages: "<path>:<n>", or
// "env GOPHER_PROBES_INIT: line <n>".
func (f *InitFile) Where(n int) string {
	if strings.HasPrefix(f.Source, "env ") {
		return fmt.Sprintf("%s: line %d", f.Source, n)
	}
	return fmt.Sprintf("%s:%d", f.Source, n)
}

// Err joins the errors of the malformed lines, each prefixed with Where.
func (f *InitFile) Err() error {
	var errs []error
	for _, e := range f.Entries {
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", f.Where(e.Num), e.Err.Msg))
		}
	}
	return errors.Join(errs...)
}

// isInitSpace is the one definition of whitespace for reading and writing
// probes.init: ASCII [[:space:]], what init_probes.sh's sed strips. The
// feature ends at the first of them; none may appear in a written feature.
func isInitSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

func isInitSpaceRune(r rune) bool { return r < 0x80 && isInitSpace(byte(r)) }

// ReadProbesInit reads probes.init the way gala-gopher's init_probes.sh
// does: blank lines and lines starting with # are skipped; the first word
// is the feature; all ASCII whitespace is stripped from the rest, inside
// JSON strings too (so "my app" becomes "myapp", as in gala-gopher). Unlike
// the script, which stops at the first bad line, a line without JSON, whose
// JSON is not an object, longer than 1 MiB, or past the 30th probe line is
// an entry with an *InitError naming the line, and the lines after it are
// still read, so one typo does not keep every probe from starting. The
// error is only for a file that could not be read whole.
func ReadProbesInit(source string, r io.Reader) (*InitFile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInitFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(data) > maxInitFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", source, maxInitFile)
	}
	f := &InitFile{Source: source}
	probes := 0
	for n := 1; len(data) > 0; n++ {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		e := InitEntry{Num: n, Raw: string(raw)}
		parseInitLine(&e, &probes)
		f.Entries = append(f.Entries, e)
	}
	return f, nil
}

func parseInitLine(e *InitEntry, probes *int) {
	line := trimInitSpace(e.Raw)
	if line == "" || line[0] == '#' {
		return
	}
	bad := func(format string, args ...any) { e.Err = &InitError{e.Num, fmt.Sprintf(format, args...)} }
	if len(e.Raw) > maxInitLine {
		bad("longer than %d bytes", maxInitLine)
		return
	}
	end := 0
	for end < len(line) && !isInitSpace(line[end]) {
		end++
	}
	feature, body := line[:end], stripInitSpace(line[end:])
	switch {
	case body == "":
		bad("feature %q has no JSON after it", feature)
	case *probes == MaxProbesInitLines:
		bad("more than %d probe lines", MaxProbesInitLines)
	default:
		if err := checkObject([]byte(body)); err != nil {
			bad("%s: %v", feature, err)
			return
		}
		*probes++
		e.Probe = &InitLine{Feature: feature, JSON: body}
	}
}

// ParseProbesInit reads probes.init (see ReadProbesInit) and returns its
// probe lines; the malformed ones come back as *InitError values, joined.
func ParseProbesInit(r io.Reader) ([]InitLine, error) {
	f, err := ReadProbesInit("probes.init", r)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range f.Entries {
		if e.Err != nil {
			errs = append(errs, e.Err)
		}
	}
	return f.Lines(), errors.Join(errs...)
}

// formatInitLine renders one line in the format ReadProbesInit reads. The
// JSON is compacted and spaces inside its strings are written as \u0020,
// so that reading the line back gives the same values.
func formatInitLine(b *bytes.Buffer, l InitLine) error {
	if l.Feature == "" || l.Feature[0] == '#' || strings.IndexFunc(l.Feature, isInitSpaceRune) >= 0 {
		return fmt.Errorf("probes.init: invalid feature name %q", l.Feature)
	}
	if err := checkObject([]byte(l.JSON)); err != nil {
		return fmt.Errorf("probes.init: %s: %w", l.Feature, err)
	}
	b.WriteString(l.Feature)
	b.WriteByte(' ')
	start := b.Len()
	if err := json.Compact(b, []byte(l.JSON)); err != nil {
		return fmt.Errorf("probes.init: %s: %w", l.Feature, err)
	}
	escapeSpaces(b, start)
	b.WriteByte('\n')
	return nil
}

// WriteProbesInit writes lines in the format ReadProbesInit reads.
func WriteProbesInit(w io.Writer, lines []InitLine) error {
	if len(lines) > MaxProbesInitLines {
		return fmt.Errorf("probes.init: %d probe lines, more than %d", len(lines), MaxProbesInitLines)
	}
	var b bytes.Buffer
	for _, l := range lines {
		if err := formatInitLine(&b, l); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// savedHeader starts a probes.init that galago writes from nothing.
const savedHeader = "# Written by galago on stop: the running probe configuration.\n" +
	"# Format: <feature> <json>, applied at start as PUT /<feature>.\n"

// Rewrite renders the probes.init to save on stop, as init_probes.sh --save
// does, but without losing what galago did not apply. running holds the
// configuration of every configured feature, one line each, under its
// canonical name; canon maps a line's feature to that name (built-in names
// match case-insensitively).
//
//   - Blank, comment, malformed and refused lines are written back as they
//     were, in place.
//   - The applied lines of a feature are replaced by its running line, put
//     where the last line naming that feature was, so at the next start it
//     comes after any refused line of the same feature and has the last
//     word.
//   - Features configured only at run time are appended in running's order.
//
// A file that was absent or empty gets a header comment. The second result
// is the number of probe lines written, which may exceed
// MaxProbesInitLines when kept lines and running ones add up.
func (f *InitFile) Rewrite(running []InitLine, canon func(string) string) ([]byte, int, error) {
	byFeature := make(map[string]InitLine, len(running))
	for _, l := range running {
		byFeature[l.Feature] = l
	}
	last := map[string]int{} // feature -> index of the last entry naming it
	for i := range f.Entries {
		if p := f.probeFeature(i); p != "" {
			last[canon(p)] = i
		}
	}
	var b bytes.Buffer
	if len(f.Entries) == 0 {
		b.WriteString(savedHeader)
	}
	probes := 0
	written := map[string]bool{}
	for i, e := range f.Entries {
		feature := ""
		if p := f.probeFeature(i); p != "" {
			feature = canon(p)
		}
		run, hasRun := byFeature[feature]
		switch {
		case e.Applied && hasRun:
			// Replaced by the running line, written below at the last
			// line of the feature.
		default:
			b.WriteString(e.Raw)
			b.WriteByte('\n')
			if e.Probe != nil {
				probes++ // malformed lines do not count, as on reading
			}
		}
		if hasRun && last[feature] == i {
			if err := formatInitLine(&b, run); err != nil {
				return nil, 0, err
			}
			written[feature] = true
			probes++
		}
	}
	for _, l := range running {
		if written[l.Feature] {
			continue
		}
		if err := formatInitLine(&b, l); err != nil {
			return nil, 0, err
		}
		probes++
	}
	return b.Bytes(), probes, nil
}

// probeFeature is the feature an entry names: the parsed feature, or for a
// malformed line its first word; "" for blank and comment lines.
func (f *InitFile) probeFeature(i int) string {
	e := &f.Entries[i]
	if e.Probe != nil {
		return e.Probe.Feature
	}
	if e.Err == nil {
		return ""
	}
	line := trimInitSpace(e.Raw)
	end := 0
	for end < len(line) && !isInitSpace(line[end]) {
		end++
	}
	return line[:end]
}

// ProbesInit reads the start-up probe settings: ProbesInitContent when set,
// else the ProbesInitFile, whose absence means an empty file. The error is
// for a file that exists but cannot be read; malformed lines are entries
// with an Err (see InitFile.Err).
func (c *Config) ProbesInit() (*InitFile, error) {
	if c.ProbesInitContent != "" {
		return ReadProbesInit("env GOPHER_PROBES_INIT", strings.NewReader(c.ProbesInitContent))
	}
	fh, err := os.Open(c.ProbesInitFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &InitFile{Source: c.ProbesInitFile}, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return ReadProbesInit(c.ProbesInitFile, fh)
}

func trimInitSpace(s string) string {
	start, end := 0, len(s)
	for start < end && isInitSpace(s[start]) {
		start++
	}
	for end > start && isInitSpace(s[end-1]) {
		end--
	}
	return s[start:end]
}

// stripInitSpace removes ASCII whitespace, as sed 's/[[:space:]]//g' does.
func stripInitSpace(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !isInitSpace(s[i]) {
			b.WriteByte(s[i])
		}
	}
	return b.String()
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
