package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/galago-project/galago/internal/realsrv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestPeriods(t *testing.T) {
	p := NewPeriods("gala_gopher_endpoint_tcp_")
	scrape := func(at time.Time, expo string) {
		t.Helper()
		e, err := parseExposition([]byte(expo))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(at, e); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1000, 0)
	// Period ending at 5 s seen twice, then the one ending at 10 s; a
	// second server row (another nginx worker) and a client row.
	scrape(t0, `# TYPE gala_gopher_endpoint_tcp_passive_open gauge
gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="1"} 100 5000
gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="2"} 7 5000
gala_gopher_endpoint_tcp_passive_open{role="server",server_port="81",tgid="1"} 1000 5000
galago_probe_up{probe="socket"} 1
`)
	scrape(t0.Add(2500*time.Millisecond), `gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="1"} 100 5000
gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="2"} 7 5000
`)
	scrape(t0.Add(7*time.Second), `gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="1"} 30 10000
gala_gopher_endpoint_tcp_passive_open{role="server",server_port="80",tgid="2"} 0 10000
gala_gopher_endpoint_tcp_active_open{role="client",server_port="80",tgid="3"} 137 10000
`)
	sum, n := p.Total("gala_gopher_endpoint_tcp_passive_open", map[string]string{"role": "server", "server_port": "80"})
	if sum != 137 || n != 2 {
		t.Errorf("passive_open on 80: %v over %d periods, want 137 over 2", sum, n)
	}
	if sum, _ := p.Total("gala_gopher_endpoint_tcp_active_open", map[string]string{"server_port": "80"}); sum != 137 {
		t.Errorf("active_open %v", sum)
	}
	if sum, n := p.Total("galago_probe_up", nil); sum != 0 || n != 0 {
		t.Error("a family outside the prefixes was kept")
	}
	if p.MaxGap() != 4500*time.Millisecond || p.Scrapes() != 3 {
		t.Errorf("gap %v, %d scrapes", p.MaxGap(), p.Scrapes())
	}
	e, _ := parseExposition([]byte("gala_gopher_endpoint_tcp_passive_open{role=\"server\"} 1\n"))
	if err := p.Add(t0, e); err == nil {
		t.Error("a sample without period timestamp was accepted")
	}
}

// testReport is a run of two rounds: none, tcp+socket (with accuracy) and
// a peer; round 2 in reverse order, as the runner does.
func testReport() *Report {
	start := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	arm := func(round int, agent, kind string, rps, p99, reqs float64, conns uint64, cost *Cost) ArmResult {
		return ArmResult{Round: round, Agent: agent, Kind: kind, Start: start,
			Load:  realsrv.LoadResult{Requests: reqs, Seconds: 10, Throughput: rps, P99Ms: p99, HasP99: true},
			Truth: realsrv.Counters{Conns: conns, Requests: uint64(reqs), HasRequests: true}, Cost: cost, BPFStats: true}
	}
	cost := func(cpu, bpf float64, rss uint64) *Cost {
		return &Cost{CPUSeconds: cpu, BPFSeconds: bpf, RSSBytes: rss, MapBytes: 8 << 20, Maps: 20, Programs: 12}
	}
	g1 := arm(1, "tcp+socket", "galago", 15000, 3, 150000, 150000, cost(0.9, 1.5, 35<<20))
	g1.Probes, g1.HeapBytes, g1.Lost = []string{"tcp", "socket"}, 9<<20, map[string]float64{"tcp": 0, "socket": 0, "proctrack": 0}
	g1.Accuracy = []CheckResult{{Name: "connections accepted", Truth: 150000, Galago: 150000, Periods: 4, Complete: true},
		{Name: "bytes sent", Truth: 1000, InFlight: 100, Galago: 950, Periods: 4, Complete: true}}
	g2 := arm(2, "tcp+socket", "galago", 16000, 2.5, 160000, 160000, cost(1.0, 1.6, 36<<20))
	g2.Probes, g2.HeapBytes, g2.Lost = []string{"tcp", "socket"}, 10<<20, map[string]float64{"tcp": 3, "socket": 0, "proctrack": 0}
	g2.Accuracy = []CheckResult{{Name: "connections accepted", Truth: 160000, Galago: 159997, Periods: 4, Complete: true},
		{Name: "bytes sent", Truth: 2000, InFlight: 100, Galago: 2000, Periods: 4, Complete: false}}
	w := WorkloadResult{Name: "nginx-close", Describe: "nginx, wrk", Server: "nginx", ConnPerRequest: true,
		Arms: []ArmResult{
			arm(1, "none", "none", 20000, 2, 200000, 200000, nil), g1, arm(1, "peer", "peer", 14000, 4, 140000, 140000, cost(2.8, 1.0, 80<<20)),
			arm(2, "peer", "peer", 15000, 4.2, 150000, 150000, cost(3.0, 1.05, 82<<20)), g2, arm(2, "none", "none", 20000, 2.2, 200000, 200000, nil),
		}}
	w.summarise([]ProbeSet{{Name: "tcp+socket", Probes: []ProbeConfig{tcpAll, socketAll}}}, true)
	return &Report{Commit: "abc1234", Start: start, End: start.Add(time.Minute),
		Machine:   Machine{CPU: "AMD EPYC", Cores: 2, MemBytes: 24 << 30, Kernel: "6.18.0", LoadStart: "0.10 0.20 0.30", LoadEnd: "1.00 0.50 0.40"},
		Settings:  Settings{Pairs: 2, DurationS: 10, ReportPeriodS: 5, SettleS: 5, ScrapeEveryS: 2.5, Peer: "coroot-node-agent --listen 127.0.0.1:10300"},
		Workloads: []WorkloadResult{w}}
}

func TestSummarise(t *testing.T) {
	r := testReport()
	s := r.Workloads[0].Summaries
	if len(s) != 2 || s[0].Agent != "tcp+socket" || s[1].Agent != "peer" {
		t.Fatalf("summaries %+v", s)
	}
	g := s[0]
	if len(g.Pairs) != 2 || g.Pairs[0].Ratio != 0.75 || g.Pairs[1].Ratio != 0.8 || !near(g.RatioMedian, 0.775) {
		t.Errorf("ratios %+v median %v", g.Pairs, g.RatioMedian)
	}
	// CPU per request: 0.9 s / 150k and 1.0 s / 160k -> 6 and 6.25 µs.
	if !near(g.CPUPerReqUs, 6.125) || !near(g.BPFPerReqUs, 10) || !near(g.CPUPerConnUs, 6.125) {
		t.Errorf("per request %v + %v, per conn %v", g.CPUPerReqUs, g.BPFPerReqUs, g.CPUPerConnUs)
	}
	if g.RSSBytes != 36<<20 || g.HeapBytes != 10<<20 || g.Lost["tcp"] != 3 || !near(g.P99On, 2.75) || !near(g.P99Off, 2.1) {
		t.Errorf("summary %+v", g)
	}
	if len(g.Accuracy) != 2 || g.Accuracy[0] != (CheckSummary{Name: "connections accepted", Truth: 310000, Galago: 309997, Exact: 1, Arms: 2, Worst: -3, Complete: true}) ||
		g.Accuracy[1] != (CheckSummary{Name: "bytes sent", Truth: 3000, Galago: 2950, Exact: 1, InFlight: 1, Arms: 2, Complete: false}) {
		t.Errorf("accuracy %+v", g.Accuracy)
	}
	if p := s[1]; p.Pairs[0].Ratio != 0.7 || p.Pairs[1].Ratio != 0.75 || p.HeapBytes != 0 {
		t.Errorf("peer %+v", p)
	}
}

func TestMarkdownGolden(t *testing.T) {
	got := []byte(testReport().Markdown())
	path := filepath.Join("testdata", "report.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("markdown differs from %s:\n%s", path, got)
	}
}

func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path, err := testReport().WriteJSON(filepath.Join(dir, "results"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "20261123T180000Z-abc1234.json" {
		t.Errorf("path %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Workloads) != 1 || len(back.Workloads[0].Arms) != 6 || back.Workloads[0].Arms[1].Cost.BPFSeconds != 1.5 {
		t.Errorf("round trip lost figures: %+v", back.Workloads)
	}
}

func TestSpliceSection(t *testing.T) {
	doc := "# Benchmarks\n\nintro\n\n" + BeginMarker + "\nold figures\n" + EndMarker + "\n\nhand-written notes\n"
	out, err := spliceSection([]byte(doc), "new figures\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nintro\n\n" + BeginMarker + "\nnew figures\n" + EndMarker + "\n\nhand-written notes\n"
	if string(out) != want {
		t.Errorf("got\n%s", out)
	}
	if _, err := spliceSection([]byte("no markers"), "x"); err == nil || !strings.Contains(err.Error(), BeginMarker) {
		t.Errorf("missing markers: %v", err)
	}
	if _, err := spliceSection([]byte(EndMarker+BeginMarker), "x"); err == nil {
		t.Error("markers in the wrong order accepted")
	}
}

func TestValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "galago")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	ok := Config{Galago: bin, Pairs: 1, Duration: time.Second, ReportPeriod: 5}
	w, s, err := ok.Validate()
	if err != nil || len(w) != len(Workloads) || len(s) != len(ProbeSets) {
		t.Fatalf("defaults: %v, %d workloads, %d sets", err, len(w), len(s))
	}
	f := ok
	f.Workloads, f.ProbeSets = []string{"redis"}, []string{"tcp+socket"}
	if w, s, err := f.Validate(); err != nil || len(w) != 1 || w[0].Name() != "redis" || len(s) != 1 || s[0].Name != "tcp+socket" {
		t.Errorf("filter: %v %v %v", w, s, err)
	}
	for name, mut := range map[string]func(*Config){
		"pairs":     func(c *Config) { c.Pairs = 0 },
		"duration":  func(c *Config) { c.Duration = time.Millisecond },
		"period":    func(c *Config) { c.ReportPeriod = 0 },
		"binary":    func(c *Config) { c.Galago = "/nonexistent/galago" },
		"workload":  func(c *Config) { c.Workloads = []string{"mysql"} },
		"probe set": func(c *Config) { c.ProbeSets = []string{"l7"} },
	} {
		c := ok
		mut(&c)
		if _, _, err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProbeBody(t *testing.T) {
	got := tcpAll.Body(5)
	want := `{"blacklist":{},"cmd":{"probe":["tcp_stats","tcp_rtt","tcp_srtt","tcp_windows","tcp_rate","tcp_sockbuf","tcp_abnormal"]},"params":{"report_period":5},"state":"running"}`
	if got != want {
		t.Errorf("got %s", got)
	}
	if m := networkChecks[0].matchLabels(8080); m["server_port"] != "8080" || m["role"] != "server" {
		t.Errorf("labels %v", m)
	}
}
