package l7

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// mysqlClient runs the MariaDB workload with go-sql-driver over one TCP
// connection to 127.0.0.1:GALAGO_L7_PORT, database galago (table kv):
// GALAGO_L7_N prepared INSERTs (a COM_STMT_PREPARE, EXECUTE and CLOSE
// each), GALAGO_L7_N text SELECTs, GALAGO_L7_ERRS text INSERTs of an
// existing key (1062) and GALAGO_L7_ERRS statements with a syntax error
// (1064). It prints the count of each "statement errno" (0: success).
func mysqlClient() error {
	n, errs := envInt("GALAGO_L7_N"), envInt("GALAGO_L7_ERRS")
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", "127.0.0.1:"+os.Getenv("GALAGO_L7_PORT"), "galago"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	counts := map[string]int{}
	outcome := func(what string, err error) error {
		var me *mysql.MySQLError
		switch {
		case err == nil:
			counts[what+" 0"]++
		case errors.As(err, &me):
			counts[fmt.Sprintf("%s %d", what, me.Number)]++
		default:
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	for i := range n {
		_, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", i, "v"+strconv.Itoa(i))
		if err := outcome("insert", err); err != nil {
			return err
		}
	}
	for i := range n {
		var v string
		err := db.QueryRow("SELECT v FROM kv WHERE k = " + strconv.Itoa(i)).Scan(&v)
		if err := outcome("select", err); err != nil {
			return err
		}
	}
	for range errs {
		_, err := db.Exec("INSERT INTO kv (k, v) VALUES (0, 'again')")
		if err := outcome("insert", err); err != nil {
			return err
		}
		_, err = db.Exec("SELEC v FROM kv")
		if err := outcome("selec", err); err != nil {
			return err
		}
	}
	printCounts(counts)
	return nil
}

// testMariaDB: MariaDB (Debian's mariadbd, its own datadir, TCP on a test
// port) and a go-sql-driver client (this test binary, re-executed): on
// both ends the exchanges equal the statements the server ran by its own
// counters (SHOW GLOBAL STATUS over the Unix socket, less the harness's
// own reads) and the client's outcomes: prepared INSERTs (one exchange per
// execute), text SELECTs, duplicate keys (1062) and syntax errors (1064),
// both client errors.
func testMariaDB(t *testing.T, e *env) {
	const n, errs = 100, 10
	dir := filepath.Join(e.dir, "mariadb")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := realsrv.StartMariaDB(e.ctx, e.procs, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Exec(e.ctx, "CREATE DATABASE galago", "CREATE TABLE galago.kv (k INT PRIMARY KEY, v VARCHAR(32))"); err != nil {
		t.Fatal(err)
	}
	before, err := m.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := e.runHelper("mysqlclient", "GALAGO_L7_N="+strconv.Itoa(n), "GALAGO_L7_ERRS="+strconv.Itoa(errs), "GALAGO_L7_PORT="+strconv.Itoa(m.Port()))
	after, err := m.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	delta := map[string]uint64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 && (len(k) > 4 && k[:4] == "Com_" || k == "Questions" || k == "Connections") {
			delta[k] = d
		}
	}
	t.Logf("mariadb status deltas: %v", delta)
	if got["insert 0"] != n || got["select 0"] != n || got["insert 1062"] != errs || got["selec 1064"] != errs {
		t.Fatalf("client outcomes %v, want %d inserts and selects, %d of 1062 and 1064", got, n, errs)
	}
	// The commands the server ran for the client: Questions counts each
	// statement (an execute of a prepared one, a text one, failed ones too;
	// not prepares and closes), this harness's SHOW GLOBAL STATUS (the
	// after read) and each connection's COM_QUIT, which has no response
	// and is no exchange.
	want := float64(delta["Questions"]) - float64(delta["Com_show_status"]) - float64(delta["Connections"])
	if clientSum := got["insert 0"] + got["select 0"] + got["insert 1062"] + got["selec 1064"]; want != clientSum {
		t.Fatalf("mariadb ran %v statements for the client by its counters, the client counted %v", want, clientSum)
	}
	recs, tallies := e.check(map[string]expect{
		"mariadbd (server)": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: m.Port(), protocol: "mysql"}, n: want},
		"client":            {m: rowMatch{tbl: table.L7Rpc, role: "client", port: m.Port(), protocol: "mysql"}, n: want},
	})
	for role, s := range tallies {
		if s.errs != 2*errs {
			t.Errorf("%s l7_rpc err_count %v, want %v", role, s.errs, 2*errs)
		}
	}
	for _, role := range []string{"server", "client"} {
		for api, w := range map[string][2]float64{
			"INSERT kv": {float64(delta["Com_insert"]), got["insert 1062"]},
			"SELECT kv": {float64(delta["Com_select"]), 0},
			"SELEC":     {got["selec 1064"], got["selec 1064"]},
		} {
			s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: m.Port(), protocol: "mysql", api: api})
			if s.req != w[0] || s.resp != w[0] || s.clientErr != w[1] || s.serverEr != 0 {
				t.Logf("%s l7_rpc_api rows: %v", role, apis(recs, m.Port(), role))
				t.Errorf("%s l7_rpc_api %q: %v, want %v requests and responses, %v client errors", role, api, s, w[0], w[1])
			}
		}
	}
}
