package pgsql

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// pgBin is where Debian's postgresql-15 puts the server binaries.
const pgBin = "/usr/lib/postgresql/15/bin"

// TestRecordFixtures regenerates testdata/*.chunks from a real PostgreSQL
// and real clients (pgbench, psql, pgx). It runs only with
// GALAGO_L7_RECORD=1, as root or as a user that may run postgres, with
// postgresql-15 installed and Go module access for the pgx client.
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record the fixtures from a real PostgreSQL")
	}
	addr, version := startPostgres(t)
	host, port, _ := net.SplitHostPort(addr)
	pgbenchVersion := strings.TrimSpace(run(t, nil, "pgbench", "--version"))
	psqlVersion := strings.TrimSpace(run(t, nil, "psql", "--version"))
	run(t, nil, "pgbench", "-i", "-q", "-s", "1", "-h", host, "-p", port, "-U", "postgres", "postgres")

	for _, mode := range []string{"simple", "extended", "prepared"} {
		rec := l7test.Record(t, addr)
		_, rport, _ := net.SplitHostPort(rec.Addr())
		args := []string{"-n", "-t", "5", "-c", "1", "-M", mode, "-h", "127.0.0.1", "-p", rport, "-U", "postgres", "postgres"}
		run(t, []string{"PGSSLMODE=disable"}, "pgbench", args...)
		l7test.WriteFixture(t, filepath.Join("testdata", "pgbench_"+mode+".chunks"), fmt.Sprintf("%s, built-in tpcb-like script, against %s, the benchmark connection:\npgbench %s (PGSSLMODE=disable)",
			pgbenchVersion, version, strings.Join(args, " ")), l7test.LastConnection(t, rec))
	}

	// A failing statement: pgbench aborts the client after the error.
	script := filepath.Join(t.TempDir(), "fail.sql")
	if err := os.WriteFile(script, []byte(failScript), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := l7test.Record(t, addr)
	_, rport, _ := net.SplitHostPort(rec.Addr())
	args := []string{"-n", "-t", "2", "-c", "1", "-M", "extended", "-f", "fail.sql", "-h", "127.0.0.1", "-p", rport, "-U", "postgres", "postgres"}
	realArgs := slices.Clone(args)
	realArgs[slices.Index(realArgs, "fail.sql")] = script
	cmd := exec.Command("pgbench", realArgs...)
	cmd.Env = append(os.Environ(), "PGSSLMODE=disable")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("pgbench with a failing script succeeded:\n%s", out)
	}
	l7test.WriteFixture(t, filepath.Join("testdata", "pgbench_error.chunks"), fmt.Sprintf("%s against %s, the benchmark connection; the client aborts at the error:\npgbench %s (PGSSLMODE=disable), fail.sql:\n%s",
		pgbenchVersion, version, strings.Join(args, " "), strings.TrimSpace(failScript)), l7test.LastConnection(t, rec))

	// psql: SSLRequest answered 'N', multi-statement queries, COPY both
	// ways, notices, a notification, errors.
	script = filepath.Join(t.TempDir(), "psql.sql")
	if err := os.WriteFile(script, []byte(psqlScript), 0o644); err != nil {
		t.Fatal(err)
	}
	rec = l7test.Record(t, addr)
	_, rport, _ = net.SplitHostPort(rec.Addr())
	run(t, []string{"PGSSLMODE=prefer"}, "psql", "-X", "-q", "-h", "127.0.0.1", "-p", rport, "-U", "postgres", "-d", "postgres",
		"-c", "BEGIN; UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1; COMMIT", "-f", script)
	l7test.WriteFixture(t, filepath.Join("testdata", "psql.chunks"), fmt.Sprintf("%s against %s (PGSSLMODE=prefer: SSLRequest, answered N):\npsql -X -q -c 'BEGIN; UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1; COMMIT' -f psql.sql, psql.sql:\n%s",
		psqlVersion, version, strings.TrimSpace(psqlScript)), l7test.LastConnection(t, rec))

	// A failed login: an unknown database (3D000).
	rec = l7test.Record(t, addr)
	_, rport, _ = net.SplitHostPort(rec.Addr())
	cmd = exec.Command("psql", "-X", "-h", "127.0.0.1", "-p", rport, "-U", "postgres", "-d", "no_such_db", "-c", "SELECT 1")
	cmd.Env = append(os.Environ(), "PGSSLMODE=disable")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("psql to an unknown database succeeded:\n%s", out)
	}
	l7test.WriteFixture(t, filepath.Join("testdata", "login_error.chunks"), fmt.Sprintf("%s against %s (PGSSLMODE=disable), an unknown database:\npsql -X -d no_such_db -c 'SELECT 1'",
		psqlVersion, version), l7test.LastConnection(t, rec))

	// pgx: the extended protocol, batches, errors (testdata/pgxclient).
	rec = l7test.Record(t, addr)
	cmd = exec.Command("go", "run", ".", "-dsn", "postgres://postgres@"+rec.Addr()+"/postgres?sslmode=disable")
	cmd.Dir = filepath.Join("testdata", "pgxclient")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgxclient: %v\n%s", err, out)
	}
	l7test.WriteFixture(t, filepath.Join("testdata", "pgx.chunks"), fmt.Sprintf("pgx %s (testdata/pgxclient, sslmode=disable) against %s", pgxVersion(t), version), l7test.LastConnection(t, rec))
}

// TestWriteFuzzCorpus writes FuzzParser's seed corpus from the fixtures
// (run after TestRecordFixtures, with GALAGO_L7_RECORD=1): each fixture
// whole as the client, and captured 64 bytes at a time as the server.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to rewrite the seed corpus")
	}
	for name := range fixtures {
		l7test.WriteFuzzSeeds(t, filepath.Join("testdata", "fuzz", "FuzzParser"), name, l7test.Load(t, filepath.Join("testdata", name+".chunks")))
	}
}

const failScript = `
\set aid random(1, 100000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
SELECT abalance FROM pgbench_acounts WHERE aid = :aid;
`

const psqlScript = `
SELECT 1;
CREATE TEMP TABLE t (a int PRIMARY KEY, b text);
INSERT INTO t VALUES (1, 'one'), (2, 'two');
SELECT * FROM t ORDER BY a;
INSERT INTO t VALUES (1, 'again');
SELECT * FROM no_such_table;
SELECT 1/0;
DROP TABLE IF EXISTS no_such_table;
COPY t FROM STDIN;
3	three
4	four
\.
COPY t TO STDOUT;
LISTEN ch;
NOTIFY ch, 'hello';
SET application_name = 'fixture';
SHOW application_name;
SELECT 1 \; SELECT 2 \; SELECT pg_sleep(0);
SELECT 1 \; SELECT * FROM no_such_table \; SELECT 3;
`

// startPostgres runs a private PostgreSQL for the test and returns its
// address and version.
func startPostgres(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "galago-pgsql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		// postgres refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	data := filepath.Join(dir, "data")
	pg := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(pgBin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	pg("initdb", "-D", data, "-A", "trust", "-U", "postgres")
	pg("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "start",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, dir))
	t.Cleanup(func() { pg("pg_ctl", "-D", data, "-w", "-m", "fast", "stop") })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	version := strings.TrimSpace(run(t, nil, "psql", "-X", "-A", "-t", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres",
		"-c", "SELECT 'PostgreSQL ' || current_setting('server_version')", "postgres"))
	return addr, version
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func pgxVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pgxclient", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "require" && f[1] == "github.com/jackc/pgx/v5" {
			return f[2]
		}
	}
	return "v5"
}
