package output

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/galago-project/galago/internal/table"
)

func scrape(t testing.TB, h http.Handler, method, path string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func parseExposition(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not valid exposition: %v\n%s", err, body)
	}
	return fams
}

// find returns the metric of a family whose labels include want.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	fam := fams[name]
	if fam == nil {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("family %s has no series %v", name, want)
	return nil
}

func TestExporter(t *testing.T) {
	p, exp, clock := newTestPipeline(t, table.Limits{})
	weird := "we\"ird\\na\nme"
	// Period 1: latencies 5, 20, 200 on link 1; 60 on link 2.
	p.Record(linkRecord(t0, "1", "client", weird, 100, 30, 5, 20, 200), nil)
	p.Record(linkRecord(t0, "2", "server", "nginx", 50, 40, 60), nil)
	p.Record(linkExtraRecord(t0, "1"), nil)
	// Period 2 of link 1: 7 and 70 more; link 2 has not reported again.
	clock.t = t0.Add(period)
	p.Record(linkRecord(clock.t, "1", "client", weird, 150, 31, 7, 70), nil)

	h := exp.Handler()
	text := map[string]string{"Accept": "text/plain"}
	first := scrape(t, h, http.MethodGet, "/metrics", text)
	if first.Code != http.StatusOK {
		t.Fatalf("status %d: %s", first.Code, first.Body)
	}
	if ct := first.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	body := first.Body.Bytes()
	golden(t, "exporter.prom", body)

	// Scrapes read, never consume: a second scraper (on / too) sees the same.
	for _, path := range []string{"/metrics", "/"} {
		again := scrape(t, h, http.MethodGet, path, text)
		if !bytes.Equal(again.Body.Bytes(), body) {
			t.Errorf("scrape of %s differs from the first:\n%s", path, again.Body)
		}
	}

	fams := parseExposition(t, body)
	type kind = dto.MetricType
	for name, want := range map[string]kind{
		"gala_gopher_link_rx_bytes": dto.MetricType_COUNTER,
		"gala_gopher_link_tx_bytes": dto.MetricType_COUNTER,
		"gala_gopher_link_rtt":      dto.MetricType_GAUGE,
		"gala_gopher_link_zero_win": dto.MetricType_GAUGE,
		"gala_gopher_link_latency":  dto.MetricType_HISTOGRAM,
	} {
		if fams[name] == nil || fams[name].GetType() != want {
			t.Errorf("%s: type %v, want %v", name, fams[name].GetType(), want)
		}
	}
	if fams["gala_gopher_link_unset"] != nil {
		t.Error("an unset field was exported")
	}
	if got := fams["gala_gopher_link_rtt"].GetHelp(); got != "Smoothed RTT (us)" {
		t.Errorf("rtt help %q: the first table's description must win", got)
	}
	// rtt is one family fed by both tables; rx_bytes only by the counter.
	if n := len(fams["gala_gopher_link_rtt"].Metric); n != 3 {
		t.Errorf("rtt has %d series, want 3", n)
	}
	if n := len(fams["gala_gopher_link_rx_bytes"].Metric); n != 2 {
		t.Errorf("rx_bytes has %d series, want 2 (the gauge of link_tx is a type conflict)", n)
	}

	// Link 1's histogram is the sum of both periods, cumulative per bucket,
	// stamped with the end of period 2.
	m := find(t, fams, "gala_gopher_link_latency", map[string]string{"tgid": "1", "comm": weird})
	hist := m.GetHistogram()
	var got []string
	for _, b := range hist.Bucket {
		got = append(got, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	if want := "10:2 50:3 100:4 +Inf:5"; strings.Join(got, " ") != want {
		t.Errorf("buckets %s, want %s", strings.Join(got, " "), want)
	}
	if hist.GetSampleCount() != 5 || hist.GetSampleSum() != 302 {
		t.Errorf("count %d sum %g, want 5 and 302", hist.GetSampleCount(), hist.GetSampleSum())
	}
	if m.GetTimestampMs() != clock.t.UnixMilli() {
		t.Errorf("histogram timestamp %d, want %d", m.GetTimestampMs(), clock.t.UnixMilli())
	}
	m = find(t, fams, "gala_gopher_link_rtt", map[string]string{"tgid": "2"})
	if m.GetGauge().GetValue() != 40 || m.GetTimestampMs() != t0.UnixMilli() {
		t.Errorf("link 2 rtt %v @%d, want 40 @%d", m.GetGauge().GetValue(), m.GetTimestampMs(), t0.UnixMilli())
	}
	// The scalar latency_sum of link_tx yields the name to the histogram.
	if fams["gala_gopher_link_latency_sum"] != nil {
		t.Error("link_tx's latency_sum gauge was exported beside the latency histogram")
	}
	for reason, want := range map[string]float64{SkipTypeConflict: 1, SkipHistogramSuffix: 1, SkipDuplicate: 0, SkipInvalid: 0} {
		m := find(t, fams, "galago_exporter_samples_skipped", map[string]string{"reason": reason})
		if m.GetGauge().GetValue() != want {
			t.Errorf("skipped{%s} = %v, want %v", reason, m.GetGauge().GetValue(), want)
		}
	}
	if _, err := exp.Gatherer().Gather(); err != nil {
		t.Errorf("Gather reports inconsistencies: %v", err)
	}
}

func TestExporterHTTP(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	p.Record(linkRecord(t0, "1", "client", "java", 100, 30, 5), nil)
	h := exp.Handler()

	plain := scrape(t, h, http.MethodGet, "/metrics", nil).Body.Bytes()

	gz := scrape(t, h, http.MethodGet, "/metrics", map[string]string{"Accept-Encoding": "gzip"})
	if gz.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip: %v", gz.Header())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(unzipped, plain) {
		t.Error("gzip body differs from the plain one")
	}

	// OpenMetrics is not offered: it turns counters whose name lacks
	// _total (rx_bytes here, hw carrier_up_count in gala-gopher) into
	// "unknown". Prometheus asks for it
	// first and falls back to the text format.
	om := scrape(t, h, http.MethodGet, "/metrics", map[string]string{
		"Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"})
	if ct := om.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	if !bytes.Equal(om.Body.Bytes(), plain) {
		t.Error("a Prometheus-like Accept header gets another body")
	}
	if fams := parseExposition(t, plain); fams["gala_gopher_link_rx_bytes"].GetType() != dto.MetricType_COUNTER {
		t.Error("rx_bytes is not a counter")
	}

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/metricsx", http.StatusNotFound},
		{http.MethodGet, "/api", http.StatusNotFound},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodHead, "/", http.StatusOK},
	} {
		if got := scrape(t, h, c.method, c.path, nil).Code; got != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.code)
		}
	}
}

// Every built-in table, all fields set, renders to valid exposition; the
// only samples left out are the known name collisions.
func TestExporterBuiltinTables(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	for _, tb := range table.Builtin() {
		r := tb.NewRecord(t0, period)
		for i, f := range tb.Fields {
			switch f.Kind {
			case table.KindKey, table.KindLabel:
				r.SetStr(i, tb.Name+"-"+f.Name)
			case table.KindHistogram:
				h := table.NewHistogram(bounds)
				h.Observe(42)
				r.SetHist(i, h)
			default:
				r.SetNum(i, float64(i))
			}
		}
		p.Record(r, nil)
	}
	if _, err := exp.Gatherer().Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}
	fams := parseExposition(t, scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil).Body.Bytes())
	skipped := map[string]float64{}
	for _, m := range fams["galago_exporter_samples_skipped"].Metric {
		skipped[m.Label[0].GetValue()] = m.GetGauge().GetValue()
	}
	// latency_sum beside the latency histogram in l7_rpc, l7_rpc_api,
	// sermant_l7_rpc and sermant_l7_rpc_api.
	want := map[string]float64{SkipTypeConflict: 0, SkipHistogramSuffix: 4, SkipDuplicate: 0, SkipInvalid: 0}
	for k, v := range want {
		if skipped[k] != v {
			t.Errorf("skipped{%s} = %v, want %v", k, skipped[k], v)
		}
	}
	for _, name := range []string{"gala_gopher_l7_latency_sum", "gala_gopher_l7_api_latency_sum"} {
		if fams[strings.TrimSuffix(name, "_sum")].GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s is not a histogram", strings.TrimSuffix(name, "_sum"))
		}
	}
	// Spot check: tcp_link's syn_srtt_max gauge beside the syn_srtt histogram
	// (gala-gopher's own <histogram>_max line would collide with it).
	m := find(t, fams, "gala_gopher_tcp_link_syn_srtt_max", nil)
	if idx := table.TcpMetric.Index("syn_srtt_max"); m.GetGauge().GetValue() != float64(idx) {
		t.Errorf("syn_srtt_max = %v, want %d", m.GetGauge().GetValue(), idx)
	}
}

func TestExporterSweep(t *testing.T) {
	p, exp, clock := newTestPipeline(t, table.Limits{Timeout: 10 * time.Second})
	p.Record(linkRecord(t0, "1", "client", "java", 1, 1, 5, 500), nil)
	p.Record(linkRecord(t0, "2", "client", "java", 1, 1, 5), nil)
	clock.t = t0.Add(8 * time.Second)
	p.Record(linkRecord(clock.t, "2", "client", "java", 1, 1, 5), nil)
	exp.Sweep()
	if n := len(exp.hists); n != 2 {
		t.Fatalf("%d running totals while both series live, want 2", n)
	}
	// Link 1 ages out (10 s after t0); link 2 lives until t0+18s.
	clock.t = t0.Add(12 * time.Second)
	exp.Sweep()
	if _, ok := exp.hists[histKey{linkRecord(t0, "2", "client", "", 0, 0).Key(), 6}]; !ok || len(exp.hists) != 1 {
		t.Fatalf("after link 1 aged out: %d totals, link 2 kept: %v", len(exp.hists), ok)
	}
	// A series that comes back starts from zero.
	p.Record(linkRecord(clock.t, "1", "client", "java", 1, 1, 70), nil)
	fams := parseExposition(t, scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil).Body.Bytes())
	m := find(t, fams, "gala_gopher_link_latency", map[string]string{"tgid": "1"})
	if m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetSampleSum() != 70 {
		t.Errorf("returning series: count %d sum %g, want 1 and 70",
			m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum())
	}
}

func TestExporterBucketsChange(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	p.Record(linkRecord(t0, "1", "client", "java", 1, 1, 5, 20), nil)
	r := linkRecord(t0.Add(period), "1", "client", "java", 1, 1)
	h := table.NewHistogram([]float64{1, math.Inf(1)})
	h.Observe(3)
	r.SetHist(6, h)
	p.Record(r, nil)
	fams := parseExposition(t, scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil).Body.Bytes())
	hist := find(t, fams, "gala_gopher_link_latency", nil).GetHistogram()
	var got []string
	for _, b := range hist.Bucket {
		got = append(got, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	if strings.Join(got, " ") != "1:0 +Inf:1" || hist.GetSampleCount() != 1 {
		t.Errorf("after a bucket change the total restarts: %v count %d", got, hist.GetSampleCount())
	}
}
