package dbsli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
)

// TestPostgreSLIPgbenchPrivileged: pgbench's tpcb-like script against
// Debian's PostgreSQL, plain and over TLS (the plaintext from the OpenSSL
// uprobes): the view counts exactly the statements of each kind the
// server ran on pgbench's TCP connections, as the server logs them
// (log_statement=all, each line prefixed by the client host: the
// harness's own statements come over the Unix socket).
func TestPostgreSLIPgbenchPrivileged(t *testing.T) {
	probetest.RequireTools(t, "pgbench")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	procs := realsrv.NewProcs()
	defer procs.StopAll()
	dir, err := realsrv.ReachableTempDir("galago-pgsli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg, err := realsrv.StartPostgresScale(ctx, procs, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	ca := testcert.NewCA(t, "galago-test-ca")
	certFile, keyFile := testcert.WriteFiles(t, dir, "server", ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth))
	if err := pg.EnableTLS(ctx, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if err := pg.Set(ctx, map[string]string{"log_statement": "all", "log_line_prefix": "%h "}); err != nil {
		t.Fatal(err)
	}
	p := NewPostgreSLI()
	tl := newTally(p)
	tl.setPort(pg.Port())
	rt := start(t, p, nil)
	select {
	case <-p.tlsReady:
	case <-ctx.Done():
		t.Fatal("TLS uprobes never attached")
	}
	for _, mode := range []string{"disable", "require"} {
		t.Run("sslmode="+mode, func(t *testing.T) {
			from := logSize(t, pg.Log())
			before, _ := tl.snapshot()
			cmd := exec.CommandContext(ctx, pg.Pgbench(), "-n", "-c", "2", "-t", "100", "-M", "simple",
				"-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "postgres")
			cmd.Env = append(os.Environ(), "PGSSLMODE="+mode)
			if out, err := realsrv.Run(ctx, cmd); err != nil {
				t.Fatalf("pgbench: %v\n%s", err, out)
			}
			var want map[string]uint64
			var n uint64
			probetest.WaitFor(t, "the server's log and the view to agree on the count", func() bool {
				want = loggedStatements(t, pg.Log(), from)
				n = 0
				for _, c := range want {
					n += c
				}
				return n >= 700 && tl.total()-sum(before) >= n
			})
			time.Sleep(300 * time.Millisecond) // a late extra count would show
			got, _ := tl.snapshot()
			for k, c := range before {
				got[k] -= c
				if got[k] == 0 {
					delete(got, k)
				}
			}
			for k, c := range want {
				if got[k] != c {
					t.Errorf("%s: view counted %d, the server logged %d", k, got[k], c)
				}
				delete(got, k)
			}
			for k, c := range got {
				t.Errorf("%s: view counted %d, the server logged none", k, c)
			}
			if want["UPDATE"] != 3*200 || want["INSERT"] != 200 || want["BEGIN"] != 200 || want["END"] != 200 {
				t.Errorf("the server logged %v, not pgbench's 200 transactions", want)
			}
		})
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
	var pgSli, pgMax bool
	for _, rec := range rt.Records() {
		if rec.Str("server_port") != strconv.Itoa(pg.Port()) {
			continue
		}
		pgSli = pgSli || rec.Table == table.PgSli
		pgMax = pgMax || rec.Table == table.PgMaxSli
		if rec.Str("app") != "POSTGRE" || rec.Str("client_ip") != "127.0.0.1" {
			t.Errorf("record %s: %v", rec.Table.Name, rec.Labels())
		}
	}
	if !pgSli || !pgMax {
		t.Errorf("pg_sli rows %v, pg_max_sli rows %v", pgSli, pgMax)
	}
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func logSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// loggedStatements counts the statements logged for TCP clients past
// offset from, by kind (the first keyword, upper case).
func loggedStatements(t *testing.T, path string, from int64) map[string]uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b[from:]))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "127.0.0.1 ") {
			continue
		}
		_, stmt, ok := strings.Cut(line, "LOG:  statement: ")
		if !ok {
			continue
		}
		kind, _, _ := strings.Cut(strings.TrimSpace(stmt), " ")
		out[strings.ToUpper(strings.TrimSuffix(kind, ";"))]++
	}
	return out
}
