package output

import (
	"context"
	"errors"
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
	fail    bool
	closed  bool
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

func (s *memSink) WriteMeta(_ time.Time, tables []*table.Table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errSinkDown
	}
	s.metas = append(s.metas, tables)
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

func TestPipelineRunMeta(t *testing.T) {
	store := table.NewStore(table.Limits{}, nil, nil)
	p := NewPipeline(PipelineConfig{Store: store, MetaInterval: 20 * time.Millisecond})
	sink := &memSink{}
	p.AddMetaSink("logs", sink)
	tables := []*table.Table{table.SystemCpu, table.TcpMetric}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.RunMeta(ctx, func() []*table.Table { return tables })
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for sink.metaRounds() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if n := sink.metaRounds(); n < 3 {
		t.Fatalf("%d metadata rounds, want the first at once and more every interval", n)
	}
	if got := sink.metas[0]; len(got) != 2 || got[0] != table.SystemCpu {
		t.Errorf("first round %v", got)
	}

	// Without a meta sink RunMeta has nothing to do and returns.
	idle := NewPipeline(PipelineConfig{Store: store})
	idle.RunMeta(context.Background(), func() []*table.Table { t.Error("tables() called"); return nil })
}
