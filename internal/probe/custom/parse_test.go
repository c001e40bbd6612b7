package custom

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

func strs(f [][]byte) []string {
	out := make([]string, len(f))
	for i, b := range f {
		out[i] = string(b)
	}
	return out
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		in     string
		kind   lineKind
		fields []string
	}{
		{"", lineEmpty, nil},
		{"\r", lineEmpty, nil},
		{"|tcp_metric|1|a||3|", lineTable, []string{"tcp_metric", "1", "a", "", "3"}},
		{"|tcp_metric|1|a||3|\r", lineTable, []string{"tcp_metric", "1", "a", "", "3"}},
		{"|t|1|2", lineTable, []string{"t", "1", "2"}}, // trailing '|' optional
		{"|t|1||", lineTable, []string{"t", "1", ""}},
		{"|", lineTable, []string{""}},
		{"||", lineTable, []string{""}},
		{"|event|cpu|cpu|total_used_per|||||||WARN|13|msg|", lineEvent,
			[]string{"cpu", "cpu", "total_used_per", "", "", "", "", "", "", "WARN", "13", "msg"}},
		{"|log|1700000000000|\"WARN\"|13|{}|{}|\"b\"|", lineLog, []string{"1700000000000", "\"WARN\"", "13", "{}", "{}", "\"b\""}},
		{"|events|x|", lineTable, []string{"events", "x"}},
		{"[WARN] hot", lineText, []string{"[WARN] hot"}},
		{" |t|1|", lineText, []string{" |t|1|"}},
	} {
		kind, f := parseLine([]byte(tc.in))
		if kind != tc.kind {
			t.Errorf("%q: kind %v, want %v", tc.in, kind, tc.kind)
			continue
		}
		if tc.fields == nil && f == nil {
			continue
		}
		if got := strs(f); !reflect.DeepEqual(got, tc.fields) {
			t.Errorf("%q: fields %q, want %q", tc.in, got, tc.fields)
		}
	}
}

var testNow = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func split(line string) [][]byte {
	_, f := parseLine([]byte(line))
	return f[1:]
}

func TestBuildRecord(t *testing.T) {
	tables := testTables(t)
	tt := tableByName(tables, "custom_test")
	r, err := buildRecord(tt, split("|custom_test|alpha|h1|42.5|7|3 10 1 100 4 1000 5 1234.5 900|"), testNow, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Table != tt || !r.Time.Equal(testNow) || r.Period != 5*time.Second {
		t.Fatalf("record header %v %v %v", r.Table.Name, r.Time, r.Period)
	}
	want := []table.Value{
		{Set: true, Str: "alpha"},
		{Set: true, Str: "h1"},
		{Set: true, Num: 42.5},
		{Set: true, Num: 7},
		{Set: true, Hist: &table.Histogram{Bounds: []float64{10, 100, 1000}, Counts: []uint64{1, 3, 1, 0}, Sum: 1234.5, Max: 900}},
	}
	if !reflect.DeepEqual(r.Values, want) {
		t.Fatalf("values\n got %+v\nwant %+v", r.Values, want)
	}

	// Empty and "(null)" fields other than the first key are unset.
	r, err = buildRecord(tt, split("|custom_test|beta|(null)|-1e3|||"), testNow, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want = []table.Value{{Set: true, Str: "beta"}, {}, {Set: true, Num: -1000}, {}, {}}
	if !reflect.DeepEqual(r.Values, want) {
		t.Fatalf("values\n got %+v\nwant %+v", r.Values, want)
	}

	for _, tc := range []struct {
		line string
		want error
	}{
		{"|custom_test|a|h|1|2|", errFieldCount},
		{"|custom_test|a|h|1|2|1 5 1 1 1|x|", errFieldCount},
		{"|custom_test||h|1|2||", errEmptyKey},
		{"|custom_test|(null)|h|1|2||", errEmptyKey},
		{"|custom_test|a|h|1.2.3|2||", errBadValue},
		{"|custom_test|a|h|1|0x|", errFieldCount},
		{"|custom_test|a|h|1|ten||", errBadValue},
		{"|custom_test|a|h|1|2|2 10 1 5 2 3 4|", errBadValue},
	} {
		_, err := buildRecord(tt, split(tc.line), testNow, time.Minute)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.line, err, tc.want)
		}
	}
}

func TestParseHistogram(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want table.Histogram
	}{
		{"1 100 0 0 0", table.Histogram{Bounds: []float64{100}, Counts: []uint64{0, 0}}},
		{"3 10 1 100 4 1000 5 1234.5 900", table.Histogram{Bounds: []float64{10, 100, 1000}, Counts: []uint64{1, 3, 1, 0}, Sum: 1234.5, Max: 900}},
		// gala-gopher's l7 buckets, in ns.
		{"2 10000000 2 50000000 2 3e6 1.5e6", table.Histogram{Bounds: []float64{1e7, 5e7}, Counts: []uint64{2, 0, 0}, Sum: 3e6, Max: 1.5e6}},
		// A last bound of +Inf is the overflow bucket.
		{"3 1 1 2 1 +Inf 4 9 5", table.Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 0, 3}, Sum: 9, Max: 5}},
		{"  2\t1 1  2 3 4 2 ", table.Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 2, 0}, Sum: 4, Max: 2}},
	} {
		h, err := parseHistogram(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(*h, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.in, *h, tc.want)
		}
	}
	for _, bad := range []string{
		"", "0", "0 1 2", "-1 1 1 1 1", "x 1 1 1 1", "5000 1 1",
		"2 10 1 100 4 1",           // one number short
		"1 10 1 5 5 5",             // one number too many
		"2 100 1 10 4 1 1",         // bounds not increasing
		"2 10 1 10 4 1 1",          // equal bounds
		"2 10 4 100 1 1 1",         // cumulative counts decrease
		"1 10 -1 0 0",              // negative count
		"1 10 1.5 0 0",             // fractional count
		"1 NaN 1 0 0",              // NaN bound
		"1 -Inf 1 0 0",             // -Inf bound
		"1 10 1 x 0", "1 10 1 0 y", // sum, max
		"99999999999999999999 1 1 1 1",
	} {
		if h, err := parseHistogram(bad); err == nil {
			t.Errorf("%q: accepted as %+v", bad, *h)
		}
	}
}

func TestParseEvent(t *testing.T) {
	_, f := parseLine([]byte("|event|tcp_link|12_client_1.1.1.1_2.2.2.2_80_2|tcp_oom|12|java|CIP(1.1.1.1), SIP(2.2.2.2:80)|c0ffee|pod1|eth0|WARN|13|Wed Jul  1 12:00:00 2026 WARN Entity(x) TCP out of memory(3).|"))
	e, err := parseEvent(f, testNow)
	if err != nil {
		t.Fatal(err)
	}
	want := event.Event{
		Time: testNow, Entity: "tcp_link", EntityID: "12_client_1.1.1.1_2.2.2.2_80_2", Metric: "tcp_oom",
		PID: 12, Comm: "java", IP: "CIP(1.1.1.1), SIP(2.2.2.2:80)", ContainerID: "c0ffee", PodID: "pod1",
		Device: "eth0", Severity: event.SeverityWarn,
		Message: "Wed Jul  1 12:00:00 2026 WARN Entity(x) TCP out of memory(3).",
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("\n got %+v\nwant %+v", e, want)
	}

	// A body with '|' is kept whole; the number decides for unknown texts;
	// an empty pid is 0.
	_, f = parseLine([]byte("|event|cpu|cpu|total_used_per|||||||NOTICE|10|a|b|"))
	e, err = parseEvent(f, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if e.Message != "a|b" || e.Severity != 10 || e.PID != 0 {
		t.Fatalf("got %+v", e)
	}
	// The text wins over a mismatching number.
	_, f = parseLine([]byte("|event|cpu|cpu|m|||||||ERROR|13|x|"))
	if e, _ = parseEvent(f, testNow); e.Severity != event.SeverityError {
		t.Fatalf("severity %v", e.Severity)
	}

	for _, bad := range []string{
		"|event|cpu|cpu|m|||||||WARN|13|",     // 11 fields
		"|event||cpu|m|||||||WARN|13|x|",      // no entity
		"|event|cpu||m|||||||WARN|13|x|",      // no id
		"|event|cpu|cpu||||||||WARN|13|x|",    // no metric
		"|event|cpu|cpu|m|-1||||||WARN|13|x|", // bad pid
		"|event|cpu|cpu|m|1x||||||WARN|13|x|", // bad pid
		"|event|cpu|cpu|m|||||||BAD|99|x|",    // no severity
		"|event|cpu|cpu|m|||||||||x|",         // no severity
	} {
		_, f := parseLine([]byte(bad))
		if _, err := parseEvent(f, testNow); !errors.Is(err, errBadEvent) {
			t.Errorf("%s: err %v", bad, err)
		}
	}
}

func TestTextLevel(t *testing.T) {
	for _, tc := range []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[INFO] started", slog.LevelInfo, "started"},
		{"[WARN]  hot ", slog.LevelWarn, "hot"},
		{"[ERROR]boom", slog.LevelError, "boom"},
		{"[DEBUG] x", slog.LevelDebug, "[DEBUG] x"},
		{"plain text\r", slog.LevelDebug, "plain text"},
		{" [WARN] indented", slog.LevelDebug, " [WARN] indented"},
	} {
		l, m := textLevel([]byte(tc.in))
		if l != tc.level || m != tc.msg {
			t.Errorf("%q: %v %q, want %v %q", tc.in, l, m, tc.level, tc.msg)
		}
	}
}

// TestReaderConsume feeds a byte stream through the line reader: limits,
// unknown tables, CRLF and an unterminated last line.
func TestReaderConsume(t *testing.T) {
	tables := testTables(t)
	p := New(testFeature("/nonexistent/myprobe"), tables).(*Probe)
	p.period.Store(int64(30 * time.Second))
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	r := &reader{p: p, rt: rt, log: rt.Logger(), warned: map[error]bool{}}

	maxLine := "|custom_cfg|k|" + strings.Repeat("x", maxLineLen-len("|custom_cfg|k||1|")) + "|1|"
	if len(maxLine) != maxLineLen {
		t.Fatalf("fixture is %d bytes", len(maxLine))
	}
	var in bytes.Buffer
	in.WriteString("|custom_cfg|a||1|\r\n")
	in.WriteString(maxLine + "\n")                                                 // exactly the limit: kept
	in.WriteString("|custom_cfg|big|" + strings.Repeat("y", maxLineLen) + "|2|\n") // over: dropped
	in.WriteString(strings.Repeat("z", 3*maxLineLen) + "\n")                       // far over, spans reads: dropped once
	in.WriteString("|unknown_table|k|1|\n")
	in.WriteString("|custom_cfg|b||x|\n") // bad number
	in.WriteString("\n")
	in.WriteString("|log|1|\"WARN\"|13|{}|{}|\"b\"|\n")
	in.WriteString("|log|1|WARN|13|{}|{}|\"b\"|\n") // severity text not JSON
	in.WriteString("|event|custom_ent|e1|value|7|sh|||||WARN|13|body|\n")
	in.WriteString("|custom_cfg|c||3|\n")
	in.WriteString("|custom_cfg|partial||4") // no newline: the probe died mid-line
	r.consume(&in)

	var keys []string
	for _, rec := range rt.Records() {
		keys = append(keys, rec.Str("id"))
		if rec.Period != 30*time.Second {
			t.Errorf("period %v", rec.Period)
		}
	}
	if want := []string{"a", "k", "c"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("records %q, want %q", keys, want)
	}
	if evs := rt.Events(); len(evs) != 1 || evs[0].EntityID != "e1" || evs[0].PID != 7 {
		t.Fatalf("events %+v", evs)
	}
	if ls := rt.LogRecords(); len(ls) != 1 || string(ls[0].Timestamp) != "1" || string(ls[0].Body) != `"b"` {
		t.Fatalf("log records %+v", ls)
	}
	// too long x2, unknown table, bad number, bad log, unterminated.
	if n := rt.ErrorCount(); n != 6 {
		t.Fatalf("errors %d, want 6", n)
	}
	warns := 0
	logs := rt.LogEntries()
	for _, l := range logs {
		if l.Level == slog.LevelWarn {
			warns++
		}
	}
	// One per reason (too long, unknown, bad value, bad log, unterminated).
	if warns != 5 {
		t.Fatalf("%d warnings, want 5: %+v", warns, logs)
	}
}

// FuzzParseLine checks that no input panics the line parser or the record
// and event builders, and that a table line splits back into itself.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"|custom_test|alpha|h1|42.5|7|3 10 1 100 4 1000 5 1234.5 900|",
		"|custom_test|beta||0.25|||",
		"|custom_cfg|a|{\"probe\":[]}|1|",
		"|custom_test|a|h|1|2|3 1 1 2 1 +Inf 4 9 5|",
		"|event|custom_ent|alpha|value|123|myproc|10.0.0.1|cid|pod|eth0|WARN|13|too high|",
		"|event|cpu|cpu|m|||||||NOTICE|10|a|b|",
		"|log|1|\"WARN\"|13|{}|{}|\"b\"|",
		"[WARN] warming up",
		"|", "||", "", "\r", "|t|1||\r",
	} {
		f.Add([]byte(s))
	}
	tables := testTables(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		kind, fields := parseLine(line)
		switch kind {
		case lineEmpty:
			if len(bytes.TrimSuffix(line, []byte{'\r'})) != 0 {
				t.Fatalf("%q classified empty", line)
			}
		case lineText:
			if len(fields) != 1 || line[0] == '|' {
				t.Fatalf("%q: text with %d fields", line, len(fields))
			}
			textLevel(fields[0])
		case lineTable, lineEvent, lineLog:
			body := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\r'})[1:], []byte{'|'})
			all := fields
			if kind != lineTable {
				tag := map[lineKind]string{lineEvent: "event", lineLog: "log"}[kind]
				all = append([][]byte{[]byte(tag)}, fields...)
			}
			joined := bytes.Join(all, []byte{'|'})
			if !bytes.Equal(joined, body) {
				t.Fatalf("%q: fields %q do not rejoin", line, fields)
			}
			if kind == lineEvent {
				if e, err := parseEvent(fields, testNow); err == nil && (e.Entity == "" || e.Severity == 0) {
					t.Fatalf("%q: accepted %+v", line, e)
				}
			}
			if kind == lineTable {
				for _, tb := range tables {
					rec, err := buildRecord(tb, fields[1:], testNow, time.Minute)
					if err != nil {
						continue
					}
					if len(rec.Values) != len(tb.Fields) || !rec.Values[0].Set || rec.Values[0].Str == "" {
						t.Fatalf("%q: bad record %+v", line, rec.Values)
					}
					checkHistograms(t, rec)
				}
			}
		}
	})
}

func checkHistograms(t *testing.T, rec *table.Record) {
	for _, v := range rec.Values {
		h := v.Hist
		if h == nil {
			continue
		}
		if len(h.Counts) != len(h.Bounds)+1 {
			t.Fatalf("histogram %+v: %d counts for %d bounds", h, len(h.Counts), len(h.Bounds))
		}
		for i := 1; i < len(h.Bounds); i++ {
			if !(h.Bounds[i] > h.Bounds[i-1]) || math.IsNaN(h.Bounds[i]) {
				t.Fatalf("histogram bounds %v", h.Bounds)
			}
		}
	}
}
