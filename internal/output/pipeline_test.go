package output

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// memSink records what it is given and fails when told to.
type memSink struct {
	mu      sync.Mutex
	records []*table.Record
	events  []event.Event
	metas   [][]*table.Table
	// metaTimes are the timestamps of the metas rounds.
	metaTimes []time.Time
	fail      bool
	closed    bool
}

var errSinkDown = errors.New("sink down")

func (s *memSink) WriteRecord(r *table.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errSinkDown
	}
	s.records = append(s.records, r)
	return nil
}

func (s *memSink) WriteEvent(e event.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errSinkDown
	}
	s.events = append(s.events, e)
	return nil
}

func (s *memSink) WriteMeta(ts time.Time, tables []*table.Table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errSinkDown
	}
	s.metas = append(s.metas, tables)
	s.metaTimes = append(s.metaTimes, ts)
	return nil
}

func (s *memSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *memSink) metaRounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.metas)
}

// collectText renders the named families of c in the text format, with a
// leading newline to match the raw strings of the tests.
func collectText(t *testing.T, c prometheus.Collector, names ...string) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteByte('\n')
	for _, f := range fams {
		if slices.Contains(names, f.GetName()) {
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

func TestPipelineRecords(t *testing.T) {
	p, _, clock := newTestPipeline(t, table.Limits{MaxRecords: 2, Timeout: 10 * time.Second})
	good, bad := &memSink{}, &memSink{fail: true}
	p.AddMetricSink("json", good)
	p.AddMetricSink("kafka", bad)

	p.Record(linkRecord(t0, "1", "client", "a", 1, 1), nil)
	p.Record(linkRecord(t0, "2", "client", "a", 1, 1), nil)
	p.Record(linkRecord(t0, "3", "client", "a", 1, 1), nil) // over max_records_num: dropped everywhere
	if len(good.records) != 2 {
		t.Errorf("sink got %d records, want the 2 the store accepted", len(good.records))
	}
	clock.t = t0.Add(11 * time.Second)
	p.store.Expire() // both age out

	want := `
# HELP galago_records_dropped_total Records dropped by the store: refused by an imdb limit (max_tables_num, max_metrics_num, or max_records_num when rows of the current period fill the table; refused rows reach no channel), rows of an earlier period removed early to make room for the current period (max_records_num_evicted), or aged out (record_timeout).
# TYPE galago_records_dropped_total counter
galago_records_dropped_total{reason="max_metrics_num"} 0
galago_records_dropped_total{reason="max_records_num"} 1
galago_records_dropped_total{reason="max_records_num_evicted"} 0
galago_records_dropped_total{reason="max_tables_num"} 0
galago_records_dropped_total{reason="record_timeout"} 2
# HELP galago_records_total Records the probes handed to the output pipeline.
# TYPE galago_records_total counter
galago_records_total 3
# HELP galago_sink_errors_total Failed writes to an output sink; the record, event or metadata is lost for that sink.
# TYPE galago_sink_errors_total counter
galago_sink_errors_total{sink="json"} 0
galago_sink_errors_total{sink="kafka"} 2
# HELP galago_store_records Records currently held by the store.
# TYPE galago_store_records gauge
galago_store_records 0
`
	if got := collectText(t, p, "galago_records_dropped_total", "galago_records_total", "galago_sink_errors_total", "galago_store_records"); got != want {
		t.Errorf("self-metrics:\n%s\nwant:\n%s", got, want)
	}
	if err := p.Close(); err != nil || !good.closed || !bad.closed {
		t.Errorf("Close: %v, closed %v %v", err, good.closed, bad.closed)
	}
}

func TestPipelineEvents(t *testing.T) {
	p, _, clock := newTestPipeline(t, table.Limits{}) // event.timeout one minute
	sink := &memSink{}
	p.AddEventSink("logs", sink)
	cpu := event.Event{Entity: "cpu", EntityID: "cpu", Metric: "total_used_per", Message: "Too high"}
	p.Event(cpu) // stamped with the clock
	clock.t = t0.Add(30 * time.Second)
	p.Event(cpu) // repeat inside the window
	mem := event.Event{Entity: "mem", EntityID: "/proc/meminfo", Metric: "util", Message: "Too high mem"}
	p.Event(mem)
	clock.t = t0.Add(61 * time.Second)
	p.Event(cpu) // window over

	if len(sink.events) != 3 {
		t.Fatalf("sink got %d events, want 3", len(sink.events))
	}
	if !sink.events[0].Time.Equal(t0) || !sink.events[2].Time.Equal(t0.Add(61*time.Second)) {
		t.Errorf("event times %v, %v", sink.events[0].Time, sink.events[2].Time)
	}
	want := `
# HELP galago_events_suppressed_total Abnormal events suppressed as repeats inside the event.timeout window.
# TYPE galago_events_suppressed_total counter
galago_events_suppressed_total 1
# HELP galago_events_total Abnormal events passed to the event sinks.
# TYPE galago_events_total counter
galago_events_total 3
`
	if got := collectText(t, p, "galago_events_suppressed_total", "galago_events_total"); got != want {
		t.Errorf("self-metrics:\n%s\nwant:\n%s", got, want)
	}
}

// manualClock is a Now and a Tick the test drives: Advance moves the time
// and fires the ticker when a period has passed.
type manualClock struct {
	mu     sync.Mutex
	t      time.Time
	period time.Duration
	next   time.Time
	c      chan time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) tick(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.period, c.next, c.c = d, c.t.Add(d), make(chan time.Time)
	return c.c, func() {}
}

// advance moves the clock by d, firing the ticker (and waiting until the
// loop took it) at each period boundary.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.t.Add(d)
	for c.c != nil && !c.next.After(end) {
		c.t = c.next
		c.next = c.next.Add(c.period)
		ch, at := c.c, c.t
		c.mu.Unlock()
		ch <- at
		c.mu.Lock()
	}
	c.t = end
	c.mu.Unlock()
}

// TestPipelineRunMeta: the metadata of every table at start, then again
// every 10 minutes (gala-gopher's period) stamped with the time of the
// round, with the tables of that moment; nothing in between.
func TestPipelineRunMeta(t *testing.T) {
	store := table.NewStore(table.Limits{}, nil, nil)
	clock := &manualClock{t: t0}
	p := NewPipeline(PipelineConfig{Store: store, Now: clock.now, Tick: clock.tick})
	sink := &memSink{}
	p.AddMetaSink("logs", sink)
	var mu sync.Mutex
	tables := []*table.Table{table.SystemCpu, table.TcpMetric}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.RunMeta(ctx, func() []*table.Table {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(tables)
		})
		close(done)
	}()
	waitRounds := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for sink.metaRounds() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d metadata rounds, want %d", sink.metaRounds(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitRounds(1)
	clock.advance(9*time.Minute + 59*time.Second)
	mu.Lock()
	tables = append(tables, table.SystemProc) // a custom probe declared since
	mu.Unlock()
	clock.advance(time.Second) // 10 min
	waitRounds(2)
	clock.advance(10 * time.Minute) // 20 min
	waitRounds(3)
	clock.advance(5 * time.Minute)
	cancel()
	<-done
	if clock.period != 10*time.Minute {
		t.Errorf("meta period %v, want 10m", clock.period)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	wantTimes := []time.Time{t0, t0.Add(10 * time.Minute), t0.Add(20 * time.Minute)}
	if !slices.EqualFunc(sink.metaTimes, wantTimes, time.Time.Equal) {
		t.Errorf("rounds at %v, want %v", sink.metaTimes, wantTimes)
	}
	for i, want := range [][]*table.Table{
		{table.SystemCpu, table.TcpMetric},
		{table.SystemCpu, table.TcpMetric, table.SystemProc},
		{table.SystemCpu, table.TcpMetric, table.SystemProc},
	} {
		if !slices.Equal(sink.metas[i], want) {
			t.Errorf("round %d: %d tables, want %d", i, len(sink.metas[i]), len(want))
		}
	}

	// Without a meta sink RunMeta has nothing to do and returns.
	idle := NewPipeline(PipelineConfig{Store: store})
	idle.RunMeta(context.Background(), func() []*table.Table { t.Error("tables() called"); return nil })
}

// TestPipelineEventLanguage: desc_language zh_CN gives a catalogued event
// gala-gopher's Chinese description in the same JSON shape; a custom
// probe's event keeps its own text.
func TestPipelineEventLanguage(t *testing.T) {
	for _, tc := range []struct {
		lang event.Language
		want []string
	}{
		{event.EnUS, []string{"Too high cpu utilization(93.20%).", "TCP listen drops(3).", "probe's own words"}},
		{event.ZhCN, []string{"过高的CPU占用率(93.20%)", "TCP监听端口丢包(丢包数 3).", "probe's own words"}},
	} {
		dir := t.TempDir()
		p := NewPipeline(PipelineConfig{Store: table.NewStore(table.Limits{}, nil, nil), Language: tc.lang})
		logSink, err := NewEventLogSink(dir, testHost, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		p.AddEventSink("logs", logSink)
		listen := event.New(t0, event.EndpointListenDrop, "9_10.0.0.5_10.0.0.1_80_1", uint64(3))
		listen.PID, listen.Comm = 9, "nginx"
		p.Event(event.New(t0, event.CPUTotalUsedPer, "cpu", 93.2))
		p.Event(listen)
		p.Event(event.Event{Time: t0, Entity: "custom_ent", EntityID: "a", Metric: "m", Severity: event.SeverityWarn, Message: "probe's own words"})
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		got := lines(readFile(t, filepath.Join(dir, EventLogFile)))
		if len(got) != 3 {
			t.Fatalf("%s: %d events", tc.lang, len(got))
		}
		for i, line := range got {
			var v struct {
				Body string
			}
			if err := json.Unmarshal(line, &v); err != nil {
				t.Fatal(err)
			}
			ids := []string{"cpu", "9_10.0.0.5_10.0.0.1_80_1", "a"}
			if want := "Mon Nov  2 09:05:07 2026 WARN Entity(" + ids[i] + ") " + tc.want[i]; v.Body != want {
				t.Errorf("%s #%d: Body %q, want %q", tc.lang, i, v.Body, want)
			}
		}
		// Everything but the description is the same in both languages.
		if tc.lang == event.ZhCN {
			var zh, en map[string]any
			_ = json.Unmarshal(got[1], &zh)
			enLine, _ := MarshalEvent(listen, testHost, time.UTC)
			_ = json.Unmarshal(enLine, &en)
			delete(zh, "Body")
			delete(en, "Body")
			if !reflect.DeepEqual(zh, en) {
				t.Errorf("zh_CN event %v\nen_US event %v", zh, en)
			}
		}
	}
}

// TestPipelineLogs: a probe's log record goes to both event channels in
// gala-gopher's shape; with no event channel it is counted as dropped.
func TestPipelineLogs(t *testing.T) {
	l, err := event.ParseLog(bytes.Split([]byte(`1700000000123|"WARN"|13|{"thread.pid":12}|{"values":[]}|"body"`), []byte{'|'}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Timestamp":1700000000123,"SeverityText":"WARN","SeverityNumber":13,"Resource":{"thread.pid":12,` +
		`"host.id":"` + testHost.UUID + `","host.name":"` + testHost.Hostname + `","host.ip":"` + testHost.IP + `"},"Attributes":{"values":[]},"Body":"body"}`
	if got := string(MarshalLog(l, testHost)); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}

	dir := t.TempDir()
	p := NewPipeline(PipelineConfig{Store: table.NewStore(table.Limits{}, nil, nil)})
	p.Log(l) // no event channel
	logSink, err := NewEventLogSink(dir, testHost, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	p.AddEventSink("logs", logSink)
	p.AddEventSink("mem", &memSink{}) // takes events only
	p.Log(l)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lines(readFile(t, filepath.Join(dir, EventLogFile))); len(got) != 1 || string(got[0]) != want {
		t.Errorf("event log %q", got)
	}
	wantMetrics := `
# HELP galago_logs_dropped_total OpenTelemetry log records (|log| lines of custom probes) dropped because no event channel is configured.
# TYPE galago_logs_dropped_total counter
galago_logs_dropped_total 1
# HELP galago_logs_total OpenTelemetry log records (|log| lines of custom probes) passed to the event sinks.
# TYPE galago_logs_total counter
galago_logs_total 1
`
	if got := collectText(t, p, "galago_logs_total", "galago_logs_dropped_total"); got != wantMetrics {
		t.Errorf("self-metrics:\n%s\nwant:\n%s", got, wantMetrics)
	}
}
