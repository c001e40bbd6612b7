package config

import (
	"bytes"
	"errors"
	"fmt"
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

	if lines, err := c.ProbesInit(); err != nil || lines != nil {
		t.Errorf("missing file: %v, %v", lines, err)
	}
	if err := os.WriteFile(c.ProbesInitFile, []byte("# x\ntcp {\"state\": \"running\"}\nproc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ProbesInit(); err == nil || err.Error() != c.ProbesInitFile+`:3: feature "proc" has no JSON after it` {
		t.Errorf("bad file: %v", err)
	}
	if err := os.WriteFile(c.ProbesInitFile, []byte("tcp {\"state\": \"running\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if lines, err := c.ProbesInit(); err != nil || !reflect.DeepEqual(lines, []InitLine{{"tcp", `{"state":"running"}`}}) {
		t.Errorf("file: %q, %v", lines, err)
	}
	// GOPHER_PROBES_INIT wins over the file.
	c.ProbesInitContent = "l7 {\"state\":\"stopped\"}"
	if lines, err := c.ProbesInit(); err != nil || !reflect.DeepEqual(lines, []InitLine{{"l7", `{"state":"stopped"}`}}) {
		t.Errorf("content: %q, %v", lines, err)
	}
	c.ProbesInitContent = "\n\nl7"
	if _, err := c.ProbesInit(); err == nil || err.Error() != `env GOPHER_PROBES_INIT: line 3: feature "l7" has no JSON after it` {
		t.Errorf("bad content: %v", err)
	}
	c.ProbesInitContent = ""
	c.ProbesInitFile = dir
	if _, err := c.ProbesInit(); err == nil || !strings.HasPrefix(err.Error(), dir+": ") {
		t.Errorf("directory as file: %v", err)
	}
}
