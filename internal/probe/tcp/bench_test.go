package tcp

// BenchmarkNginxWrk measures the probe's cost under connection churn: nginx
// (Debian nginx, everything under a temp dir, daemon off) on loopback,
// loaded by wrk with "Connection: close" (one TCP connection per request),
// alternately without and with the probe. Needs root, nginx and wrk:
//
//	GALAGO_PRIVILEGED_TESTS=1 go test -run '^$' -bench NginxWrk -benchtime 1x ./internal/probe/tcp
//
// Reported: requests/s without and with the probe and their ratio, probe
// CPU seconds (BPF run time + this process's CPU) per 100k connections,
// and ring buffer records lost.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe/probetest"
)

var reqRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
var reqTotal = regexp.MustCompile(`([0-9]+) requests in`)

func wrk(b *testing.B, d time.Duration) (rps float64, reqs int) {
	out, err := exec.Command("wrk", "-t2", "-c50", "-d"+d.String(), "-H", "Connection: close", "http://127.0.0.1:18080/").CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	m, n := reqRate.FindSubmatch(out), reqTotal.FindSubmatch(out)
	if m == nil || n == nil {
		b.Fatalf("wrk output: %s", out)
	}
	rps, _ = strconv.ParseFloat(string(m[1]), 64)
	reqs, _ = strconv.Atoi(string(n[1]))
	return rps, reqs
}

func cpuSelf() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkNginxWrk(b *testing.B) {
	if os.Getenv("GALAGO_PRIVILEGED_TESTS") != "1" {
		b.Skip("set GALAGO_PRIVILEGED_TESTS=1")
	}
	dir := b.TempDir()
	conf := fmt.Sprintf(`daemon off; worker_processes 2; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 20000; }
http { access_log off; client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen 127.0.0.1:18080; location / { return 200 "ok"; } } }`, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	ng := exec.Command("nginx", "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	ng.Stderr = os.Stderr
	if err := ng.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ng.Process.Kill(); _ = ng.Wait() }()
	time.Sleep(500 * time.Millisecond)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	const rounds, d = 3, 5 * time.Second
	var offRPS, onRPS, probeCPU float64
	var conns int
	var lost uint64
	progNs := map[string]time.Duration{}
	progRuns := map[string]uint64{}
	for range rounds {
		r, _ := wrk(b, d)
		offRPS += r
		p := New(withPeriods(time.Second, 5*time.Second))
		rt := probetest.NewRuntime(b)
		if err := p.Start(context.Background(), defaultCfg(), rt); err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuSelf()
		r, n := wrk(b, d)
		onRPS += r
		conns += 2 * n // client and server side of every request
		var bpfTime time.Duration
		for name, prog := range map[string]*ebpf.Program{"set_state": p.objs.OnSetState,
			"dump_tcp":   p.objs.DumpTcp,
			"send_reset": p.objs.OnSendReset, "receive_reset": p.objs.OnReceiveReset, "kfree_skb": p.objs.OnKfreeSkb, "exceed_buf_limit": p.objs.OnExceedBufLimit} {
			if prog == nil {
				continue
			}
			if st, err := prog.Stats(); err == nil {
				bpfTime += st.Runtime
				progNs[name] += st.Runtime
				progRuns[name] += st.RunCount
			}
		}
		probeCPU += (cpuSelf() - cpu0 + bpfTime).Seconds()
		rt.Stop()
		_ = p.Stop()
		lost += rt.LostCount()
	}
	b.ReportMetric(offRPS/rounds, "rps_off")
	b.ReportMetric(onRPS/rounds, "rps_on")
	b.ReportMetric(onRPS/offRPS, "ratio")
	b.ReportMetric(probeCPU/float64(conns)*100000, "cpu_s/100k_conns")
	b.ReportMetric(float64(lost), "lost")
	// Per program: ns per run and runs per connection end (the run time
	// kernel.bpf_stats gives, so whole-host traffic is in it too).
	for name, runs := range progRuns {
		if runs == 0 || (name != "set_state" && name != "kfree_skb") {
			continue
		}
		b.ReportMetric(float64(progNs[name].Nanoseconds())/float64(runs), name+"_ns/run")
		b.ReportMetric(float64(runs)/float64(conns), name+"_runs/conn")
	}
}

// BenchmarkConcurrentConns measures the probe's footprint with many
// concurrent connections: the test process holds the client ends of conns
// loopback connections, a helper process the server ends (2*conns observed
// sockets, aggregated into one client and one server row), then the probe
// starts and samples them. Needs root (BPF) and RLIMIT_NOFILE >= conns+100:
//
//	GALAGO_PRIVILEGED_TESTS=1 go test -run '^$' -bench ConcurrentConns -benchtime 20x ./internal/probe/tcp
//
// Reported: rss_delta_MiB (this process's RSS after Start and a warm-up
// sample, minus before Start: BPF maps are not in it, see map_MiB),
// cpu_ms/sample (user+system CPU of one collection: task_file walk,
// iter/tcp over every socket, decoding, aggregation; the iterators run in
// this thread's read() so their BPF time is in the system time),
// cpu_ms/report (rendering the rows), sockets (observed per sample).
func BenchmarkConcurrentConns(b *testing.B) {
	if os.Getenv("GALAGO_PRIVILEGED_TESTS") != "1" {
		b.Skip("set GALAGO_PRIVILEGED_TESTS=1")
	}
	const conns = 10000
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Max < conns+100 {
		b.Fatalf("RLIMIT_NOFILE hard limit %d < %d", lim.Max, conns+100)
	}
	if lim.Cur < conns+100 { // Go raises it at start-up; make sure
		cur := lim
		cur.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) }()
	}
	release := holdConns(b, conns)
	defer release()
	rss0 := rssBytes(b)
	// Periods far beyond the benchmark: the loop stays idle, the benchmark
	// drives sample and report itself.
	p := New(withPeriods(time.Hour, time.Hour))
	rt := probetest.NewRuntime(b)
	if err := p.Start(context.Background(), defaultCfg(), rt); err != nil {
		b.Fatal(err)
	}
	defer func() { rt.Stop(); _ = p.Stop() }()
	if err := p.sample(); err != nil { // warm-up: every connection known
		b.Fatal(err)
	}
	p.report()
	rss1 := rssBytes(b)
	var sockets int
	p.mu.Lock()
	sockets = p.agg.conns.len()
	p.mu.Unlock()
	if sockets < 2*conns {
		b.Fatalf("probe sees %d sockets, want at least %d", sockets, 2*conns)
	}
	var sampleCPU, reportCPU time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := cpuSelf()
		if err := p.sample(); err != nil {
			b.Fatal(err)
		}
		c1 := cpuSelf()
		p.report()
		sampleCPU += c1 - c0
		reportCPU += cpuSelf() - c1
	}
	b.StopTimer()
	var mapBytes uint64
	for _, m := range []*ebpf.Map{p.objs.GalagoSkOwners, p.objs.TcpCounters, p.objs.Events, p.objs.GalagoListenOwners, p.objs.Scratch} {
		mapBytes += mapMemlock(m)
	}
	b.ReportMetric(float64(int64(rss1)-int64(rss0))/(1<<20), "rss_delta_MiB")
	b.ReportMetric(float64(mapBytes)/(1<<20), "map_MiB")
	b.ReportMetric(float64(sampleCPU.Microseconds())/1000/float64(b.N), "cpu_ms/sample")
	b.ReportMetric(float64(reportCPU.Microseconds())/1000/float64(b.N), "cpu_ms/report")
	b.ReportMetric(float64(sockets), "sockets")
}

// holdConns opens n loopback connections to a helper process (this test
// binary in mode hold-server) that accepts and holds the server ends: each
// process needs only n descriptors (RLIMIT_NOFILE's hard limit cannot be
// raised without CAP_SYS_RESOURCE), and the probe's process RSS holds only
// the client ends. It returns a cleanup that closes everything.
func holdConns(b *testing.B, n int) func() {
	h := startHelper(b, "", "hold-server", "127.0.0.1:0", 0, n)
	addr := h.line()
	out := make([]net.Conn, 0, n)
	cleanup := func() {
		for _, c := range out {
			_ = c.Close()
		}
		h.wait()
	}
	for range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			cleanup()
			b.Fatalf("dial after %d connections: %v", len(out), err)
		}
		out = append(out, c)
	}
	h.expect("held")
	return cleanup
}

// rssBytes is this process's resident set after a full GC.
func rssBytes(b *testing.B) uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// mapMemlock is the kernel's memory accounting of a map (fdinfo memlock).
func mapMemlock(m *ebpf.Map) uint64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "memlock:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
