package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prometheus is a real Prometheus server (Debian package) scraping galago.
type prometheus struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func startPrometheus(t *testing.T, target string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (make test-deps installs Debian's prometheus)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: galago
    static_configs:
      - targets: ['%s']
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{t: t, port: freePort(t)}
	p.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", p.port))
	log := &syncBuffer{}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", log.String())
		}
	})
	return p
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant PromQL query over Prometheus's HTTP API.
func (p *prometheus) query(q string) []promSample {
	p.t.Helper()
	resp, err := http.PostForm(fmt.Sprintf("http://127.0.0.1:%d/api/v1/query", p.port), url.Values{"query": {q}})
	if err != nil {
		return nil // not up yet
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		// Prometheus answers "Service Unavailable" (plain text) until its
		// storage is open.
		return nil
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		p.t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		p.t.Fatalf("query %s: %s", q, r.Error)
	}
	return r.Data.Result
}

func (s promSample) float(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("sample value %v: %v", s.Value, err)
	}
	return f
}

// meminfo reads one field (kB) of the host's /proc/meminfo.
func meminfo(t *testing.T, field string) float64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == field {
			n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/meminfo has no %s", field)
	return 0
}

// TestPrometheusScrapesBaseinfo: baseinfo enabled over REST, a real
// Prometheus scrapes galago, PromQL returns this host's gala_gopher_*
// series with values equal to /proc; stopped over REST, the series age out
// of the exporter and stop receiving samples in Prometheus.
func TestPrometheusScrapesBaseinfo(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{imdb: "max_tables_num = 1024; max_records_num = 1024; max_metrics_num = 64; record_timeout = 10;"})
	prom := startPrometheus(t, fmt.Sprintf("127.0.0.1:%d", d.metricPort))

	code, body := d.put("baseinfo", `{"cmd":{"probe":["cpu","mem","host"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`)
	if code != http.StatusOK || body != successReply {
		t.Fatalf("PUT /baseinfo: %d %s", code, body)
	}

	var mem []promSample
	waitFor(t, 60*time.Second, "gala_gopher_mem_total_kB in Prometheus", func() bool {
		mem = prom.query("gala_gopher_mem_total_kB")
		return len(mem) == 1
	})
	if got, want := mem[0].float(t), meminfo(t, "MemTotal"); got != want {
		t.Errorf("gala_gopher_mem_total_kB = %v, /proc/meminfo MemTotal = %v", got, want)
	}
	if swap := prom.query("gala_gopher_mem_swap_total_kB"); len(swap) != 1 {
		t.Errorf("gala_gopher_mem_swap_total_kB: %v", swap)
	} else if got, want := swap[0].float(t), meminfo(t, "SwapTotal"); got != want {
		t.Errorf("gala_gopher_mem_swap_total_kB = %v, /proc/meminfo SwapTotal = %v", got, want)
	}
	machineID := mem[0].Metric["machine_id"]
	if machineID == "" || mem[0].Metric["job"] != "galago" {
		t.Errorf("labels %v: want machine_id and job=galago", mem[0].Metric)
	}

	// One system_cpu series per CPU of this host.
	waitFor(t, 30*time.Second, "gala_gopher_cpu_user_msec", func() bool {
		return len(prom.query("gala_gopher_cpu_user_msec")) > 0
	})
	if n := len(prom.query("gala_gopher_cpu_user_msec")); n != runtime.NumCPU() {
		t.Errorf("%d gala_gopher_cpu_user_msec series, host has %d CPUs", n, runtime.NumCPU())
	}

	// system_os: the kernel version label is this host's.
	host := prom.query("gala_gopher_host_value")
	if len(host) != 1 {
		t.Fatalf("gala_gopher_host_value: %v", host)
	}
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if got := host[0].Metric["kversion"]; got != strings.TrimSpace(string(release)) {
		t.Errorf("kversion label %q, host %q", got, strings.TrimSpace(string(release)))
	}
	if got := host[0].Metric["machine_id"]; got != machineID {
		t.Errorf("machine_id differs between tables: %q vs %q", got, machineID)
	}

	// Stop: the probe stops and its series leave the exporter after the
	// record timeout, and Prometheus stops receiving samples.
	code, body = d.put("baseinfo", `{"state":"stopped"}`)
	if code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	if _, got := d.get("baseinfo"); !strings.Contains(got, `"state":"stopped"`) {
		t.Fatalf("GET after stop: %s", got)
	}
	waitFor(t, 30*time.Second, "baseinfo series to age out of /metrics", func() bool {
		return len(samples(d.scrape(), "gala_gopher_mem_total_kB")) == 0
	})
	waitFor(t, 30*time.Second, "Prometheus to stop receiving samples", func() bool {
		return len(prom.query("count_over_time(gala_gopher_mem_total_kB[3s])")) == 0
	})
}
