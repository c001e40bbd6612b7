package realsrv

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LoadResult is what a load generator reports of one run, from its own
// output.
type LoadResult struct {
	// Requests completed (transactions for pgbench).
	Requests float64 `json:"requests"`
	// Seconds the load ran, as the tool measured it.
	Seconds float64 `json:"seconds"`
	// Throughput is Requests per second.
	Throughput float64 `json:"throughput"`
	// P99Ms is the 99th percentile latency in milliseconds; HasP99 is
	// false when the tool does not give it.
	P99Ms  float64 `json:"p99_ms"`
	HasP99 bool    `json:"has_p99"`
	// Errors the tool reported (socket errors, non-2xx, failed
	// transactions).
	Errors uint64 `json:"errors"`
	// MeanMs is the mean latency in milliseconds (wrk and pgbench).
	MeanMs float64 `json:"mean_ms,omitempty"`
}

var (
	wrkTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h),`)
	wrkRate    = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkP99     = regexp.MustCompile(`(?m)^\s+99(?:\.000)?%\s+([0-9.]+)(us|ms|s|m)\s*$`)
	wrkSockErr = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkMean    = regexp.MustCompile(`(?m)^\s+Latency\s+([0-9.]+)(us|ms|s|m)\s`)
)

// unitSeconds converts a wrk duration unit.
func unitSeconds(v float64, unit string) (float64, error) {
	switch unit {
	case "us":
		return v / 1e6, nil
	case "ms":
		return v / 1e3, nil
	case "s":
		return v, nil
	case "m":
		return v * 60, nil
	case "h":
		return v * 3600, nil
	}
	return 0, fmt.Errorf("unknown unit %q", unit)
}

// ParseWrk parses wrk's report (run with --latency).
func ParseWrk(out []byte) (LoadResult, error) {
	var r LoadResult
	m := wrkTotal.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk: no \"N requests in T\" line in:\n%s", out)
	}
	r.Requests, _ = strconv.ParseFloat(string(m[1]), 64)
	d, _ := strconv.ParseFloat(string(m[2]), 64)
	var err error
	if r.Seconds, err = unitSeconds(d, string(m[3])); err != nil {
		return r, fmt.Errorf("wrk duration: %w", err)
	}
	if m := wrkRate.FindSubmatch(out); m != nil {
		r.Throughput, _ = strconv.ParseFloat(string(m[1]), 64)
	} else if r.Seconds > 0 {
		r.Throughput = r.Requests / r.Seconds
	}
	if m := wrkP99.FindSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		s, err := unitSeconds(v, string(m[2]))
		if err != nil {
			return r, fmt.Errorf("wrk p99: %w", err)
		}
		r.P99Ms, r.HasP99 = s*1e3, true
	} else {
		return r, fmt.Errorf("wrk: no 99%% latency line (run with --latency) in:\n%s", out)
	}
	if m := wrkMean.FindSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		s, err := unitSeconds(v, string(m[2]))
		if err != nil {
			return r, fmt.Errorf("wrk mean latency: %w", err)
		}
		r.MeanMs = s * 1e3
	}
	if m := wrkSockErr.FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			n, _ := strconv.ParseUint(string(g), 10, 64)
			r.Errors += n
		}
	}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		r.Errors += n
	}
	return r, nil
}

// redisTest is one line of redis-benchmark --csv.
type redisTest struct {
	name     string
	rps, p99 float64
}

// ParseRedisBenchmark parses redis-benchmark --csv: a header naming the
// columns ("test","rps",...,"p99_latency_ms",...) and one line per test.
// n is the request count of each test (-n). The run's throughput is
// every request over the summed test times; its p99 is the worst test's.
func ParseRedisBenchmark(out []byte, n int) (LoadResult, error) {
	rd := csv.NewReader(bytes.NewReader(out))
	rd.FieldsPerRecord = -1
	var header []string
	var tests []redisTest
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return LoadResult{}, fmt.Errorf("redis-benchmark csv: %w\n%s", err, out)
		}
		if header == nil {
			if len(rec) > 0 && rec[0] == "test" {
				header = rec
			}
			continue
		}
		if len(rec) != len(header) {
			return LoadResult{}, fmt.Errorf("redis-benchmark csv: %d fields, header has %d: %q", len(rec), len(header), rec)
		}
		t := redisTest{name: rec[0]}
		for i, col := range header {
			var err error
			switch col {
			case "rps":
				t.rps, err = strconv.ParseFloat(rec[i], 64)
			case "p99_latency_ms":
				t.p99, err = strconv.ParseFloat(rec[i], 64)
			}
			if err != nil {
				return LoadResult{}, fmt.Errorf("redis-benchmark csv %s %s: %w", t.name, col, err)
			}
		}
		if t.rps <= 0 {
			return LoadResult{}, fmt.Errorf("redis-benchmark csv: test %s has rps %v", t.name, t.rps)
		}
		tests = append(tests, t)
	}
	if header == nil || !slices.Contains(header, "rps") || !slices.Contains(header, "p99_latency_ms") {
		return LoadResult{}, fmt.Errorf("redis-benchmark: no csv header with rps and p99_latency_ms in:\n%s", out)
	}
	if len(tests) == 0 {
		return LoadResult{}, fmt.Errorf("redis-benchmark: no test results in:\n%s", out)
	}
	r := LoadResult{HasP99: true}
	for _, t := range tests {
		r.Requests += float64(n)
		r.Seconds += float64(n) / t.rps
		r.P99Ms = math.Max(r.P99Ms, t.p99)
	}
	r.Throughput = r.Requests / r.Seconds
	return r, nil
}

var (
	pgTx     = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgFailed = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	pgTPS    = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgMean   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// ParsePgbench parses pgbench's summary; the p99 comes from its
// per-transaction logs (parsePgbenchLogs).
func ParsePgbench(out []byte) (LoadResult, error) {
	var r LoadResult
	m := pgTx.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("pgbench: no \"number of transactions actually processed\" in:\n%s", out)
	}
	r.Requests, _ = strconv.ParseFloat(string(m[1]), 64)
	m = pgTPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("pgbench: no tps line in:\n%s", out)
	}
	r.Throughput, _ = strconv.ParseFloat(string(m[1]), 64)
	if r.Throughput > 0 {
		r.Seconds = r.Requests / r.Throughput
	}
	if m := pgFailed.FindSubmatch(out); m != nil {
		r.Errors, _ = strconv.ParseUint(string(m[1]), 10, 64)
	}
	if m := pgMean.FindSubmatch(out); m != nil {
		r.MeanMs, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return r, nil
}

// parsePgbenchLog reads one pgbench -l file: per transaction
// "client_id transaction_no time script_no time_epoch time_us", time being
// the latency in µs. It appends the latencies in ms.
func parsePgbenchLog(r io.Reader, lat []float64) ([]float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			return lat, fmt.Errorf("pgbench log line %q: want 6 fields", sc.Text())
		}
		us, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return lat, fmt.Errorf("pgbench log line %q: %w", sc.Text(), err)
		}
		lat = append(lat, us/1e3)
	}
	return lat, sc.Err()
}

// PgbenchP99 reads every log file of a run (prefix.<pid>[.<thread>]) and
// returns the 99th percentile latency in ms, then removes the files.
func PgbenchP99(prefix string) (float64, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("pgbench wrote no log %s.*", prefix)
	}
	var lat []float64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return 0, err
		}
		lat, err = parsePgbenchLog(fh, lat)
		fh.Close()
		os.Remove(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
	}
	if len(lat) == 0 {
		return 0, fmt.Errorf("pgbench logs %s.* hold no transaction", prefix)
	}
	return Quantile(lat, 0.99), nil
}

// Quantile is the nearest-rank quantile of v (sorted in place).
func Quantile(v []float64, q float64) float64 {
	slices.Sort(v)
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// Seconds formats a duration for tools that take whole seconds.
func Seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
}

var (
	memcslapGet = regexp.MustCompile(`(?m)^Time to get\s+(\d+) keys by\s+\d+ threads:\s+([0-9.]+) seconds`)
	memcslapSet = regexp.MustCompile(`(?m)^Time to set\s+(\d+) keys:`)
)

// ParseMemcslap parses memcslap's report. Throughput is the get phase's;
// Requests counts the set phase's keys too, since the agent's cost is
// measured over the whole run.
func ParseMemcslap(out []byte) (LoadResult, error) {
	m := memcslapGet.FindSubmatch(out)
	if m == nil {
		return LoadResult{}, fmt.Errorf("memcslap: no \"Time to get N keys by T threads: S seconds\" in:\n%s", out)
	}
	var r LoadResult
	gets, _ := strconv.ParseFloat(string(m[1]), 64)
	r.Seconds, _ = strconv.ParseFloat(string(m[2]), 64)
	if r.Seconds <= 0 {
		return r, fmt.Errorf("memcslap: get phase of %s seconds", m[2])
	}
	r.Throughput = gets / r.Seconds
	r.Requests = gets
	if m := memcslapSet.FindSubmatch(out); m != nil {
		sets, _ := strconv.ParseFloat(string(m[1]), 64)
		r.Requests += sets
	}
	return r, nil
}
