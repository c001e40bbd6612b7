package output

import (
	"compress/gzip"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/galago-project/galago/internal/table"
)

// Reasons a stored sample is left out of a scrape, the label values of
// galago_exporter_samples_skipped.
const (
	// SkipTypeConflict: two tables of one entity declare the same field
	// with different kinds; the first table (by name) sets the family type.
	SkipTypeConflict = "type_conflict"
	// SkipHistogramSuffix: a scalar field is named like a histogram's
	// _bucket/_sum/_count series (l7 latency_sum vs the latency histogram);
	// the histogram keeps the name.
	SkipHistogramSuffix = "histogram_suffix"
	// SkipDuplicate: two records give one family the same label set.
	SkipDuplicate = "duplicate_series"
	// SkipInvalid: client_golang rejected the sample (e.g. a bad label name).
	SkipInvalid = "invalid"
)

const (
	skippedName = "galago_exporter_samples_skipped"
	skippedHelp = "Stored samples left out of this scrape, by reason (name or type collisions between tables)."
)

var skipReasons = [...]string{SkipTypeConflict, SkipHistogramSuffix, SkipDuplicate, SkipInvalid}

// Exporter is the web_server metric channel over the record store. Text
// scrapes are written directly from the store (expo.go); the exporter is
// also a prometheus.Collector, which promhttp serves for the protobuf
// format and name[] filters, and which the otlp channel gathers. Both give
// the same text, byte for byte. Scrapes only read the store, so every
// scraper sees the same series, and each sample carries its record's period
// end as timestamp, so repeated scrapes of one period are idempotent.
//
// Records hold one period of a histogram; Observe adds each period into a
// running total per series so that the exposed buckets only grow, as
// Prometheus counters must.
type Exporter struct {
	store *table.Store
	// reg holds the self-metrics; storeReg only the exporter's collector,
	// which the text path bypasses (expo.go) and the protobuf path gathers
	// with reg through gatherers.
	reg       *prometheus.Registry
	storeReg  *prometheus.Registry
	gatherers prometheus.Gatherers
	handler   http.Handler
	prom      http.Handler // promhttp over gatherers: protobuf, name[] filters
	errCnt    *prometheus.CounterVec
	inFlight  chan struct{}
	log       *slog.Logger

	statesMu sync.Mutex
	states   []*expoState // scratch of finished scrapes, for the next

	histMu sync.RWMutex
	hists  map[histKey]*histAcc

	descMu sync.Mutex
	descs  map[descKey]*prometheus.Desc

	skippedDesc *prometheus.Desc
}

type histKey struct {
	rec   string // Record.Key(): table name and key values
	field int
}

// histAcc is a histogram's running total since the series appeared.
type histAcc struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last is the overflow
	sum    float64
	time   time.Time // end of the last period added
	seen   time.Time // wall clock of the last Observe, for Sweep
}

type descKey struct {
	name, help string
	sig        string // label names joined by \xff
}

// maxDescs bounds the descriptor cache; past it the cache is rebuilt.
const maxDescs = 8192

// NewExporter returns an exporter over store whose registry also serves
// extra collectors (galago's self-metrics).
func NewExporter(store *table.Store, log *slog.Logger, extra ...prometheus.Collector) (*Exporter, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		store:       store,
		reg:         prometheus.NewRegistry(),
		log:         log,
		hists:       map[histKey]*histAcc{},
		descs:       map[descKey]*prometheus.Desc{},
		skippedDesc: prometheus.NewDesc(skippedName, skippedHelp, []string{"reason"}, nil),
	}
	e.storeReg = prometheus.NewRegistry()
	if err := e.storeReg.Register(e); err != nil {
		return nil, fmt.Errorf("register collector: %w", err)
	}
	if err := e.Register(extra...); err != nil {
		return nil, err
	}
	e.gatherers = prometheus.Gatherers{e.storeReg, e.reg}
	e.prom = promhttp.HandlerFor(e.gatherers, promhttp.HandlerOpts{
		ErrorLog:      promLogger{log},
		ErrorHandling: promhttp.ContinueOnError,
		// Registers promhttp_metric_handler_errors_total with the
		// self-metrics; the text path counts its errors there too.
		Registry: e.reg,
		// OpenMetrics stays off: its encoder types a counter whose name
		// does not end in _total (hw carrier_up_count, ...) as unknown.
		EnableOpenMetrics: false,
		// The limit is kept by serve, for both paths.
		MaxRequestsInFlight: 0,
	})
	errCnt := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promhttp_metric_handler_errors_total",
		Help: "Total number of internal errors encountered by the promhttp metric handler.",
	}, []string{"cause"})
	are := &prometheus.AlreadyRegisteredError{}
	if err := e.reg.Register(errCnt); !errors.As(err, are) {
		return nil, fmt.Errorf("find promhttp's error counter: %w", err)
	}
	e.errCnt = are.ExistingCollector.(*prometheus.CounterVec)
	e.inFlight = make(chan struct{}, maxRequestsInFlight)
	e.handler = http.HandlerFunc(e.serve)
	return e, nil
}

// maxRequestsInFlight bounds concurrent scrapes; more are answered 503.
const maxRequestsInFlight = 8

// maxKeptBuffer bounds the text buffer kept for the next scrape (a
// 100k-series scrape is ~23 MB).
const maxKeptBuffer = 64 << 20

func (e *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	select {
	case e.inFlight <- struct{}{}:
		defer func() { <-e.inFlight }()
	default:
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", maxRequestsInFlight),
			http.StatusServiceUnavailable)
		return
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	if format != textFormat || r.URL.Query().Has("name[]") {
		e.prom.ServeHTTP(w, r)
		return
	}
	e.serveText(w, r)
}

// serveText answers a text-format scrape with the direct writer.
func (e *Exporter) serveText(w http.ResponseWriter, r *http.Request) {
	self, err := e.reg.Gather()
	if err != nil {
		e.log.Warn("metrics handler", "err", "error gathering metrics: "+err.Error())
	}
	st := e.takeState()
	defer e.putState(st)
	if e.render(st, self) {
		err = errors.Join(err, errors.New("a stored sample repeats another series"))
		e.log.Warn("metrics handler", "err", "error gathering metrics: a stored sample repeats another series")
	}
	if err != nil {
		e.errCnt.WithLabelValues("gathering").Inc()
	}
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", string(textFormat))
	if !negotiateGzip(r) {
		_, _ = w.Write(st.buf)
		return
	}
	h.Set("Content-Encoding", "gzip")
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(w)
	_, _ = gz.Write(st.buf)
	_ = gz.Close()
	gz.Reset(nil)
	gzipWriters.Put(gz)
}

func (e *Exporter) takeState() *expoState {
	e.statesMu.Lock()
	defer e.statesMu.Unlock()
	if n := len(e.states); n > 0 {
		st := e.states[n-1]
		e.states = e.states[:n-1]
		return st
	}
	return newExpoState()
}

func (e *Exporter) putState(st *expoState) {
	// Keep neither expired records nor their label strings alive, nor a
	// buffer grown by a one-off giant scrape.
	clear(st.recs)
	clear(st.raw)
	clear(st.sorted)
	if cap(st.buf) > maxKeptBuffer {
		st.buf = nil
	}
	e.statesMu.Lock()
	defer e.statesMu.Unlock()
	e.states = append(e.states, st)
}

// Register adds collectors to the exporter's registry, for self-metrics
// whose owner is built after the exporter (the Pipeline).
func (e *Exporter) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := e.reg.Register(c); err != nil {
			return fmt.Errorf("register collector: %w", err)
		}
	}
	return nil
}

// Gatherer gathers everything the exporter serves (the store and the
// self-metrics), for the otlp channel and tests.
func (e *Exporter) Gatherer() prometheus.Gatherer { return e.gatherers }

// Handler serves the exposition on "/" and "/metrics" (GET and HEAD); any
// other path is 404, another method 405, a ninth concurrent scrape 503. Text
// is gzipped when the client accepts it; the protobuf format and name[]
// filters go to promhttp. OpenMetrics is not offered, see NewExporter.
func (e *Exporter) Handler() http.Handler { return e.handler }

// Observe adds the histograms of a record the store just accepted to their
// series' running totals. Call it once per stored record.
func (e *Exporter) Observe(r *table.Record) {
	if !hasHistogram(r.Table) {
		return
	}
	key, now := r.Key(), time.Now()
	e.histMu.Lock()
	defer e.histMu.Unlock()
	for i, f := range r.Table.Fields {
		v := r.Values[i]
		if f.Kind != table.KindHistogram || !v.Set || v.Hist == nil {
			continue
		}
		h := v.Hist
		k := histKey{key, i}
		acc := e.hists[k]
		if acc == nil || !slices.Equal(acc.bounds, h.Bounds) || len(h.Counts) != len(acc.counts) {
			// New series, or its buckets changed: start again.
			acc = &histAcc{bounds: slices.Clone(h.Bounds), counts: make([]uint64, len(h.Counts))}
			e.hists[k] = acc
		}
		for j, c := range h.Counts {
			acc.counts[j] += c
		}
		acc.sum += h.Sum
		acc.time = r.Time
		acc.seen = now
	}
}

// Sweep forgets the running totals of series that left the store. The
// Pipeline calls it after each store expiry.
func (e *Exporter) Sweep() {
	start := time.Now()
	live := map[string]struct{}{}
	e.store.Each(func(r *table.Record) {
		if hasHistogram(r.Table) {
			live[r.Key()] = struct{}{}
		}
	})
	e.histMu.Lock()
	defer e.histMu.Unlock()
	for k, acc := range e.hists {
		// A series observed after the walk began may not be in it yet.
		if _, ok := live[k.rec]; !ok && acc.seen.Before(start) {
			delete(e.hists, k)
		}
	}
}

func hasHistogram(t *table.Table) bool {
	for _, f := range t.Fields {
		if f.Kind == table.KindHistogram {
			return true
		}
	}
	return false
}

// Describe sends nothing: the families depend on the tables in the store,
// so the collector is unchecked.
func (e *Exporter) Describe(chan<- *prometheus.Desc) {}

// family is one exported metric name and the type its first table gave it.
type family struct {
	kind   table.Kind // KindSummary is exported as a gauge
	help   string
	shared bool // declared by more than one table: series may repeat
}

func valueType(k table.Kind) prometheus.ValueType {
	if k == table.KindCounter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// sameType reports whether two field kinds make the same Prometheus type.
func sameType(a, b table.Kind) bool {
	if a == table.KindHistogram || b == table.KindHistogram {
		return a == b
	}
	return valueType(a) == valueType(b)
}

// tablePlan says, per field of one table, under which name its samples are
// exported and whether they are skipped this scrape.
type tablePlan struct {
	names   []string // "" for non-metric fields
	skip    []string // skip reason, "" to export
	hasHist bool
}

// exported returns the name field i of r is exported under this scrape,
// false when it is not: not a metric, not set, or skipped (skip is then
// told why).
func (p *tablePlan) exported(r *table.Record, i int, skip func(reason string)) (string, bool) {
	name := p.names[i]
	if name == "" || !r.Values[i].Set {
		return "", false
	}
	if p.skip[i] != "" {
		skip(p.skip[i])
		return "", false
	}
	return name, true
}

// plan resolves families for the tables present in this scrape: the first
// table (by name, as Each orders them) to declare a name sets its type and
// help; histogram series names win over scalars of the same name.
func plan(recs []*table.Record) (map[*table.Table]*tablePlan, map[string]*family) {
	plans := map[*table.Table]*tablePlan{}
	fams := map[string]*family{}
	var order []*table.Table
	for _, r := range recs {
		t := r.Table
		if _, ok := plans[t]; ok {
			continue
		}
		p := &tablePlan{names: make([]string, len(t.Fields)), skip: make([]string, len(t.Fields))}
		for i, f := range t.Fields {
			if !f.Kind.IsMetric() {
				continue
			}
			name := t.MetricName(i)
			p.names[i] = name
			if f.Kind == table.KindHistogram {
				p.hasHist = true
			}
			fam := fams[name]
			switch {
			case fam == nil:
				fams[name] = &family{kind: f.Kind, help: f.Description}
			case !sameType(fam.kind, f.Kind):
				p.skip[i] = SkipTypeConflict
			default:
				fam.shared = true
			}
		}
		plans[t] = p
		order = append(order, t)
	}
	for _, t := range order {
		p := plans[t]
		for i, name := range p.names {
			if name == "" || p.skip[i] != "" || fams[name].kind == table.KindHistogram {
				continue
			}
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base, ok := strings.CutSuffix(name, suffix)
				if h := fams[base]; ok && h != nil && h.kind == table.KindHistogram {
					p.skip[i] = SkipHistogramSuffix
				}
			}
		}
	}
	return plans, fams
}

// Collect emits every stored sample.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	var recs []*table.Record
	e.store.Each(func(r *table.Record) { recs = append(recs, r) })
	plans, fams := plan(recs)

	var skipped [len(skipReasons)]uint64
	skip := func(reason string) {
		skipped[slices.Index(skipReasons[:], reason)]++
	}
	// Series already sent, per family, to drop duplicates before
	// client_golang rejects them.
	sent := map[string]map[string]struct{}{}

	var names, values []string
	for _, r := range recs {
		p := plans[r.Table]
		labels := exportLabels(r)
		names, values = names[:0], values[:0]
		for _, l := range labels {
			names = append(names, l.Name)
			values = append(values, l.Value)
		}
		sig := strings.Join(names, "\xff")
		series := "" // built when a shared family needs it
		var recKey string
		if p.hasHist {
			recKey = r.Key()
		}
		for i, f := range r.Table.Fields {
			name, ok := p.exported(r, i, skip)
			if !ok {
				continue
			}
			v := r.Values[i]
			fam := fams[name]
			if fam.shared {
				// Within one table keys are unique, so only a family
				// fed by several tables can repeat a series.
				if series == "" {
					series = sig + "\xfe" + strings.Join(values, "\xff")
				}
				seen := sent[name]
				if seen == nil {
					seen = map[string]struct{}{}
					sent[name] = seen
				}
				if _, dup := seen[series]; dup {
					skip(SkipDuplicate)
					continue
				}
				seen[series] = struct{}{}
			}
			desc := e.desc(name, fam.help, names, sig)
			var m prometheus.Metric
			var err error
			ts := r.Time
			if f.Kind == table.KindHistogram {
				var ok bool
				m, ts, ok, err = e.histMetric(desc, histKey{recKey, i}, values)
				if !ok {
					continue // never observed: nothing to expose yet
				}
			} else {
				m, err = prometheus.NewConstMetric(desc, valueType(f.Kind), v.Num, values...)
			}
			if err != nil {
				skip(SkipInvalid)
				e.log.Debug("exporter skipped a sample", "metric", name, "err", err)
				continue
			}
			if !ts.IsZero() {
				m = prometheus.NewMetricWithTimestamp(ts, m)
			}
			ch <- m
		}
	}
	// A gauge of this scrape, not a counter, so that scrapes stay identical.
	for i, reason := range skipReasons {
		ch <- prometheus.MustNewConstMetric(e.skippedDesc, prometheus.GaugeValue, float64(skipped[i]), reason)
	}
}

// histMetric builds the cumulative histogram of one series from its running
// total, stamped with the end of the last period added.
func (e *Exporter) histMetric(desc *prometheus.Desc, k histKey, values []string) (prometheus.Metric, time.Time, bool, error) {
	e.histMu.RLock()
	acc := e.hists[k]
	if acc == nil {
		e.histMu.RUnlock()
		return nil, time.Time{}, false, nil
	}
	buckets := make(map[float64]uint64, len(acc.bounds))
	var cum uint64
	for j, bound := range acc.bounds {
		cum += acc.counts[j]
		if !math.IsInf(bound, 1) {
			buckets[bound] = cum
		}
	}
	count := cum + acc.counts[len(acc.counts)-1]
	sum, ts := acc.sum, acc.time
	e.histMu.RUnlock()
	m, err := prometheus.NewConstHistogram(desc, count, sum, buckets, values...)
	return m, ts, true, err
}

// desc returns the cached descriptor of a family and label-name set.
func (e *Exporter) desc(name, help string, labelNames []string, sig string) *prometheus.Desc {
	k := descKey{name, help, sig}
	e.descMu.Lock()
	defer e.descMu.Unlock()
	if d, ok := e.descs[k]; ok {
		return d
	}
	if len(e.descs) >= maxDescs {
		clear(e.descs)
	}
	d := prometheus.NewDesc(name, help, slices.Clone(labelNames), nil)
	e.descs[k] = d
	return d
}

// promLogger routes promhttp's error log to slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("metrics handler", "err", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
