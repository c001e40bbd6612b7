package output

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// Default periods of the Pipeline's loops.
const (
	// DefaultMetaInterval is gala-gopher's metadata period.
	DefaultMetaInterval = 600 * time.Second
	// DefaultExpireInterval is how often aged records are removed. Reads
	// already skip aged records; this only returns their memory.
	DefaultExpireInterval = 10 * time.Second
)

// PipelineConfig wires a Pipeline.
type PipelineConfig struct {
	Store *table.Store
	// Exporter, when metrics are served over HTTP, gets every stored record
	// (for histogram running totals) and a Sweep after each expiry.
	Exporter *Exporter
	// EventTimeout is event.timeout: the de-duplication window.
	EventTimeout time.Duration
	// Language is event.desc_language: the language of the descriptions
	// of catalogued events ("": en_US).
	Language       event.Language
	MetaInterval   time.Duration // 0: DefaultMetaInterval
	ExpireInterval time.Duration // 0: DefaultExpireInterval
	Log            *slog.Logger
	Now            func() time.Time // nil: time.Now
	// Tick starts a ticker of period d for the meta and expiry loops,
	// returning its channel and its stop function; nil: time.NewTicker.
	// Tests drive the loops with it.
	Tick func(d time.Duration) (<-chan time.Time, func())
}

func realTick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Pipeline is the one path from probes to outputs: records go to the store
// (limits, enrichment), the exporter and every metric sink; events through
// the de-duplication window to every event sink; table definitions to every
// meta sink. Everything dropped on the way is counted in its self-metrics
// (Pipeline is a prometheus.Collector).
//
// Add sinks before the first Record, Event or RunMeta call.
type Pipeline struct {
	store    *table.Store
	exporter *Exporter
	dedup    *event.Dedup
	lang     event.Language
	log      *slog.Logger
	now      func() time.Time
	tick     func(time.Duration) (<-chan time.Time, func())
	metaEvery,
	expireEvery time.Duration

	metricSinks []*namedSink[MetricSink]
	eventSinks  []*namedSink[EventSink]
	metaSinks   []*namedSink[MetaSink]

	records    atomic.Uint64
	events     atomic.Uint64
	suppressed atomic.Uint64
	logs       atomic.Uint64
	logsLost   atomic.Uint64

	descRecords, descDropped, descStored, descSinkErrors, descEvents, descSuppressed, descLogs, descLogsLost *prometheus.Desc
}

type sinkStats struct {
	name    string
	errors  atomic.Uint64
	lastLog atomic.Int64 // unix seconds of the last logged error
}

type namedSink[S any] struct {
	sinkStats
	sink S
}

// NewPipeline returns a pipeline over cfg.Store.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	p := &Pipeline{
		store:       cfg.Store,
		exporter:    cfg.Exporter,
		dedup:       event.NewDedup(cfg.EventTimeout),
		lang:        cfg.Language,
		log:         cfg.Log,
		now:         cfg.Now,
		tick:        cfg.Tick,
		metaEvery:   cfg.MetaInterval,
		expireEvery: cfg.ExpireInterval,
		descRecords: prometheus.NewDesc("galago_records_total",
			"Records the probes handed to the output pipeline.", nil, nil),
		descDropped: prometheus.NewDesc("galago_records_dropped_total",
			"Records dropped by the store: refused by an imdb limit (max_tables_num, max_metrics_num, or max_records_num when rows of the current period fill the table; refused rows reach no channel), "+
				"rows of an earlier period removed early to make room for the current period (max_records_num_evicted), or aged out (record_timeout).",
			[]string{"reason"}, nil),
		descStored: prometheus.NewDesc("galago_store_records",
			"Records currently held by the store.", nil, nil),
		descSinkErrors: prometheus.NewDesc("galago_sink_errors_total",
			"Failed writes to an output sink; the record, event or metadata is lost for that sink.",
			[]string{"sink"}, nil),
		descEvents: prometheus.NewDesc("galago_events_total",
			"Abnormal events passed to the event sinks.", nil, nil),
		descSuppressed: prometheus.NewDesc("galago_events_suppressed_total",
			"Abnormal events suppressed as repeats inside the event.timeout window.", nil, nil),
		descLogs: prometheus.NewDesc("galago_logs_total",
			"OpenTelemetry log records (|log| lines of custom probes) passed to the event sinks.", nil, nil),
		descLogsLost: prometheus.NewDesc("galago_logs_dropped_total",
			"OpenTelemetry log records (|log| lines of custom probes) dropped because no event channel is configured.", nil, nil),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.tick == nil {
		p.tick = realTick
	}
	if p.metaEvery <= 0 {
		p.metaEvery = DefaultMetaInterval
	}
	if p.expireEvery <= 0 {
		p.expireEvery = DefaultExpireInterval
	}
	return p
}

// AddMetricSink adds a metric channel; name is its galago_sink_errors_total label.
func (p *Pipeline) AddMetricSink(name string, s MetricSink) {
	p.metricSinks = append(p.metricSinks, &namedSink[MetricSink]{sinkStats: sinkStats{name: name}, sink: s})
}

// AddEventSink adds an event channel.
func (p *Pipeline) AddEventSink(name string, s EventSink) {
	p.eventSinks = append(p.eventSinks, &namedSink[EventSink]{sinkStats: sinkStats{name: name}, sink: s})
}

// AddMetaSink adds a metadata channel.
func (p *Pipeline) AddMetaSink(name string, s MetaSink) {
	p.metaSinks = append(p.metaSinks, &namedSink[MetaSink]{sinkStats: sinkStats{name: name}, sink: s})
}

// Record stores r and hands it to the exporter and every metric sink. A
// record the store refuses (imdb limits) goes nowhere: the limits bound
// every channel alike, and the store counts the drop.
func (p *Pipeline) Record(r *table.Record, src *table.Source) {
	p.records.Add(1)
	if err := p.store.Put(r, src); err != nil {
		return
	}
	if p.exporter != nil {
		p.exporter.Observe(r)
	}
	for _, s := range p.metricSinks {
		if err := s.sink.WriteRecord(r); err != nil {
			p.sinkFailed(&s.sinkStats, err)
		}
	}
}

// Event passes e through the de-duplication window to every event sink,
// its description in the configured language. An event without a time is
// stamped now.
func (p *Pipeline) Event(e event.Event) {
	if e.Time.IsZero() {
		e.Time = p.now()
	}
	if !p.dedup.Allow(e) {
		p.suppressed.Add(1)
		return
	}
	p.events.Add(1)
	e.Message = e.Describe(p.lang)
	for _, s := range p.eventSinks {
		if err := s.sink.WriteEvent(e); err != nil {
			p.sinkFailed(&s.sinkStats, err)
		}
	}
}

// Log passes a probe's log record to every event sink that takes them
// (both the logs and the kafka channel do); with no event channel it is
// dropped and counted.
func (p *Pipeline) Log(l event.Log) {
	sent := false
	for _, s := range p.eventSinks {
		ls, ok := s.sink.(LogSink)
		if !ok {
			continue
		}
		sent = true
		if err := ls.WriteLog(l); err != nil {
			p.sinkFailed(&s.sinkStats, err)
		}
	}
	if sent {
		p.logs.Add(1)
	} else {
		p.logsLost.Add(1)
	}
}

// WriteMeta sends the current table definitions to every meta sink once.
func (p *Pipeline) WriteMeta(tables []*table.Table) {
	ts := p.now()
	for _, s := range p.metaSinks {
		if err := s.sink.WriteMeta(ts, tables); err != nil {
			p.sinkFailed(&s.sinkStats, err)
		}
	}
}

// RunMeta writes the metadata of tables() at once and then every meta
// interval until ctx ends. It returns at once when there is no meta sink.
func (p *Pipeline) RunMeta(ctx context.Context, tables func() []*table.Table) {
	if len(p.metaSinks) == 0 {
		return
	}
	p.WriteMeta(tables())
	c, stop := p.tick(p.metaEvery)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			p.WriteMeta(tables())
		}
	}
}

// RunExpiry removes aged records from the store, and their histogram totals
// from the exporter, every expire interval until ctx ends.
func (p *Pipeline) RunExpiry(ctx context.Context) {
	c, stop := p.tick(p.expireEvery)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			p.store.Expire()
			if p.exporter != nil {
				p.exporter.Sweep()
			}
		}
	}
}

// sinkFailed counts a failed write and logs it, at most once a minute per
// sink so a full disk does not flood the log.
func (p *Pipeline) sinkFailed(s *sinkStats, err error) {
	total := s.errors.Add(1)
	now := p.now().Unix()
	if last := s.lastLog.Load(); now-last >= 60 && s.lastLog.CompareAndSwap(last, now) {
		p.log.Warn("output sink write failed", "sink", s.name, "err", err, "failures", total)
	}
}

// Close closes every sink.
func (p *Pipeline) Close() error {
	var errs []error
	for _, s := range p.metricSinks {
		errs = append(errs, s.sink.Close())
	}
	for _, s := range p.eventSinks {
		errs = append(errs, s.sink.Close())
	}
	for _, s := range p.metaSinks {
		errs = append(errs, s.sink.Close())
	}
	return errors.Join(errs...)
}

// Describe implements prometheus.Collector.
func (p *Pipeline) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.descRecords, p.descDropped, p.descStored, p.descSinkErrors, p.descEvents, p.descSuppressed, p.descLogs, p.descLogsLost} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Pipeline) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(p.descRecords, p.records.Load())
	counter(p.descEvents, p.events.Load())
	counter(p.descSuppressed, p.suppressed.Load())
	counter(p.descLogs, p.logs.Load())
	counter(p.descLogsLost, p.logsLost.Load())
	ch <- prometheus.MustNewConstMetric(p.descStored, prometheus.GaugeValue, float64(p.store.Len()))

	dropped := p.store.Dropped()
	for _, reason := range table.DropReasons {
		if _, ok := dropped[reason]; !ok {
			dropped[reason] = 0 // every reason always present
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(dropped)) {
		counter(p.descDropped, dropped[reason], reason)
	}

	// One series per sink name, even if two sinks share it.
	errs := map[string]uint64{}
	for _, s := range p.metricSinks {
		errs[s.name] += s.errors.Load()
	}
	for _, s := range p.eventSinks {
		errs[s.name] += s.errors.Load()
	}
	for _, s := range p.metaSinks {
		errs[s.name] += s.errors.Load()
	}
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		counter(p.descSinkErrors, errs[name], name)
	}
}
