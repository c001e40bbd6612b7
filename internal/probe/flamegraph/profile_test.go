package flamegraph

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func testProc() *procProfile {
	return &procProfile{pid: 42, comm: "app", stacks: map[string]uint64{
		"main;burn_a":                    30,
		"main;burn_b":                    10,
		"main;read;ksys_read_[k]":        5,
		"main":                           2,
		"[lost user stack];schedule_[k]": 1,
	}}
}

func TestFoldedRoundTrip(t *testing.T) {
	pp := testProc()
	lines := pp.lines()
	if lines[0].frames[0] != "[42]app" {
		t.Fatalf("first frame %q", lines[0].frames[0])
	}
	var buf bytes.Buffer
	if err := writeFolded(&buf, lines); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "[42]app;main;burn_a 30\n") {
		t.Errorf("folded:\n%s", buf.String())
	}
	back, err := parseFolded(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, lines) {
		t.Errorf("round trip:\n%v\n%v", back, lines)
	}
	for _, bad := range []string{"a;b\n", "a;b x\n"} {
		if _, err := parseFolded(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := frameName("operator<<(a; b)"); got != "operator<<(a:_b)" {
		t.Errorf("frameName = %q", got)
	}
}

func TestPprof(t *testing.T) {
	pp := testProc()
	start := time.Unix(1700000000, 0)
	prof := toPprof(onCPU, []*procProfile{pp}, 10*time.Millisecond, start, time.Minute)
	var buf bytes.Buffer
	if err := prof.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var samples, ns int64
	byLeaf := map[string]int64{}
	for _, s := range back.Sample {
		samples += s.Value[0]
		ns += s.Value[1]
		byLeaf[s.Location[0].Line[0].Function.Name] += s.Value[0]
		if s.NumLabel["pid"][0] != 42 || s.Label["comm"][0] != "app" {
			t.Errorf("labels %v %v", s.NumLabel, s.Label)
		}
	}
	if samples != int64(pp.total()) || ns != samples*int64(10*time.Millisecond) {
		t.Errorf("samples %d ns %d, folded total %d", samples, ns, pp.total())
	}
	if byLeaf["burn_a"] != 30 || byLeaf["burn_b"] != 10 || byLeaf["main"] != 2 || byLeaf["ksys_read_[k]"] != 5 {
		t.Errorf("by leaf %v", byLeaf)
	}
	if back.TimeNanos != start.UnixNano() || back.DurationNanos != int64(time.Minute) || back.Period != int64(10*time.Millisecond) {
		t.Errorf("time %d duration %d period %d", back.TimeNanos, back.DurationNanos, back.Period)
	}
	off := toPprof(offCPU, []*procProfile{pp}, 0, start, time.Minute)
	if err := off.CheckValid(); err != nil || off.SampleType[0].Unit != "microseconds" {
		t.Errorf("offcpu profile: %v, %v", err, off.SampleType)
	}
}

// svgDoc is what the tests read of an SVG flame graph.
type svgDoc struct {
	XMLName xml.Name
	Frames  []struct {
		Title string `xml:"title"`
		Rect  struct {
			X     float64 `xml:"x,attr"`
			Y     float64 `xml:"y,attr"`
			Width float64 `xml:"width,attr"`
		} `xml:"rect"`
	} `xml:"g>g"`
}

func TestSVG(t *testing.T) {
	pp := testProc()
	var buf bytes.Buffer
	if err := writeSVG(&buf, onCPU, "On-CPU <test> & more", pp.lines()); err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	width := map[string]float64{}
	y := map[string]float64{}
	for _, f := range doc.Frames {
		name := f.Title[:strings.LastIndex(f.Title, " (")]
		width[name] = f.Rect.Width
		y[name] = f.Rect.Y
	}
	// 48 samples over 1180 px.
	const px = (svgWidth - 2*svgPad) / 48
	for name, n := range map[string]float64{"all": 48, "[42]app": 48, "main": 47, "burn_a": 30, "burn_b": 10, "read": 5, "ksys_read_[k]": 5} {
		if d := width[name] - n*px; d > 0.01 || d < -0.01 {
			t.Errorf("%s: width %.2f, want %.2f", name, width[name], n*px)
		}
	}
	if !(y["all"] > y["main"] && y["main"] > y["burn_a"] && y["burn_a"] == y["burn_b"]) {
		t.Errorf("rows: %v", y)
	}
	if !strings.Contains(buf.String(), "burn_a (30 samples, 62.50%)") {
		t.Error("no hover title for burn_a")
	}
	var empty bytes.Buffer
	if err := writeSVG(&empty, offCPU, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(empty.Bytes(), &doc); err != nil {
		t.Errorf("empty graph: %v", err)
	}
}

func TestFitText(t *testing.T) {
	if got := fitText("short", 200); got != "short" {
		t.Errorf("%q", got)
	}
	if got := fitText("a_rather_long_function_name", 60); !strings.HasSuffix(got, "..") || len(got) > 8 {
		t.Errorf("%q", got)
	}
	if got := fitText("x", 10); got != "" {
		t.Errorf("%q", got)
	}
}

func TestOutputPathsAndPrune(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 4, 5, 0, time.Local)
	folded, svg, pb := outputPaths(offCPU, 7, "/out", "/flame", at)
	if folded != "/flame/offcpu/tmp_7" || svg != "/out/offcpu/2026-11-27/2026-11-27-03-04-05-7.svg" ||
		pb != "/out/offcpu/2026-11-27/2026-11-27-03-04-05-7.pb.gz" {
		t.Errorf("%s %s %s", folded, svg, pb)
	}
	dir := t.TempDir()
	for _, d := range []string{"2026-11-10", "2026-11-20", "2026-11-27", "notadate"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := prune(dir, at.Add(-retention)); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if !reflect.DeepEqual(left, []string{"2026-11-20", "2026-11-27", "notadate"}) {
		t.Errorf("left %v", left)
	}
}

func TestWriteOutputs(t *testing.T) {
	out, flame := t.TempDir(), t.TempDir()
	now := time.Now()
	pp := testProc()
	if err := writeOutputs(onCPU, pp, out, flame, 10*time.Millisecond, now.Add(-time.Minute), now); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(flame, "oncpu", "tmp_"+strconv.Itoa(pp.pid)))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := parseFolded(bytes.NewReader(b))
	if err != nil || len(lines) != len(pp.stacks) {
		t.Errorf("%d lines, %v", len(lines), err)
	}
	checkOutputs(t, out, onCPU, pp.pid, lines, "burn_a")
}

// FuzzFolded: whatever parseFolded accepts, writeFolded writes back to
// something it parses to the same lines.
func FuzzFolded(f *testing.F) {
	f.Add("[1]a;main;f 3\n[1]a 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := parseFolded(strings.NewReader(s))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := writeFolded(&buf, lines); err != nil {
			t.Fatal(err)
		}
		back, err := parseFolded(&buf)
		if err != nil || len(back) != len(lines) {
			t.Fatalf("%q: %v, %d lines back of %d", s, err, len(back), len(lines))
		}
		_ = buildTree(lines)
	})
}

// TestWriteLiveOutputs: a mem_glibc process that allocated nothing in the
// window but holds live blocks gets the live files and a pprof profile
// with the in-use values, and no allocation files.
func TestWriteLiveOutputs(t *testing.T) {
	out, flame := t.TempDir(), t.TempDir()
	now := time.Now()
	pp := &procProfile{pid: 42, comm: "app", stacks: map[string]uint64{}, live: map[string]live{"main;leak": {12000, 3}}}
	if err := writeOutputs(memGlibc, pp, out, flame, 10*time.Millisecond, now.Add(-time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(flame, "mem_glibc", "tmp_42")); err == nil {
		t.Error("allocation folded file written without allocations")
	}
	lines := readFolded(t, filepath.Join(flame, "mem_glibc", "tmp_42"+liveSuffix))
	if len(lines) != 1 || strings.Join(lines[0].frames, ";") != "[42]app;main;leak" || lines[0].count != 12000 {
		t.Errorf("live lines %v", lines)
	}
	checkSVG(t, out, memGlibc, 42, liveSuffix+".svg", "leak")
	if v := pprofValues(readPprof(t, out, memGlibc, 42), "leak"); v != [4]int64{0, 0, 3, 12000} {
		t.Errorf("pprof values %v", v)
	}
}
