package e2e

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The OpenTelemetry Collector the test builds (../shared/ENVIRONMENT.md):
// the OTLP receiver and the debug exporter, nothing else.
const (
	otelcolVersion = "0.150.0"
	otelcolBuilder = `dist:
  name: otelcol-galago
  description: OpenTelemetry Collector for galago's end-to-end tests
  output_path: %s
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v0.150.0
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v0.150.0
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v1.56.0
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v1.56.0
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v1.56.0
`
	otelcolConfig = `receivers:
  otlp:
    protocols:
      grpc: {endpoint: "127.0.0.1:%d"}
      http: {endpoint: "127.0.0.1:%d"}
exporters:
  debug: {verbosity: detailed}
service:
  telemetry:
    metrics: {level: none}
  pipelines:
    metrics: {receivers: [otlp], exporters: [debug]}
    traces: {receivers: [otlp], exporters: [debug]}
`
)

// otelcol returns the collector binary, built once per machine into the
// user cache (a minute or two the first time).
func otelcol(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "galago-test", "otelcol-"+otelcolVersion)
	bin := filepath.Join(dir, "otelcol-galago")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "builder.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, otelcolBuilder, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "go.opentelemetry.io/collector/cmd/builder@v"+otelcolVersion, "--config", manifest)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the OpenTelemetry Collector: %v\n%s", err, out)
	}
	return bin
}

// otlpPoint is one data point the collector printed.
type otlpPoint struct {
	resource string // the resource's galago.test attribute
	name     string
	kind     string // Gauge, Sum, Histogram
	attrs    string // sorted name=value pairs
	value    float64
	count    uint64 // histograms
}

// otlpSpan is one span the collector printed.
type otlpSpan struct {
	name, kind, status string
	attrs              map[string]string
}

// collectorLog parses the debug exporter's detailed output as it comes.
type collectorLog struct {
	mu     sync.Mutex
	points []otlpPoint
	spans  []*otlpSpan
	raw    strings.Builder
}

func (c *collectorLog) consume(r *bufio.Scanner) {
	var res, name, kind string
	var attrs []string
	inAttrs := false
	var span *otlpSpan
	for r.Scan() {
		line := r.Text()
		c.mu.Lock()
		c.raw.WriteString(line + "\n")
		c.mu.Unlock()
		s := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(s, "ResourceMetrics #"), strings.HasPrefix(s, "ResourceSpans #"):
			res, span = "", nil
		case strings.HasPrefix(s, "Span #"):
			span = &otlpSpan{attrs: map[string]string{}}
			c.mu.Lock()
			c.spans = append(c.spans, span)
			c.mu.Unlock()
		case span != nil && strings.HasPrefix(s, "Name") && strings.Contains(s, ": "):
			_, v, _ := strings.Cut(s, ": ")
			c.setSpan(func() { span.name = v })
		case span != nil && strings.HasPrefix(s, "Kind") && strings.Contains(s, ": "):
			_, v, _ := strings.Cut(s, ": ")
			c.setSpan(func() { span.kind = v })
		case span != nil && strings.HasPrefix(s, "Status code") && strings.Contains(s, ": "):
			_, v, _ := strings.Cut(s, ": ")
			c.setSpan(func() { span.status = v })
		case span != nil && strings.HasPrefix(s, "-> "):
			k, v, _ := strings.Cut(strings.TrimPrefix(s, "-> "), ": ")
			v = strings.TrimSuffix(v, ")")
			if i := strings.Index(v, "("); i >= 0 {
				v = v[i+1:]
			}
			c.setSpan(func() { span.attrs[k] = v })
		case strings.HasPrefix(s, "-> galago.test: Str("):
			res = strings.TrimSuffix(strings.TrimPrefix(s, "-> galago.test: Str("), ")")
		case strings.HasPrefix(s, "-> Name: "):
			name = strings.TrimPrefix(s, "-> Name: ")
		case strings.HasPrefix(s, "-> DataType: "):
			kind = strings.TrimPrefix(s, "-> DataType: ")
		case strings.HasPrefix(s, "NumberDataPoints #"), strings.HasPrefix(s, "HistogramDataPoints #"):
			attrs, inAttrs = nil, false
		case s == "Data point attributes:":
			inAttrs = true
		case inAttrs && strings.HasPrefix(s, "-> "):
			k, v, _ := strings.Cut(strings.TrimPrefix(s, "-> "), ": ")
			v = strings.TrimSuffix(strings.TrimPrefix(v, "Str("), ")")
			attrs = append(attrs, k+"="+v)
		case strings.HasPrefix(s, "StartTimestamp:"):
			inAttrs = false
		case strings.HasPrefix(s, "Value: ") && kind != "Histogram":
			v, _ := strconv.ParseFloat(strings.TrimPrefix(s, "Value: "), 64)
			c.add(otlpPoint{resource: res, name: name, kind: kind, attrs: joinSorted(attrs), value: v})
		case strings.HasPrefix(s, "Count: ") && kind == "Histogram":
			n, _ := strconv.ParseUint(strings.TrimPrefix(s, "Count: "), 10, 64)
			c.add(otlpPoint{resource: res, name: name, kind: kind, attrs: joinSorted(attrs), count: n})
		}
	}
}

func (c *collectorLog) setSpan(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
}

// spansWhere counts the spans that match.
func (c *collectorLog) spansWhere(match func(*otlpSpan) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.spans {
		if match(s) {
			n++
		}
	}
	return n
}

// spansOf returns copies of the spans that match.
func (c *collectorLog) spansOf(match func(*otlpSpan) bool) []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []otlpSpan
	for _, s := range c.spans {
		if match(s) {
			out = append(out, otlpSpan{name: s.name, kind: s.kind, status: s.status, attrs: maps.Clone(s.attrs)})
		}
	}
	return out
}

func (c *collectorLog) add(p otlpPoint) {
	c.mu.Lock()
	c.points = append(c.points, p)
	c.mu.Unlock()
}

// last returns the newest point of each (name, attributes) for a resource.
func (c *collectorLog) last(resource string) map[string]otlpPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]otlpPoint{}
	for _, p := range c.points {
		if p.resource == resource {
			out[p.name+"{"+p.attrs+"}"] = p
		}
	}
	return out
}

func joinSorted(kv []string) string {
	s := slices.Clone(kv)
	slices.Sort(s)
	return strings.Join(s, ",")
}

// scrapeFamilies parses galago's /metrics.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func seriesKey(name string, m *dto.Metric) string {
	var kv []string
	for _, l := range m.GetLabel() {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	return name + "{" + joinSorted(kv) + "}"
}

// startCollector runs the test's collector on two free ports (OTLP/gRPC,
// OTLP/HTTP) and parses what its debug exporter prints.
func startCollector(t *testing.T) (grpcPort, httpPort int, got *collectorLog) {
	t.Helper()
	bin := otelcol(t)
	grpcPort, httpPort = freePort(t), freePort(t)
	conf := filepath.Join(t.TempDir(), "otelcol.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, otelcolConfig, grpcPort, httpPort), 0o644); err != nil {
		t.Fatal(err)
	}
	col := exec.Command(bin, "--config", conf)
	pipe, err := col.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	col.Stdout = col.Stderr
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Process.Kill(); _ = col.Wait() })
	got = &collectorLog{}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	go got.consume(sc)
	return grpcPort, httpPort, got
}

// TestOTLPToCollector: metric.out_channel "web_server,otlp" pushes what
// /metrics serves to a real OpenTelemetry Collector, over OTLP/gRPC and
// OTLP/HTTP (one galago each): every gala_gopher family arrives with its
// name, type and label set, and the values of series that stayed still
// between two scrapes arrive equal.
func TestOTLPToCollector(t *testing.T) {
	requireE2E(t)
	grpcPort, httpPort, got := startCollector(t)

	probe := `{"cmd":{"probe":["cpu","mem","fs"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`
	runs := map[string]*daemon{}
	for name, section := range map[string]string{
		"grpc": fmt.Sprintf(`otlp_endpoint = "127.0.0.1:%d"; otlp_protocol = "grpc"; otlp_insecure = true; otlp_export_interval = 2;`, grpcPort),
		"http": fmt.Sprintf(`otlp_endpoint = "http://127.0.0.1:%d"; otlp_protocol = "http/protobuf"; otlp_export_interval = 2;`, httpPort),
	} {
		d := startDaemon(t, daemonOpts{metricChannel: "web_server,otlp", galagoConf: section, env: []string{"OTEL_RESOURCE_ATTRIBUTES=galago.test=" + name}})
		if code, reply := d.put("baseinfo", probe); code != 200 {
			t.Fatalf("PUT /baseinfo: %d %s", code, reply)
		}
		runs[name] = d
	}
	for name, d := range runs {
		waitFor(t, 60*time.Second, name+" data at the collector", func() bool {
			return len(got.last(name)) > 0 && strings.Contains(d.scrape(), "gala_gopher_cpu_")
		})
		// Two scrapes 5 s apart around the collector's newest data (pushed
		// every 2 s): a series equal in both is what the exports sent.
		first := scrapeFamilies(t, d.metricsURL())
		time.Sleep(5 * time.Second)
		at := got.last(name)
		second := scrapeFamilies(t, d.metricsURL())
		compared, families := 0, 0
		for fname, fam := range second {
			if !strings.HasPrefix(fname, "gala_gopher_") {
				continue
			}
			families++
			wantKind := map[dto.MetricType]string{dto.MetricType_GAUGE: "Gauge", dto.MetricType_COUNTER: "Sum", dto.MetricType_HISTOGRAM: "Histogram"}[fam.GetType()]
			for _, m := range fam.GetMetric() {
				key := seriesKey(fname, m)
				p, ok := at[key]
				if !ok {
					t.Errorf("%s: %s not at the collector", name, key)
					continue
				}
				if p.kind != wantKind {
					t.Errorf("%s: %s arrived as %s, /metrics has %s", name, key, p.kind, fam.GetType())
				}
				if wantKind == "Histogram" {
					continue
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				if old := findSeries(first[fname], key, fname); old == nil || old.GetGauge().GetValue()+old.GetCounter().GetValue() != v {
					continue
				}
				compared++
				if diff := math.Abs(p.value - v); diff > 1e-6*math.Max(1, math.Abs(v)) {
					t.Errorf("%s: %s = %v at the collector, %v in /metrics", name, key, p.value, v)
				}
			}
		}
		if families < 3 || compared == 0 {
			t.Errorf("%s: %d gala_gopher families, %d still values compared: too few to say anything", name, families, compared)
		}
		t.Logf("%s: %d families, %d still values equal at the collector", name, families, compared)
		if !strings.Contains(d.scrape(), "galago_otlp_exports_total") {
			t.Errorf("%s: galago_otlp_exports_total missing from /metrics", name)
		}
	}
	if t.Failed() {
		got.mu.Lock()
		raw := got.raw.String()
		got.mu.Unlock()
		if len(raw) > 4000 {
			raw = raw[len(raw)-4000:]
		}
		t.Logf("collector output (tail):\n%s", raw)
	}
}

func findSeries(fam *dto.MetricFamily, key, name string) *dto.Metric {
	for _, m := range fam.GetMetric() {
		if seriesKey(name, m) == key {
			return m
		}
	}
	return nil
}

// TestOTLPTracesToCollector: with otlp_traces_percent = 100 every HTTP
// exchange the l7 probe sees becomes one span at a real collector: curl's
// 20 requests to python's http.server give exactly 20 client spans and 20
// server spans on that port, the 5 answered 404 have
// http.response.status_code 404 and error.type "404" (the other 15
// status code 200), and only the client's are errors (semantic
// conventions). Each request has a path of its own with an id and a
// query holding a secret: on each side the spans' url.path are exactly
// the paths curl requested, query left out, http.route their template,
// the name "GET {http.route}", and the secret is in no attribute.
func TestOTLPTracesToCollector(t *testing.T) {
	requireE2E(t)
	_, httpPort, got := startCollector(t)
	port := freePort(t)
	const total, missing = 20, 5
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "items"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Request i's path: /missing/<id> (404) for the first ones, then
	// /items/<id> (200, a file python serves).
	paths := make([]string, total)
	for i := range paths {
		paths[i] = fmt.Sprintf("/missing/%d", 1000+i)
		if i >= missing {
			paths[i] = fmt.Sprintf("/items/%d", 17+i)
			if err := os.WriteFile(filepath.Join(root, paths[i]), []byte("item\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := exec.Command("python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", root, strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	d := startDaemon(t, daemonOpts{galagoConf: fmt.Sprintf(`otlp_endpoint = "http://127.0.0.1:%d"; otlp_traces_percent = 100;`, httpPort)})
	waitFor(t, 10*time.Second, "python3 http.server", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	body := fmt.Sprintf(`{"cmd":{"probe":["l7_bytes_metrics","l7_rpc_metrics"]},"snoopers":{"proc_id":[%d],"proc_name":[{"comm":"^curl$"}]},"params":{"report_period":5,"l7_protocol":["http"]},"state":"running"}`, srv.Process.Pid)
	if code, reply := d.put("l7", body); code != 200 {
		t.Fatalf("PUT /l7: %d %s", code, reply)
	}
	time.Sleep(time.Second)
	const secret = "s3cret"
	for i, path := range paths {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", fmt.Sprintf("http://127.0.0.1:%d%s?token=%s%d", port, path, secret, i)).Output()
		if err != nil {
			t.Fatalf("curl: %v", err)
		}
		if want := map[bool]string{true: "404", false: "200"}[i < missing]; string(out) != want {
			t.Fatalf("curl %s: %s, want %s", path, out, want)
		}
	}
	onPort := func(s *otlpSpan) bool { return s.attrs["server.port"] == strconv.Itoa(port) }
	count := func(kind string, extra func(*otlpSpan) bool) int {
		return got.spansWhere(func(s *otlpSpan) bool { return onPort(s) && s.kind == kind && extra(s) })
	}
	all := func(*otlpSpan) bool { return true }
	deadline := time.Now().Add(30 * time.Second)
	for (count("Client", all) < total || count("Server", all) < total) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // anything more would be a duplicate
	clientErr := func(s *otlpSpan) bool { return s.attrs["error.type"] == "404" }
	status := func(code string) func(*otlpSpan) bool {
		return func(s *otlpSpan) bool { return s.attrs["http.response.status_code"] == code }
	}
	isError := func(s *otlpSpan) bool { return s.status == "Error" }
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"client spans", count("Client", all), total},
		{"server spans", count("Server", all), total},
		{"client spans with error.type 404", count("Client", clientErr), missing},
		{"server spans with error.type 404", count("Server", clientErr), missing},
		{"client spans with http.response.status_code 404", count("Client", status("404")), missing},
		{"server spans with http.response.status_code 404", count("Server", status("404")), missing},
		{"client spans with http.response.status_code 200", count("Client", status("200")), total - missing},
		{"server spans with http.response.status_code 200", count("Server", status("200")), total - missing},
		{"client spans with status Error", count("Client", isError), missing},
		{"server spans with status Error", count("Server", isError), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	for _, kind := range []string{"Client", "Server"} {
		var gotPaths []string
		for _, s := range got.spansOf(func(s *otlpSpan) bool { return onPort(s) && s.kind == kind }) {
			path := s.attrs["url.path"]
			gotPaths = append(gotPaths, path)
			route := "/items/{id}"
			if strings.HasPrefix(path, "/missing/") {
				route = "/missing/{id}"
			}
			if s.attrs["http.route"] != route || s.name != "GET "+route || s.attrs["http.request.method"] != "GET" {
				t.Errorf("%s span of url.path %q: name %q, http.route %q, http.request.method %q; want GET %s", kind, path, s.name, s.attrs["http.route"], s.attrs["http.request.method"], route)
			}
			for k, v := range s.attrs {
				if k == "url.query" || strings.Contains(v, secret) {
					t.Errorf("%s span of url.path %q: %s = %q: the query was exported", kind, path, k, v)
				}
			}
		}
		slices.Sort(gotPaths)
		if want := slices.Sorted(slices.Values(paths)); !slices.Equal(gotPaths, want) {
			t.Errorf("%s spans' url.path %q, want %q", kind, gotPaths, want)
		}
	}
	if t.Failed() {
		got.mu.Lock()
		raw := got.raw.String()
		byKind := map[string]int{}
		for _, s := range got.spans {
			byKind[s.kind+" port="+s.attrs["server.port"]+" pid="+s.attrs["process.pid"]+" "+s.name]++
		}
		got.mu.Unlock()
		t.Logf("spans by kind, server port, pid and name: %v", byKind)
		if len(raw) > 6000 {
			raw = raw[len(raw)-6000:]
		}
		t.Logf("collector output (tail):\n%s", raw)
	}
}
