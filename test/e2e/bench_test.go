package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
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
