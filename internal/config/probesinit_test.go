package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseProbesInit(t *testing.T) {
	src := "# comment\n" +
		"\n" +
		"   # indented comment\n" +
		"tcp {\"cmd\":{\"probe\":[\"tcp_rtt\"]},\"snoopers\":{},\"state\":\"running\"}\n" +
		"  proc\t{ \"cmd\" : { \"probe\" : [ \"proc_syscall\" ] },\r\n" +
		"flamegraph   {\"snoopers\":{\"proc_name\":[{\"comm\":\"my app\",\"cmdline\":\"-jar\tx\"}]}}\r\n" +
		"baseinfo {}"
	// proc's JSON is cut by the newline: invalid, caught below; first
	// check the valid lines alone.
	valid := strings.Replace(src, "  proc\t{ \"cmd\" : { \"probe\" : [ \"proc_syscall\" ] },\r\n", "  proc\t{ \"cmd\" : { \"probe\" : [ \"proc_syscall\" ] }}\r\n", 1)
	got, err := ParseProbesInit(strings.NewReader(valid))
	if err != nil {
		t.Fatal(err)
	}
	want := []InitLine{
		{"tcp", `{"cmd":{"probe":["tcp_rtt"]},"snoopers":{},"state":"running"}`},
		{"proc", `{"cmd":{"probe":["proc_syscall"]}}`},
		// Whitespace inside strings goes too, as with init_probes.sh.
		{"flamegraph", `{"snoopers":{"proc_name":[{"comm":"myapp","cmdline":"-jarx"}]}}`},
		{"baseinfo", `{}`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	_, err = ParseProbesInit(strings.NewReader(src))
	if err == nil || err.Error() != `line 5: proc: invalid JSON: unexpected end of JSON input` {
		t.Errorf("error = %v", err)
	}
}

func TestShippedProbesInit(t *testing.T) {
	f, err := os.Open("../../testdata/probes.init")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ParseProbesInit(f)
	if err != nil || len(lines) != 0 {
		t.Errorf("shipped probes.init: %q, %v; want no lines", lines, err)
	}
}

func TestParseProbesInitErrors(t *testing.T) {
	many := strings.Repeat("tcp {}\n# c\n\n", MaxProbesInitLines) + "proc {}\n"
	cases := []struct{ src, want string }{
		{"tcp\n", `line 1: feature "tcp" has no JSON after it`},
		{"\n\ntcp   \t \n", `line 3: feature "tcp" has no JSON after it`},
		{"tcp{\"state\":\"running\"}\n", `line 1: feature "tcp{\"state\":\"running\"}" has no JSON after it`},
		{"tcp {\"state\":}\n", `line 1: tcp: invalid JSON: invalid character '}' looking for beginning of value`},
		{"tcp [1,2]\n", `line 1: tcp: JSON is a array, want an object`},
		{"tcp \"x\"\n", `line 1: tcp: JSON is a string, want an object`},
		{"tcp null\n", `line 1: tcp: JSON is null, want an object`},
		{"tcp {} {}\n", `line 1: tcp: invalid JSON: invalid character '{' after top-level value`},
		{many, fmt.Sprintf("line %d: more than 30 probe lines", 3*MaxProbesInitLines+1)},
		{"# c\n" + "tcp {\"a\":\"" + strings.Repeat("x", maxInitLine) + "\"}\n", fmt.Sprintf("line 2: longer than %d bytes", maxInitLine)},
	}
	for _, c := range cases {
		_, err := ParseProbesInit(strings.NewReader(c.src))
		var ie *InitError
		if err == nil || err.Error() != c.want || !errors.As(err, &ie) {
			t.Errorf("ParseProbesInit(%.40q) error = %v, want %s", c.src, err, c.want)
		}
	}
	exactly := strings.Repeat("tcp {}\n", MaxProbesInitLines)
	if lines, err := ParseProbesInit(strings.NewReader(exactly)); err != nil || len(lines) != MaxProbesInitLines {
		t.Errorf("30 lines: %d, %v", len(lines), err)
	}
}

func TestWriteProbesInit(t *testing.T) {
	lines := []InitLine{
		{"tcp", `{ "cmd": {"probe": ["tcp_rtt", "tcp_abnormal"]}, "state": "running" }`},
		{"proc", `{"snoopers":{"proc_name":[{"comm":"my app","cmdline":"a \"q\" b\\\\ c"}]}}`},
	}
	var b bytes.Buffer
	if err := WriteProbesInit(&b, lines); err != nil {
		t.Fatal(err)
	}
	want := `tcp {"cmd":{"probe":["tcp_rtt","tcp_abnormal"]},"state":"running"}
proc {"snoopers":{"proc_name":[{"comm":"my\u0020app","cmdline":"a\u0020\"q\"\u0020b\\\\\u0020c"}]}}
`
	if b.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", b.String(), want)
	}
	back, err := ParseProbesInit(&b)
	if err != nil {
		t.Fatal(err)
	}
	// Same JSON values after the round trip, spaces included.
	for i := range lines {
		if back[i].Feature != lines[i].Feature || !sameJSON(t, back[i].JSON, lines[i].JSON) {
			t.Errorf("line %d: read back %q, wrote %q", i, back[i], lines[i])
		}
	}

	bad := []struct {
		lines []InitLine
		want  string
	}{
		{[]InitLine{{"", "{}"}}, `probes.init: invalid feature name ""`},
		{[]InitLine{{"t cp", "{}"}}, `probes.init: invalid feature name "t cp"`},
		{[]InitLine{{"#tcp", "{}"}}, `probes.init: invalid feature name "#tcp"`},
		{[]InitLine{{"tcp", "[]"}}, `probes.init: tcp: JSON is a array, want an object`},
		{[]InitLine{{"tcp", "{"}}, `probes.init: tcp: invalid JSON: unexpected end of JSON input`},
		{make([]InitLine, MaxProbesInitLines+1), `probes.init: 31 probe lines, more than 30`},
	}
	for _, c := range bad {
		if err := WriteProbesInit(&bytes.Buffer{}, c.lines); err == nil || err.Error() != c.want {
			t.Errorf("WriteProbesInit(%.60q) = %v, want %s", c.lines, err, c.want)
		}
	}
}

func TestConfigProbesInit(t *testing.T) {
	dir := t.TempDir()
	c := Default()
	c.ProbesInitFile = filepath.Join(dir, "probes.init")

	if f, err := c.ProbesInit(); err != nil || len(f.Entries) != 0 || f.Source != c.ProbesInitFile {
		t.Errorf("missing file: %+v, %v", f, err)
	}
	if err := os.WriteFile(c.ProbesInitFile, []byte("# x\ntcp {\"state\": \"running\"}\nproc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := c.ProbesInit()
	if err != nil || f.Err() == nil || f.Err().Error() != c.ProbesInitFile+`:3: feature "proc" has no JSON after it` {
		t.Errorf("bad file: %v, %v", err, f.Err())
	}
	if !reflect.DeepEqual(f.Lines(), []InitLine{{"tcp", `{"state":"running"}`}}) {
		t.Errorf("lines %q", f.Lines())
	}
	// GOPHER_PROBES_INIT wins over the file.
	c.ProbesInitContent = "l7 {\"state\":\"stopped\"}"
	if f, err := c.ProbesInit(); err != nil || f.Err() != nil || !reflect.DeepEqual(f.Lines(), []InitLine{{"l7", `{"state":"stopped"}`}}) {
		t.Errorf("content: %+v, %v", f, err)
	}
	c.ProbesInitContent = "\n\nl7"
	if f, err := c.ProbesInit(); err != nil || f.Err() == nil || f.Err().Error() != `env GOPHER_PROBES_INIT: line 3: feature "l7" has no JSON after it` {
		t.Errorf("bad content: %v, %v", err, f.Err())
	}
	c.ProbesInitContent = ""
	c.ProbesInitFile = dir
	if _, err := c.ProbesInit(); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory as file: %v", err)
	}
}

// TestInitWhitespaceOneDefinition: the reader and the writer agree on what
// whitespace is (fuzzing found "0\v0 {} " read as feature "0\v0", which the
// writer then refused).
func TestInitWhitespaceOneDefinition(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"0\v0 {} ", `line 1: 0: invalid JSON: invalid character '{' after top-level value`},
		{"tcp\f{}\n", ""},
		{"\vtcp\r{}\f\r\n", ""},
	} {
		lines, err := ParseProbesInit(strings.NewReader(c.src))
		if c.want != "" {
			if err == nil || err.Error() != c.want {
				t.Errorf("%q: error %v, want %s", c.src, err, c.want)
			}
			continue
		}
		if err != nil || len(lines) != 1 || lines[0] != (InitLine{"tcp", "{}"}) {
			t.Errorf("%q: %q, %v", c.src, lines, err)
			continue
		}
		if err := WriteProbesInit(&bytes.Buffer{}, lines); err != nil {
			t.Errorf("%q: the writer refuses what the reader gave: %v", c.src, err)
		}
	}
	for _, f := range []string{"a\vb", "a\fb", "a\rb", "a b", "a\tb"} {
		if err := WriteProbesInit(&bytes.Buffer{}, []InitLine{{f, "{}"}}); err == nil {
			t.Errorf("feature %q written", f)
		}
	}
}

// TestReadProbesInitKeepsEveryLine: every line is an entry with its number
// and its exact text; a line over the length limit does not end the file.
func TestReadProbesInitKeepsEveryLine(t *testing.T) {
	long := "tcp {\"a\":\"" + strings.Repeat("x", maxInitLine) + "\"}"
	src := "# c\r\n\nflamegraph {\"state\": \"running\"}\r\n" + long + "\nbogus\nsocket {}"
	f, err := ReadProbesInit("p.init", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		num               int
		raw               string
		feature, err      string
		skipped, hasProbe bool
	}
	want := []row{
		{1, "# c\r", "", "", true, false},
		{2, "", "", "", true, false},
		{3, "flamegraph {\"state\": \"running\"}\r", "flamegraph", "", false, true},
		{4, long, "", fmt.Sprintf("line 4: longer than %d bytes", maxInitLine), false, false},
		{5, "bogus", "", `line 5: feature "bogus" has no JSON after it`, false, false},
		{6, "socket {}", "socket", "", false, true},
	}
	if len(f.Entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(f.Entries), len(want))
	}
	for i, w := range want {
		e := f.Entries[i]
		got := row{e.Num, e.Raw, "", "", e.Skipped(), e.Probe != nil}
		if e.Probe != nil {
			got.feature = e.Probe.Feature
		}
		if e.Err != nil {
			got.err = e.Err.Error()
		}
		if got != w {
			t.Errorf("entry %d: %.200v, want %.200v", i, got, w)
		}
	}
	if got := f.Err().Error(); got != fmt.Sprintf("p.init:4: longer than %d bytes\np.init:5: feature \"bogus\" has no JSON after it", maxInitLine) {
		t.Errorf("Err %q", got)
	}
	if _, err := ReadProbesInit("big", io.LimitReader(zeros{}, maxInitFile+1)); err == nil || err.Error() != fmt.Sprintf("big: larger than %d bytes", maxInitFile) {
		t.Errorf("oversized file: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

func canonLower(s string) string { return strings.ToLower(s) }

// TestRewriteKeepsWhatWasNotApplied: a save keeps comments, blank lines,
// malformed lines and lines the manager refused as they were; applied
// lines give way to the running configuration, which lands after every
// other line of its feature; run-time-only features are appended.
func TestRewriteKeepsWhatWasNotApplied(t *testing.T) {
	src := "# gala-gopher settings\r\n" +
		"\n" +
		"flamegraph {\"cmd\": {\"probe\": [\"oncpu\"]}, \"state\": \"running\"}\n" +
		"TCP {\"cmd\":{\"probe\":[\"tcp_rtt\"]},\"blacklist\":{},\"state\":\"running\"}\n" +
		"baseinfo {not json}\n" +
		"tcp {\"params\":{\"report_period\":7}}\n" +
		"baseinfo {\"cmd\":{\"probe\":[\"cpu\"]},\"state\":\"running\"}\n" +
		"socket {\"state\":\"bogus\"}\n" +
		"  # indented comment"
	f, err := ReadProbesInit("p", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	// What the daemon would report: flamegraph and socket refused by the
	// manager, line 5 malformed, the rest applied.
	for _, n := range []int{4, 6, 7} {
		f.Entries[n-1].Applied = true
	}
	running := []InitLine{
		{"baseinfo", `{"cmd":{"bin":"","probe":["cpu"]},"state":"running"}`},
		{"tcp", `{"blacklist":{},"cmd":{"bin":"","probe":["tcp_rtt"]},"params":{"report_period":7},"state":"running"}`},
		{"socket", `{"blacklist":{},"cmd":{"bin":"","probe":["tcp_socket"]},"params":{"report_period":5},"state":"running"}`},
		{"mycustom", `{"cmd":{"bin":"/opt/my app","probe":[]},"state":"stopped"}`},
	}
	got, probes, err := f.Rewrite(running, canonLower)
	if err != nil {
		t.Fatal(err)
	}
	want := "# gala-gopher settings\r\n" +
		"\n" +
		"flamegraph {\"cmd\": {\"probe\": [\"oncpu\"]}, \"state\": \"running\"}\n" +
		"baseinfo {not json}\n" +
		"tcp {\"blacklist\":{},\"cmd\":{\"bin\":\"\",\"probe\":[\"tcp_rtt\"]},\"params\":{\"report_period\":7},\"state\":\"running\"}\n" +
		"baseinfo {\"cmd\":{\"bin\":\"\",\"probe\":[\"cpu\"]},\"state\":\"running\"}\n" +
		"socket {\"state\":\"bogus\"}\n" +
		"socket {\"blacklist\":{},\"cmd\":{\"bin\":\"\",\"probe\":[\"tcp_socket\"]},\"params\":{\"report_period\":5},\"state\":\"running\"}\n" +
		"  # indented comment\n" +
		"mycustom {\"cmd\":{\"bin\":\"/opt/my\\u0020app\",\"probe\":[]},\"state\":\"stopped\"}\n"
	if string(got) != want {
		t.Errorf("rewrote\n%s\nwant\n%s", got, want)
	}
	if probes != 6 {
		t.Errorf("%d probe lines, want 6", probes)
	}
	// Nothing applied and nothing running: the file comes back unchanged
	// (with a final newline).
	for i := range f.Entries {
		f.Entries[i].Applied = false
	}
	if got, _, err := f.Rewrite(nil, canonLower); err != nil || string(got) != src+"\n" {
		t.Errorf("unchanged file rewritten as\n%s\n%v", got, err)
	}
	// An absent file gets a header.
	empty := &InitFile{Source: "p"}
	got, probes, err = empty.Rewrite(running[:1], canonLower)
	if err != nil || probes != 1 || string(got) != savedHeader+"baseinfo {\"cmd\":{\"bin\":\"\",\"probe\":[\"cpu\"]},\"state\":\"running\"}\n" {
		t.Errorf("from nothing: %q, %d, %v", got, probes, err)
	}
	if _, _, err := empty.Rewrite([]InitLine{{"t cp", "{}"}}, canonLower); err == nil {
		t.Error("invalid running line written")
	}
}
