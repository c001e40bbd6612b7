package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssKiB reads VmRSS of a process.
func rssKiB(tb testing.TB, pid int) float64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// cpuSeconds reads utime+stime of a process.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// BenchmarkDaemonFootprint reports the daemon's RSS idle and with baseinfo
// (every sub-item, all processes) at a 5 s report period, and the CPU it
// spends per baseinfo period.
func BenchmarkDaemonFootprint(b *testing.B) {
	if os.Getenv("GALAGO_E2E") != "1" {
		b.Skip("set GALAGO_E2E=1 (make bench)")
	}
	d := startDaemon(b, daemonOpts{})
	pid := d.cmd.Process.Pid
	time.Sleep(3 * time.Second)
	idle := rssKiB(b, pid)
	code, body := d.put("baseinfo", `{"cmd":{"probe":["cpu","mem","nic","net","disk","fs","proc","host","con"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`)
	if code != http.StatusOK {
		b.Fatalf("PUT: %d %s", code, body)
	}
	time.Sleep(6 * time.Second) // first period done
	cpu0 := cpuSeconds(b, pid)
	const periods = 4
	time.Sleep(periods * 5 * time.Second)
	cpu := (cpuSeconds(b, pid) - cpu0) / periods
	busy := rssKiB(b, pid)
	series := len(strings.Split(d.scrape(), "\n"))
	b.ReportMetric(idle/1024, "idle_rss_MiB")
	b.ReportMetric(busy/1024, "baseinfo_rss_MiB")
	b.ReportMetric(cpu*1000, "baseinfo_cpu_ms/period")
	b.ReportMetric(float64(series), "exposition_lines")
}

// BenchmarkRESTPut measures a PUT /baseinfo round trip over loopback HTTP
// (parse, validate, merge, reconfigure the running probe, reply).
func BenchmarkRESTPut(b *testing.B) {
	if os.Getenv("GALAGO_E2E") != "1" {
		b.Skip("set GALAGO_E2E=1 (make bench)")
	}
	d := startDaemon(b, daemonOpts{})
	if code, body := d.put("baseinfo", `{"cmd":{"probe":["mem"]},"blacklist":{},"params":{"report_period":60},"state":"running"}`); code != http.StatusOK {
		b.Fatalf("PUT: %d %s", code, body)
	}
	client := &http.Client{}
	url := d.restURL("/baseinfo")
	i := 0
	for b.Loop() {
		i++
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(fmt.Sprintf(`json={"params":{"report_period":%d}}`, 30+i%2)))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// metricSum adds up the samples of a family in an exposition whose labels
// contain every fragment.
func metricSum(tb testing.TB, expo, family string, frags ...string) float64 {
	tb.Helper()
	var sum float64
	for _, l := range samples(expo, family) {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			tb.Fatalf("unparsable sample %q", l)
		}
		ok := true
		for _, f := range frags {
			ok = ok && strings.Contains(m[2], f)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			tb.Fatalf("sample %q: %v", l, err)
		}
		sum += v
	}
	return sum
}

// startNginx runs Debian's nginx on a loopback port with every path under a
// temp dir; it answers "ok" to every request.
func startNginx(b *testing.B) int {
	b.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		b.Fatal("nginx is not installed (make bench installs it)")
	}
	dir := b.TempDir()
	port := freePort(b)
	conf := fmt.Sprintf(`daemon off; worker_processes 1; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen 127.0.0.1:%[2]d; location / { return 200 "ok"; } } }`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("nginx", "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(b, 10*time.Second, "nginx", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return port
}

var wrkRequests = regexp.MustCompile(`(\d+) requests in`)

// runWrk loads nginx for d with one connection per request and returns the
// number of requests (= connections) completed.
func runWrk(b *testing.B, port int, d time.Duration) float64 {
	b.Helper()
	out, err := exec.Command("wrk", "-t2", "-c32", fmt.Sprintf("-d%ds", int(d.Seconds())),
		"-H", "Connection: close", fmt.Sprintf("http://127.0.0.1:%d/", port)).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk output: %s", out)
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n
}

// BenchmarkNginxWrkProbes: nginx under wrk (a new connection per request) on
// loopback, with the daemon's tcp and socket probes observing the whole host
// versus stopped, interleaved in one run. Reports the throughput ratio, the
// agent's CPU (daemon user+system time plus the kernel's BPF run time of its
// programs) per 100k connections, and the events lost (must be 0).
func BenchmarkNginxWrkProbes(b *testing.B) {
	if os.Getenv("GALAGO_E2E") != "1" {
		b.Skip("set GALAGO_E2E=1 (make bench)")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Fatal("wrk is not installed (make bench installs it)")
	}
	d := startDaemon(b, daemonOpts{})
	pid := d.cmd.Process.Pid
	port := startNginx(b)
	const rounds, dur = 3, 5 * time.Second
	all := map[string]string{
		"tcp":    `{"cmd":{"probe":["tcp_stats","tcp_rtt","tcp_srtt","tcp_windows","tcp_rate","tcp_sockbuf","tcp_abnormal"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`,
		"socket": `{"cmd":{"probe":["tcp_socket","udp_socket"]},"blacklist":{},"params":{"report_period":5},"state":"running"}`,
	}
	// GALAGO_BENCH_PROBES=tcp (or socket) measures one probe alone.
	on := all
	if only := os.Getenv("GALAGO_BENCH_PROBES"); only != "" {
		on = map[string]string{}
		for _, f := range strings.Split(only, ",") {
			on[f] = all[f]
		}
	}
	var offReq, onReq, agentCPU float64
	for range rounds {
		offReq += runWrk(b, port, dur)
		for f, body := range on {
			if code, reply := d.put(f, body); code != http.StatusOK {
				b.Fatalf("PUT /%s: %d %s", f, code, reply)
			}
		}
		cpu0 := cpuSeconds(b, pid)
		bpf0 := metricSum(b, d.scrape(), "galago_bpf_run_seconds_total")
		onReq += runWrk(b, port, dur)
		bpf1 := metricSum(b, d.scrape(), "galago_bpf_run_seconds_total")
		agentCPU += cpuSeconds(b, pid) - cpu0 + bpf1 - bpf0
		for f := range on {
			if code, reply := d.put(f, `{"state":"stopped"}`); code != http.StatusOK {
				b.Fatalf("stop /%s: %d %s", f, code, reply)
			}
		}
	}
	expo := d.scrape()
	lost := metricSum(b, expo, "galago_probe_events_lost_total", `probe="tcp"`) +
		metricSum(b, expo, "galago_probe_events_lost_total", `probe="socket"`)
	b.ReportMetric(offReq/rounds/dur.Seconds(), "rps_off")
	b.ReportMetric(onReq/rounds/dur.Seconds(), "rps_on")
	b.ReportMetric(onReq/offReq, "ratio")
	// Each request is one connection seen from both ends (client and server).
	b.ReportMetric(agentCPU/(2*onReq)*100000, "agent_cpu_s/100k_conns")
	b.ReportMetric(rssKiB(b, pid)/1024, "rss_MiB")
	b.ReportMetric(lost, "lost")
}
