package mysql

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestRecordFixtures regenerates testdata/*.chunks from a real MariaDB
// (Debian's mariadb-server) and real clients (the mariadb command-line
// client, mariadb-slap, go-sql-driver/mysql). It runs only with
// GALAGO_L7_RECORD=1, as root, with mariadb-server and mariadb-client
// installed and Go module access for the Go client.
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record the fixtures from a real MariaDB")
	}
	addr, version := startMariaDB(t)
	cliVersion := strings.TrimSpace(run(t, "", "mariadb", "--version"))
	slapVersion := strings.TrimSpace(run(t, "", "mariadb-slap", "--version"))
	login := []string{"--no-defaults", "-h", "127.0.0.1", "-u", "galago", "-ppw", "--skip-ssl"}

	// The command-line client: COM_INIT_DB, text result sets, errors, a
	// procedure's multi-results, COM_QUIT.
	rec := l7test.Record(t, addr)
	_, rport, _ := net.SplitHostPort(rec.Addr())
	run(t, cliScript, "mariadb", append(login, "-P", rport, "--force")...)
	l7test.WriteFixture(t, filepath.Join("testdata", "mariadb_cli.chunks"), fmt.Sprintf("%s against %s:\nmariadb --skip-ssl --force < script:\n%s", cliVersion, version,
		strings.TrimSpace(cliScript)), l7test.LastConnection(t, rec))

	// A failed login: a wrong password (1045, 28000).
	rec = l7test.Record(t, addr)
	_, rport, _ = net.SplitHostPort(rec.Addr())
	cmd := exec.Command("mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", rport, "-u", "galago", "-pwrong", "--skip-ssl", "-e", "SELECT 1")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a wrong password logged in:\n%s", out)
	}
	l7test.WriteFixture(t, filepath.Join("testdata", "login_error.chunks"), fmt.Sprintf("%s against %s, a wrong password:\nmariadb --skip-ssl -u galago -pwrong -e 'SELECT 1'", cliVersion, version), l7test.LastConnection(t, rec))

	// mariadb-slap: 20 queries of a two-statement mix, one client.
	rec = l7test.Record(t, addr)
	_, rport, _ = net.SplitHostPort(rec.Addr())
	slap := []string{"--concurrency=1", "--iterations=1", "--number-of-queries=20", "--create-schema=slap", "--delimiter=;",
		"--create=CREATE TABLE t (a INT PRIMARY KEY AUTO_INCREMENT, b INT); INSERT INTO t (b) VALUES (1),(2)",
		"--query=SELECT b FROM t WHERE a = 1; UPDATE t SET b = b + 1 WHERE a = 2"}
	run(t, "", "mariadb-slap", append(append(login[:len(login):len(login)], "-P", rport), slap...)...)
	l7test.WriteFixture(t, filepath.Join("testdata", "mariadb_slap.chunks"), fmt.Sprintf("%s against %s, the connection that runs the queries:\nmariadb-slap --skip-ssl %s",
		slapVersion, version, strings.Join(slap, " ")), slapConn(t, rec))

	// go-sql-driver/mysql (testdata/mysqlclient).
	rec = l7test.Record(t, addr)
	dsn := "galago:pw@tcp(" + rec.Addr() + ")/shop?tls=false&multiStatements=true&maxAllowedPacket=65536"
	cmd = exec.Command("go", "run", ".", "-dsn", dsn)
	cmd.Dir = filepath.Join("testdata", "mysqlclient")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mysqlclient: %v\n%s", err, out)
	}
	l7test.WriteFixture(t, filepath.Join("testdata", "go_mysql.chunks"), fmt.Sprintf("go-sql-driver/mysql %s (testdata/mysqlclient) against %s:\n%s", goDriverVersion(t), version,
		strings.Replace(dsn, rec.Addr(), "HOST:PORT", 1)), l7test.LastConnection(t, rec))
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

const cliScript = `
SELECT 1;
use shop;
CREATE TABLE IF NOT EXISTS t (a INT PRIMARY KEY, b VARCHAR(20));
DELETE FROM t;
INSERT INTO t VALUES (1, 'one'), (2, 'two');
SELECT * FROM t ORDER BY a;
INSERT INTO t VALUES (1, 'again');
SELECT * FROM no_such_table;
SELECT 1 FROM DUAL WHERE 1 = 0;
SHOW TABLES;
delimiter //
CREATE OR REPLACE PROCEDURE two_sets() BEGIN SELECT 1 AS a; SELECT 2 AS b, 3 AS c; END//
delimiter ;
CALL two_sets();
DROP TABLE t;
`

// startMariaDB runs a private MariaDB for the test, with a user galago
// (password pw) and a database shop, and returns its address and version.
func startMariaDB(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	run(t, "", "mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var log bytes.Buffer
	srv := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+data, fmt.Sprintf("--port=%d", port),
		"--bind-address=127.0.0.1", "--socket="+sock, "--skip-log-bin")
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	root := []string{"--no-defaults", "-S", sock, "-u", "root"}
	for i := 0; ; i++ {
		if exec.Command("mariadb", append(root, "-e", "SELECT 1")...).Run() == nil {
			break
		}
		if i == 100 {
			t.Fatalf("mariadbd did not start:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	run(t, "", "mariadb", append(root, "-e", "CREATE USER 'galago'@'%' IDENTIFIED BY 'pw'; CREATE USER 'galago'@'localhost' IDENTIFIED BY 'pw';"+
		" GRANT ALL ON *.* TO 'galago'@'%'; GRANT ALL ON *.* TO 'galago'@'localhost'; CREATE DATABASE shop")...)
	version := strings.TrimSpace(run(t, "", "mariadb", append(root, "-N", "-e", "SELECT CONCAT('MariaDB ', VERSION())")...))
	return fmt.Sprintf("127.0.0.1:%d", port), version
}

func run(t *testing.T, stdin, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	// The client's script has failing statements on purpose (--force).
	if err != nil && (name != "mariadb" || !strings.Contains(stdin, "no_such_table")) {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// slapConn is the mariadb-slap connection that ran the queries (it opens
// others to create and drop the schema).
func slapConn(t *testing.T, rec *l7test.Recorder) []l7test.Segment {
	t.Helper()
	for _, c := range rec.Connections() {
		for _, s := range c {
			if s.FromClient && bytes.Contains(s.Data, []byte("UPDATE t SET")) {
				return c
			}
		}
	}
	t.Fatal("no connection ran the queries")
	return nil
}

func goDriverVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "mysqlclient", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "require" && f[1] == "github.com/go-sql-driver/mysql" {
			return f[2]
		}
	}
	return ""
}
