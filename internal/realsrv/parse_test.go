package realsrv

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestParseWrk(t *testing.T) {
	// wrk 4.1 against nginx, -t2 -c8 -d1s --latency -H "Connection: close".
	r, err := ParseWrk(readFixture(t, "wrk-close.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := LoadResult{Requests: 16919, Seconds: 1.01, Throughput: 16782.24, P99Ms: 3.59, HasP99: true, MeanMs: 0.54502}
	if !near(r.Requests, want.Requests) || !near(r.Seconds, want.Seconds) || !near(r.Throughput, want.Throughput) ||
		!near(r.P99Ms, want.P99Ms) || !r.HasP99 || r.Errors != 0 {
		t.Errorf("got %+v, want %+v", r, want)
	}

	withErrors := `Running 5s test @ http://127.0.0.1:1/
  Latency Distribution
     50%  120.00us
     99%  850.50us
  100 requests in 2.00m, 1.00KB read
  Socket errors: connect 3, read 4, write 0, timeout 1
  Non-2xx or 3xx responses: 2
Requests/sec:      0.83
`
	r, err = ParseWrk([]byte(withErrors))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 100 || r.Seconds != 120 || !near(r.P99Ms, 0.8505) || r.Errors != 10 || r.Throughput != 0.83 {
		t.Errorf("with errors: %+v", r)
	}
	for name, out := range map[string]string{
		"no total":   "Requests/sec: 5\n     99%  1.00ms\n",
		"no latency": "  100 requests in 1.00s, 1KB read\nRequests/sec: 100\n",
		"bad unit":   "  100 requests in 1.00d, 1KB read\n     99%  1.00ms\n",
	} {
		if _, err := ParseWrk([]byte(out)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParseRedisBenchmark(t *testing.T) {
	// redis-benchmark 7.0 --csv, -n 2000 -t set,get.
	r, err := ParseRedisBenchmark(readFixture(t, "redis-benchmark.csv"), 2000)
	if err != nil {
		t.Fatal(err)
	}
	secs := 2000/39215.69 + 2000/45454.55
	if r.Requests != 4000 || !near(r.Seconds, secs) || !near(r.Throughput, 4000/secs) || r.P99Ms != 0.135 || !r.HasP99 {
		t.Errorf("got %+v", r)
	}
	for name, out := range map[string]string{
		"no header":  `"SET","1.0","0","0","0","0","0","0"` + "\n",
		"no results": `"test","rps","p99_latency_ms"` + "\n",
		"bad rps":    `"test","rps","p99_latency_ms"` + "\n" + `"SET","x","1"` + "\n",
		"short line": `"test","rps","p99_latency_ms"` + "\n" + `"SET","1"` + "\n",
	} {
		if _, err := ParseRedisBenchmark([]byte(out), 10); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParsePgbench(t *testing.T) {
	// pgbench 15 -S -c 4 -j 2 -T 2.
	r, err := ParsePgbench(readFixture(t, "pgbench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 62200 || r.Throughput != 31190.874613 || !near(r.Seconds, 62200/31190.874613) || r.Errors != 0 ||
		r.MeanMs != 0.128 {
		t.Errorf("got %+v", r)
	}
	if _, err := ParsePgbench([]byte("pgbench: error: connection refused\n")); err == nil {
		t.Error("an error output parsed")
	}
	// Two log files, as pgbench -j 2 writes: 40 transactions of a real
	// run (slowest 1341 µs) and one of 5000 µs.
	dir := t.TempDir()
	prefix := filepath.Join(dir, "pgl")
	if err := os.WriteFile(prefix+".1", readFixture(t, "pgbench-log"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prefix+".1.1", []byte("0 1 5000 0 1795458137 74216\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p99, err := PgbenchP99(prefix)
	if err != nil {
		t.Fatal(err)
	}
	// 41 values: rank ceil(0.99*41) = 41, the 5000 µs of the second file.
	if p99 != 5 {
		t.Errorf("p99 %v ms, want 5", p99)
	}
	if left, _ := filepath.Glob(prefix + ".*"); len(left) != 0 {
		t.Errorf("log files left: %v", left)
	}
	if _, err := PgbenchP99(prefix); err == nil {
		t.Error("no log files: no error")
	}
	if _, err := parsePgbenchLog(strings.NewReader("0 1 x 0 1 2\n"), nil); err == nil {
		t.Error("bad latency parsed")
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 5, 0.99: 10, 0.1: 1, 0.91: 10, 0.9: 9} {
		if got := Quantile(v, q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
}

func TestParseStubStatus(t *testing.T) {
	st, err := parseStubStatus(readFixture(t, "stub_status.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st != (stubStatus{accepts: 16929, handled: 16929, requests: 16923}) {
		t.Errorf("got %+v", st)
	}
	for _, bad := range []string{"", "server accepts handled requests\n 1 2\n", "server accepts handled requests\n 1 x 3\n"} {
		if _, err := parseStubStatus([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRedisInfo(t *testing.T) {
	body := readFixture(t, "redis-info.txt")
	wire := "$" + itoa(len(body)) + "\r\n" + string(body) + "\r\n"
	got, n, err := readBulk(bufio.NewReader(strings.NewReader(wire + "+next\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(body) || n != len(wire) {
		t.Errorf("bulk: %d bytes of %d on the wire, want %d", len(got), n, len(wire))
	}
	info, err := parseRedisInfo(got)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"total_connections_received": "10", "total_commands_processed": "4002",
		"total_net_input_bytes": "162102", "total_net_output_bytes": "28049"} {
		if info[k] != v {
			t.Errorf("%s = %q, want %q", k, info[k], v)
		}
	}
	for _, bad := range []string{"-ERR unknown\r\n", "$x\r\n", "$10\r\nshort"} {
		if _, _, err := readBulk(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q read", bad)
		}
	}
	if _, err := parseRedisInfo([]byte("no colon here\r\n")); err == nil {
		t.Error("a line without colon parsed")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseMemcslap(t *testing.T) {
	// memcslap (libmemcached 1.1.4) -c 32 -t get -e 20000.
	r, err := ParseMemcslap(readFixture(t, "memcslap.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 623980+20000 || r.Seconds != 11.4 || !near(r.Throughput, 623980/11.4) || r.HasP99 {
		t.Errorf("got %+v", r)
	}
	if _, err := ParseMemcslap([]byte("Time total: 1.0 seconds.\n")); err == nil {
		t.Error("no get phase: parsed")
	}
}

func TestReadMemcachedStats(t *testing.T) {
	reply := "STAT pid 1\r\nSTAT total_connections 36\r\nSTAT bytes_written 1600919124\r\nEND\r\n"
	st, wire, err := readMemcachedStats(bufio.NewReader(strings.NewReader(reply + "extra")))
	if err != nil {
		t.Fatal(err)
	}
	if wire != len(reply) || st["total_connections"] != "36" || st["bytes_written"] != "1600919124" || len(st) != 3 {
		t.Errorf("got %v, %d bytes", st, wire)
	}
	for _, bad := range []string{"STAT x\r\nEND\r\n", "ERROR\r\n", "STAT a 1\r\n"} {
		if _, _, err := readMemcachedStats(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}

func TestParseCommandStats(t *testing.T) {
	info, err := parseRedisInfo([]byte("# Commandstats\r\ncmdstat_set:calls=20000,usec=9000,usec_per_call=0.45,rejected_calls=0,failed_calls=0\r\ncmdstat_get:calls=7,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseCommandStats(info)
	if err != nil || len(got) != 2 || got["set"] != 20000 || got["get"] != 7 {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := parseCommandStats(map[string]string{"cmdstat_x": "calls=z"}); err == nil {
		t.Error("bad calls parsed")
	}
}

func TestParseLatencyStats(t *testing.T) {
	info, err := parseRedisInfo([]byte("# Latencystats\r\nlatency_percentiles_usec_set:p50=1.003,p100=12.031\r\nlatency_percentiles_usec_config|get:p100=4.015\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseLatencyStats(info)
	if err != nil || len(got) != 2 || got["set"]["p50"] != 1.003 || got["set"]["p100"] != 12.031 || got["config|get"]["p100"] != 4.015 {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"p100", "p100=x"} {
		if _, err := parseLatencyStats(map[string]string{"latency_percentiles_usec_x": bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
