package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

var testHost = Host{UUID: "2c1c455d-24a5-897c-ea11-bc08f2d510da", IP: "192.168.128.123", Hostname: "node-1"}

// sinkRecords are the records of the metric channel golden files: a full
// record with a histogram, one with an unset gauge and a start_time label,
// and a second period of the first.
func sinkRecords() []*table.Record {
	r1 := linkRecord(t0, "1", "client", "we\"ird\\na\nme", 100, 30.5, 5, 20, 200)
	r2 := linkExtraRecord(t0, "1")
	r2.Values[2] = table.Value{} // rx_bytes not measured
	r2.Extra = []table.Label{{Name: "start_time", Value: "123456"}, {Name: "tgid", Value: "ignored repeat"}, machine}
	r3 := linkRecord(t0.Add(period), "1", "client", "java", 150, 31, 7, 70)
	return []*table.Record{r1, r2, r3}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeRecords writes sinkRecords to s, closes it and returns the file.
func writeRecords(t *testing.T, s MetricSink, err error, path string) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sinkRecords() {
		if err := s.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, path)
}

func TestMetricTextSink(t *testing.T) {
	dir := t.TempDir()
	s, err := NewMetricTextSink(dir, 100)
	got := writeRecords(t, s, err, filepath.Join(dir, MetricLogFile))
	golden(t, "metrics.log", got)
	// The lines are Prometheus text: the parser must accept them.
	parseExposition(t, got)
}

func TestMetricJSONSink(t *testing.T) {
	dir := t.TempDir()
	s, err := NewMetricJSONSink(dir, 100)
	got := writeRecords(t, s, err, filepath.Join(dir, MetricJSONFile))
	golden(t, "metrics.json", got)
	for i, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("line %d is not JSON: %v", i+1, err)
		}
	}
}

func TestEventLogSink(t *testing.T) {
	dir := t.TempDir()
	s, err := NewEventLogSink(dir, testHost, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	events := []event.Event{
		{Time: t0, Entity: "cpu", EntityID: "cpu", Metric: "total_used_per", Severity: event.SeverityWarn,
			Message: "Too high cpu utilization(93.20%)."},
		{Time: t0.Add(time.Second), Entity: "fs", EntityID: "/boot/efi", Metric: "UsePer",
			Message: "Too many Blocks used(91%)."},
		{Time: t0.Add(2 * time.Second), Entity: "tcp_link", EntityID: "1234_client_10.0.0.1_10.0.0.2_8080_2",
			Metric: "sk_drops", PID: 1234, Comm: "java", IP: "CIP(10.0.0.1), SIP(10.0.0.2:8080)",
			ContainerID: "0123456789ab", PodID: "pod-uid-1", Device: "eth0", Severity: event.SeverityError,
			Message: "Number of lost packets in the TCP protocol stack(12) <&>."},
	}
	for _, e := range events {
		if err := s.WriteEvent(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, filepath.Join(dir, EventLogFile))
	golden(t, "event.log", got)

	// The fields every consumer relies on, checked independently of the file.
	var e struct {
		Timestamp  int64
		EventID    string `json:"event_id"`
		Attributes struct {
			EntityID string `json:"entity_id"`
		}
		Body string
	}
	first := bytes.SplitN(got, []byte{'\n'}, 2)[0]
	if err := json.Unmarshal(first, &e); err != nil {
		t.Fatal(err)
	}
	wantEntity := testHost.UUID + "-" + testHost.IP + "_cpu_cpu"
	if e.Timestamp != t0.UnixMilli() || e.Attributes.EntityID != wantEntity ||
		e.EventID != fmt.Sprintf("%d_%s", t0.UnixMilli(), wantEntity) {
		t.Errorf("ids: %+v", e)
	}
	if want := "Mon Nov  2 09:05:07 2026 WARN Entity(cpu) Too high cpu utilization(93.20%)."; e.Body != want {
		t.Errorf("Body %q, want %q", e.Body, want)
	}
}

func TestMetaLogSink(t *testing.T) {
	dir := t.TempDir()
	s, err := NewMetaLogSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	tables := []*table.Table{table.TcpMetric, table.SystemProc, table.ContainerCpu, table.SystemCpu}
	if err := s.WriteMeta(t0, tables); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, filepath.Join(dir, MetaLogFile))
	golden(t, "meta.log", got)

	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != len(tables) {
		t.Fatalf("%d lines for %d tables", len(lines), len(tables))
	}
	var proc struct {
		Keys, Labels, Metrics []string
	}
	if err := json.Unmarshal([]byte(lines[1]), &proc); err != nil {
		t.Fatal(err)
	}
	if want := "hostname pgid ppid comm container_id container_name container_image pod_id pod pod_namespace cmdline start_time"; strings.Join(proc.Labels, " ") != want {
		t.Errorf("system_proc labels %v, want %s", proc.Labels, want)
	}
	if strings.Join(proc.Keys, " ") != "machine_id tgid" {
		t.Errorf("system_proc keys %v", proc.Keys)
	}
}

func TestRotatingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.log")
	w, err := openRotating(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	line := func(i int) []byte { return fmt.Appendf(nil, "line %02d %s\n", i, strings.Repeat("x", 21)) } // 30 bytes
	for i := range 10 {
		if _, err := w.Write(line(i)); err != nil {
			t.Fatal(err)
		}
	}
	// 3 lines (90 bytes) fit per file: 0-2, 3-5, 6-8 rotated out in turn, 9 live.
	cur, old := readFile(t, path), readFile(t, path+".1")
	if want := string(line(9)); string(cur) != want {
		t.Errorf("live file %q, want %q", cur, want)
	}
	if want := string(line(6)) + string(line(7)) + string(line(8)); string(old) != want {
		t.Errorf("backup %q, want %q", old, want)
	}
	if _, err := os.Stat(path + ".2"); !os.IsNotExist(err) {
		t.Error("more than one backup")
	}
	// A line larger than the limit still lands whole, alone.
	big := bytes.Repeat([]byte("y"), 150)
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, big) {
		t.Errorf("oversized write: live file has %d bytes", len(got))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Error("write after Close succeeded")
	}

	// Reopening appends and counts what is already there.
	w, err = openRotating(path, 160)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(line(10)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); len(got) != 30 || !bytes.Equal(readFile(t, path+".1"), big) {
		t.Errorf("after reopen: live %q", got)
	}
}

func TestMetricFileLimit(t *testing.T) {
	// metric_total_size covers the live file and its backup together.
	if got := metricFileLimit(100); got != 50*MB {
		t.Errorf("limit %d, want %d", got, 50*MB)
	}
}

// TestMetaNamesListedOnce: no built-in table's metadata names a key or
// label twice. system_os has its own hostname label, which gala-gopher's
// metadata also lists first for every table.
func TestMetaNamesListedOnce(t *testing.T) {
	for _, tbl := range table.Builtin() {
		b, err := MarshalMeta(t0, tbl)
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Keys, Labels []string }
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, n := range append(m.Keys, m.Labels...) {
			if seen[n] {
				t.Errorf("%s: %q listed twice in %s", tbl.Name, n, b)
			}
			seen[n] = true
		}
		if tbl == table.SystemOs {
			if got := strings.Join(m.Keys, " "); got != "machine_id os_version" {
				t.Errorf("system_os keys %q", got)
			}
			if got, want := strings.Join(m.Labels, " "), "hostname kversion cpu_num memory_MB ip_addr host_type clock_ticks os_btime"; got != want {
				t.Errorf("system_os labels %q, want %q", got, want)
			}
		}
	}
}
