package l7

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// TestRedisBenchmarkPrivileged: redis-benchmark SET and GET, 20000 each,
// without and with pipelining (-P 16): on both ends every command redis
// ran (INFO commandstats, redis-benchmark's CONFIG GETs included) is
// counted, per API too, and SET and GET are the -n asked.
//
// The load runs in bursts of 2000 SET and 2000 GET that fit the capture's
// ring buffer, each once the probe has read the one before: under -race
// the probe's reader is several times slower than redis-benchmark, and an
// unbroken run overflows the ring (counted as lost; without -race one run
// of 20000 is counted exactly).
func TestRedisBenchmarkPrivileged(t *testing.T) {
	for _, pipe := range []int{1, 16} {
		t.Run(fmt.Sprintf("P%d", pipe), func(t *testing.T) { testRedisBenchmark(t, pipe) })
	}
}

func testRedisBenchmark(t *testing.T, pipe int) {
	const n, bursts = 20000, 10
	e := newEnv(t, []string{"redis"}, false, "redis-server", "redis-benchmark")
	dir := filepath.Join(e.dir, "redis")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := realsrv.StartRedis(e.ctx, e.procs, dir)
	if err != nil {
		t.Fatal(err)
	}
	before, err := r.CommandStats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	server := rowMatch{tbl: table.L7Rpc, role: "server", port: r.Port(), protocol: "redis"}
	var after map[string]uint64
	for range bursts {
		e.run("redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(r.Port()), "-n", strconv.Itoa(n/bursts), "-c", "10",
			"-P", strconv.Itoa(pipe), "-t", "set,get", "-q")
		if after, err = r.CommandStats(e.ctx); err != nil {
			t.Fatal(err)
		}
		var sofar float64
		for name, calls := range after {
			if name != "info" {
				sofar += float64(calls - before[name])
			}
		}
		e.waitReq(server, sofar)
	}
	// The commands redis ran on the workload port: INFO is the test's
	// own, over the Unix socket.
	delta := map[string]float64{}
	var total float64
	for name, calls := range after {
		if d := float64(calls - before[name]); d > 0 && name != "info" {
			delta[name] = d
			total += d
		}
	}
	if delta["set"] != n || delta["get"] != n {
		t.Fatalf("redis commandstats: %v, want %d SET and %d GET", delta, n, n)
	}
	recs, _ := e.check(map[string]expect{
		"redis-server (server)":    {m: server, n: total},
		"redis-benchmark (client)": {m: rowMatch{tbl: table.L7Rpc, role: "client", port: r.Port(), protocol: "redis"}, n: total},
	})
	for _, role := range []string{"server", "client"} {
		for _, name := range slices.Sorted(maps.Keys(delta)) {
			api := strings.ToUpper(strings.ReplaceAll(name, "|", " "))
			if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: r.Port(), protocol: "redis", api: api}); s.req != delta[name] || s.resp != delta[name] {
				t.Errorf("%s l7_rpc_api %q: %v, want %v (commandstats)", role, api, s, delta[name])
			}
		}
	}
	e.checkLost()
}

// pgScript is a pgbench script of pgStatements statements.
const (
	pgScript = `\set aid random(1, 100000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT 1;
SELECT now();
`
	pgStatements = 3
)

// TestPgbenchPrivileged: pgbench with a 3-statement script, 2 clients of
// 50 transactions, simple and extended protocol: on both ends exactly
// transactions*statements exchanges (the pgsql parser's one per Query or
// Execute); pgbench's connection without queries counts none.
func TestPgbenchPrivileged(t *testing.T) {
	e := newEnv(t, []string{"pgsql"}, false)
	// PostgreSQL runs as postgres: its directory must be reachable.
	dir, err := os.MkdirTemp("", "galago-l7-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := realsrv.StartPostgresScale(e.ctx, e.procs, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(script, []byte(pgScript), 0o644); err != nil {
		t.Fatal(err)
	}
	const clients, perClient = 2, 50
	for _, mode := range []string{"simple", "extended"} {
		t.Run(mode, func(t *testing.T) {
			e.t = t
			// The rows of this mode's run only: the run before settled.
			e.rt.Take()
			out := e.run(pg.Pgbench(), "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "-n",
				"-M", mode, "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(clients), "-t", strconv.Itoa(perClient), "postgres")
			res, err := realsrv.ParsePgbench(out)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != clients*perClient || res.Errors != 0 {
				t.Fatalf("pgbench: %v transactions, %d failed, want %d\n%s", res.Requests, res.Errors, clients*perClient, out)
			}
			want := res.Requests * pgStatements
			e.check(map[string]expect{
				"postgres (server)": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: pg.Port(), protocol: "pgsql"}, n: want},
				"pgbench (client)":  {m: rowMatch{tbl: table.L7Rpc, role: "client", port: pg.Port(), protocol: "pgsql"}, n: want},
			})
		})
	}
	e.t = t
	e.checkLost()
}

// TestMemcslapPrivileged: memcslap set then get tests, 2 threads of 100
// operations: on both ends the set and get requests equal memcached's own
// cmd_set and cmd_get, per API too; each worker connection ends with a
// quit, which memcached answers by closing (the get test's key-loading
// connection closes without one: seen with strace), counted alike on both
// ends as requests without a response.
func TestMemcslapPrivileged(t *testing.T) {
	// memcslap's values are up to 4 KiB: a get's reply can pass the
	// capture's 4 KiB by a few bytes, its END cut, which the parser steps
	// over (it desynced there once, 4-12 losses counted in about a run in
	// four). The values come in bursts of ~1.6 MB: a 16 MiB ring
	// (galago.l7_ringbuf_mb) keeps a race-built reader's speed out of this
	// test, about the parser's counts; ring overflow and its loss count
	// are ring_privileged_test.go's.
	e := newEnvOf(t, New(WithRingSize(16<<20)), []string{"memcached"}, false, "memcached", "memcslap")
	m, err := realsrv.StartMemcached(e.ctx, e.procs)
	if err != nil {
		t.Fatal(err)
	}
	stat := func() (get, set, conns float64) {
		c, err := m.Counters(e.ctx) // connections, less the stats reads'
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.Stats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := strconv.ParseFloat(s["cmd_get"], 64)
		st, _ := strconv.ParseFloat(s["cmd_set"], 64)
		return g, st, float64(c.Conns)
	}
	g0, s0, c0 := stat()
	// memcslap's values are up to 4 KiB, each captured whole on both ends:
	// -e 100 and a pause for the probe to read the set test keep a test
	// within the capture's ring buffer under -race.
	server := rowMatch{tbl: table.L7Rpc, role: "server", port: m.Port(), protocol: "memcached"}
	e.run("memcslap", "-s", fmt.Sprintf("127.0.0.1:%d", m.Port()), "-c", "2", "-e", "100", "-t", "set")
	e.waitReq(server, 200+2)
	e.run("memcslap", "-s", fmt.Sprintf("127.0.0.1:%d", m.Port()), "-c", "2", "-e", "100", "-t", "get")
	g1, s1, c1 := stat()
	gets, sets, conns := g1-g0, s1-s0, c1-c0
	if gets != 200 || sets != 300 {
		t.Fatalf("memcached counted %v gets and %v sets, want 200 and 300", gets, sets)
	}
	// Each worker connection ends with a quit, which memcached answers by
	// closing; the get test's key-loading connection closes without one.
	// memcached counts neither quits nor (reliably, across memcslap
	// versions) which connection is which, so the quits are taken from the
	// server's rows and must be the client's, at most one per connection.
	e.waitReq(server, gets+sets+4)
	time.Sleep(time.Second) // a few report periods: a late quit is in too
	quits := sumRows(e.rt.Records(), rowMatch{tbl: table.L7RpcApi, role: "server", port: m.Port(), protocol: "memcached", api: "quit"}).req
	if quits < 4 || quits >= conns {
		t.Errorf("%v quit requests for %v connections, want one per worker connection (at least 4, fewer than the connections)", quits, conns)
	}
	recs, _ := e.check(map[string]expect{
		"memcached (server)": {m: server, n: gets + sets + quits, noResp: quits},
		"memcslap (client)":  {m: rowMatch{tbl: table.L7Rpc, role: "client", port: m.Port(), protocol: "memcached"}, n: gets + sets + quits, noResp: quits},
	})
	for _, role := range []string{"server", "client"} {
		if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: m.Port(), protocol: "memcached", api: "quit"}); s.req != quits || s.resp != 0 {
			t.Errorf("%s l7_rpc_api \"quit\": %v, want %v requests without response", role, s, quits)
		}
		for api, want := range map[string]float64{"get": gets, "set": sets} {
			if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: m.Port(), protocol: "memcached", api: api}); s.req != want || s.resp != want {
				t.Errorf("%s l7_rpc_api %q: %v, want %v (memcached stats)", role, api, s, want)
			}
		}
	}
	e.checkLost()
}
