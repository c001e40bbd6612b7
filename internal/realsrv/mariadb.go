package realsrv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is Debian's mariadbd with its data, socket and log under its
// directory, listening on a loopback port and a Unix socket. Grant tables
// are skipped (any user connects, no password). The harness reads the
// server's counters over the Unix socket, so galago, which traces TCP and
// UDP only, sees none of its traffic.
type MariaDB struct {
	dir, sock string
	port      int
	proc      *Proc
	admin     *sql.DB
}

// StartMariaDB initialises a data directory in dir/mariadb and starts the
// server on a free port, with durability off (the workloads measure the
// network path, not the disk).
func StartMariaDB(ctx context.Context, procs *Procs, dir string) (*MariaDB, error) {
	m := &MariaDB{dir: filepath.Join(dir, "mariadb")}
	m.sock = filepath.Join(m.dir, "mysqld.sock")
	data := filepath.Join(m.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	var err error
	if m.port, err = FreePort(); err != nil {
		return nil, err
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db")
	install.Dir = m.dir
	if _, err := procs.Run(ctx, install); err != nil {
		return nil, err
	}
	cmd := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+data,
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket="+m.sock,
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--log-error="+filepath.Join(m.dir, "error.log"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=0")
	cmd.Dir = m.dir
	if m.proc, err = procs.Start("mariadbd", cmd); err != nil {
		return nil, err
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", m.sock
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	m.admin = sql.OpenDB(conn)
	m.admin.SetMaxOpenConns(1)
	if err := WaitFor(ctx, 30*time.Second, "mariadbd ready", func() error {
		select {
		case <-m.proc.Exited():
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			return fmt.Errorf("mariadbd exited: %w\n%s", m.proc.Err(), Tail(log, 2000))
		default:
		}
		return m.admin.PingContext(ctx)
	}); err != nil {
		m.admin.Close()
		return nil, err
	}
	return m, nil
}

func (m *MariaDB) Name() string { return "mariadb" }
func (m *MariaDB) Port() int    { return m.port }

// Close closes the harness's connection (the server stops with procs).
func (m *MariaDB) Close() error { return m.admin.Close() }

// Exec runs statements over the Unix socket (harness set-up).
func (m *MariaDB) Exec(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if _, err := m.admin.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mariadb: %s: %w", s, err)
		}
	}
	return nil
}

// Status is SHOW GLOBAL STATUS, the server's counters, read over the Unix
// socket. Each read is one statement: it counts once in Questions and in
// Com_show_status.
func (m *MariaDB) Status(ctx context.Context) (map[string]uint64, error) {
	rows, err := m.admin.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, fmt.Errorf("mariadb: SHOW GLOBAL STATUS: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, rows.Err()
}
