package bench

import (
	"bytes"
	"context"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Exposition is one parsed /metrics scrape.
type Exposition map[string]*dto.MetricFamily

// parseExposition parses Prometheus text exposition.
func parseExposition(b []byte) (Exposition, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}

// value of a sample of any scalar type.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.Label))
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Sum adds the samples of a family whose labels include want.
func (e Exposition) Sum(family string, want map[string]string) float64 {
	f := e[family]
	if f == nil {
		return 0
	}
	var s float64
	for _, m := range f.Metric {
		if matches(labelsOf(m), want) {
			s += value(m)
		}
	}
	return s
}

// ByLabel sums a family per value of one label.
func (e Exposition) ByLabel(family, label string) map[string]float64 {
	out := map[string]float64{}
	if f := e[family]; f != nil {
		for _, m := range f.Metric {
			out[labelsOf(m)[label]] += value(m)
		}
	}
	return out
}

func fetch(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fetchWith(ctx, http.DefaultClient, url)
}

// fetchWith GETs url with ctx's deadline.
func fetchWith(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, realsrv.Tail(b, 500))
	}
	return b, nil
}

// Periods accumulates per-period samples across scrapes. galago stamps each
// sample with the end of its report period and keeps it until the next
// period replaces it, so a scrape at least once per period sees every
// period once or more: summing each series' values over its distinct
// timestamps gives the total over the periods.
type Periods struct {
	mu       sync.Mutex
	prefixes []string
	series   map[string]*periodSeries
	scrapes  []time.Time
}

type periodSeries struct {
	family string
	labels map[string]string
	values map[int64]float64 // by timestamp (ms)
}

// NewPeriods keeps the families whose names start with one of prefixes.
func NewPeriods(prefixes ...string) *Periods {
	return &Periods{prefixes: prefixes, series: map[string]*periodSeries{}}
}

// Add takes one scrape made at t.
func (p *Periods) Add(t time.Time, e Exposition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scrapes = append(p.scrapes, t)
	for name, f := range e {
		keep := false
		for _, pre := range p.prefixes {
			keep = keep || strings.HasPrefix(name, pre)
		}
		if !keep {
			continue
		}
		for _, m := range f.Metric {
			if m.TimestampMs == nil {
				return fmt.Errorf("%s: sample without timestamp: per-period sums need galago's period stamps", name)
			}
			labels := labelsOf(m)
			key := seriesKey(name, labels)
			s := p.series[key]
			if s == nil {
				s = &periodSeries{family: name, labels: labels, values: map[int64]float64{}}
				p.series[key] = s
			}
			s.values[m.GetTimestampMs()] = value(m)
		}
	}
	return nil
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteString("\xff" + k + "=" + labels[k])
	}
	return b.String()
}

// Total sums a family over every period of the series whose labels include
// want, and says how many periods (distinct timestamps) that was.
func (p *Periods) Total(family string, want map[string]string) (sum float64, periods int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := map[int64]bool{}
	for _, s := range p.series {
		if s.family != family || !matches(s.labels, want) {
			continue
		}
		for t, v := range s.values {
			sum += v
			ts[t] = true
		}
	}
	return sum, len(ts)
}

// MaxGap is the longest time between two consecutive scrapes (0 with
// fewer than two).
func (p *Periods) MaxGap() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var g time.Duration
	for i := 1; i < len(p.scrapes); i++ {
		g = max(g, p.scrapes[i].Sub(p.scrapes[i-1]))
	}
	return g
}

// Scrapes is the number of scrapes taken.
func (p *Periods) Scrapes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.scrapes)
}
