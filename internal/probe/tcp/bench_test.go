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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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
	for range rounds {
		r, _ := wrk(b, d)
		offRPS += r
		p := New(withPeriods(time.Second, 5*time.Second))
		rt := newFakeRT()
		if err := p.Start(context.Background(), defaultCfg(), rt); err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuSelf()
		r, n := wrk(b, d)
		onRPS += r
		conns += 2 * n // client and server side of every request
		var bpfTime time.Duration
		for _, prog := range []*ebpf.Program{p.objs.OnSetState, p.objs.DumpOwners, p.objs.DumpTcp, p.objs.OnSendReset, p.objs.OnReceiveReset, p.objs.OnKfreeSkb, p.objs.OnExceedBufLimit} {
			if prog == nil {
				continue
			}
			if st, err := prog.Stats(); err == nil {
				bpfTime += st.Runtime
			}
		}
		probeCPU += (cpuSelf() - cpu0 + bpfTime).Seconds()
		rt.stop()
		_ = p.Stop()
		lost += rt.lost
	}
	b.ReportMetric(offRPS/rounds, "rps_off")
	b.ReportMetric(onRPS/rounds, "rps_on")
	b.ReportMetric(onRPS/offRPS, "ratio")
	b.ReportMetric(probeCPU/float64(conns)*100000, "cpu_s/100k_conns")
	b.ReportMetric(float64(lost), "lost")
}
