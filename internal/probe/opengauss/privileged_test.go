package opengauss

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// TestPgbenchTPSPrivileged: pgbench against Debian's PostgreSQL for 5 s:
// the database's tps over the poll before and the poll after is within
// 5% of the tps pgbench reports, and the row names the server's process
// (the postmaster, which listens on the port).
func TestPgbenchTPSPrivileged(t *testing.T) {
	probetest.RequireTools(t, "pgbench")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	procs := realsrv.NewProcs()
	defer procs.StopAll()
	dir, err := realsrv.ReachableTempDir("galago-opengauss-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg, err := realsrv.StartPostgresScale(ctx, procs, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "pg_stat_probe.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "servers:\n  - ip: \"127.0.0.1\"\n    port: \"%d\"\n    dbname: \"postgres\"\n    user: \"postgres\"\n    password: \"\"\n", pg.Port()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The ground truth's reads go to another database over the socket:
	// they add no commit to postgres's count.
	truth, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d dbname=template1 user=postgres", pg.Socket(), pg.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer truth.Close(context.Background())
	commits := func() uint64 {
		var n int64
		if err := truth.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return uint64(n)
	}

	p := New(WithConf(conf))
	p.reportEvery = time.Hour // polled by hand
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	p.poll(ctx) // connects (if the loop's first poll has not) and reads the first counts
	before := commits()
	p.poll(ctx)
	cmd := exec.CommandContext(ctx, pg.Pgbench(), "-n", "-c", "2", "-T", "5",
		"-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "postgres")
	out, err := realsrv.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("pgbench: %v\n%s", err, out)
	}
	res, err := realsrv.ParsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	// Backends count their commits when they exit.
	deadline := time.Now().Add(10 * time.Second)
	for commits()-before < uint64(res.Requests) {
		if time.Now().After(deadline) {
			t.Fatalf("pg_stat_database counts %d commits, pgbench made %v", commits()-before, res.Requests)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rt.Take()
	p.poll(ctx)
	var tps float64
	rows := 0
	for _, r := range rt.Records() {
		if r.Table != table.PgTps || r.Str("datname") != "postgres" {
			continue
		}
		rows++
		tps = r.Values[table.PgTps.MustIndex("tps")].Num
		if r.Str("tgid") != strconv.Itoa(pg.Pid()) || r.Str("server_port") != strconv.Itoa(pg.Port()) ||
			r.Str("app") != "POSTGRE" || r.Str("ins_id") == "" {
			t.Errorf("row %v, want tgid %d", r.Labels(), pg.Pid())
		}
	}
	if rows != 1 {
		t.Fatalf("%d pg_tps rows for postgres", rows)
	}
	t.Logf("tps %.1f, pgbench's %.1f (%d transactions)", tps, res.Throughput, int(res.Requests))
	if math.Abs(tps-res.Throughput) > 0.05*res.Throughput {
		t.Errorf("tps %.1f, pgbench reports %.1f", tps, res.Throughput)
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors", n)
	}
}
