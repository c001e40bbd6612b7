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

	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// TestRedisBenchmarkPrivileged: redis-benchmark SET and GET, 20000 each,
// without and with pipelining (-P 16): on both ends every command redis
// ran (INFO commandstats, redis-benchmark's CONFIG GETs included) is
// counted, per API too, and SET and GET are the -n asked.
func TestRedisBenchmarkPrivileged(t *testing.T) {
	for _, pipe := range []int{1, 16} {
		t.Run(fmt.Sprintf("P%d", pipe), func(t *testing.T) { testRedisBenchmark(t, pipe) })
	}
}

func testRedisBenchmark(t *testing.T, pipe int) {
	const n = 20000
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
	e.run("redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(r.Port()), "-n", strconv.Itoa(n), "-c", "10",
		"-P", strconv.Itoa(pipe), "-t", "set,get", "-q")
	after, err := r.CommandStats(e.ctx)
	if err != nil {
		t.Fatal(err)
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
		"redis-server (server)":    {rowMatch{tbl: table.L7Rpc, role: "server", port: r.Port(), protocol: "redis"}, total},
		"redis-benchmark (client)": {rowMatch{tbl: table.L7Rpc, role: "client", port: r.Port(), protocol: "redis"}, total},
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
	e := newEnv(t, []string{"pgsql"}, false, "su")
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
			start := len(e.rt.Records())
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
			// The rows of this mode's run only: the run before settled.
			e.rt.Take()
			_ = start
			e.check(map[string]expect{
				"postgres (server)": {rowMatch{tbl: table.L7Rpc, role: "server", port: pg.Port(), protocol: "pgsql"}, want},
				"pgbench (client)":  {rowMatch{tbl: table.L7Rpc, role: "client", port: pg.Port(), protocol: "pgsql"}, want},
			})
		})
	}
	e.t = t
	e.checkLost()
}

// TestMemcslapPrivileged: memcslap set then get tests, 2 threads: on both
// ends the set and get requests equal memcached's own cmd_set and cmd_get.
func TestMemcslapPrivileged(t *testing.T) {
	e := newEnv(t, []string{"memcached"}, false, "memcached", "memcslap")
	m, err := realsrv.StartMemcached(e.ctx, e.procs)
	if err != nil {
		t.Fatal(err)
	}
	stat := func() (get, set float64) {
		s, err := m.Stats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := strconv.ParseFloat(s["cmd_get"], 64)
		st, _ := strconv.ParseFloat(s["cmd_set"], 64)
		return g, st
	}
	g0, s0 := stat()
	for _, test := range []string{"set", "get"} {
		e.run("memcslap", "-s", fmt.Sprintf("127.0.0.1:%d", m.Port()), "-c", "2", "-e", "500", "-t", test)
	}
	g1, s1 := stat()
	gets, sets := g1-g0, s1-s0
	if gets == 0 || sets == 0 {
		t.Fatalf("memcached counted %v gets and %v sets", gets, sets)
	}
	recs, _ := e.check(map[string]expect{
		"memcached (server)": {rowMatch{tbl: table.L7Rpc, role: "server", port: m.Port(), protocol: "memcached"}, gets + sets},
		"memcslap (client)":  {rowMatch{tbl: table.L7Rpc, role: "client", port: m.Port(), protocol: "memcached"}, gets + sets},
	})
	for _, role := range []string{"server", "client"} {
		for api, want := range map[string]float64{"get": gets, "set": sets} {
			if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: m.Port(), protocol: "memcached", api: api}); s.req != want || s.resp != want {
				t.Errorf("%s l7_rpc_api %q: %v, want %v (memcached stats)", role, api, s, want)
			}
		}
	}
	e.checkLost()
}
