package realsrv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// Set applies server settings that take effect on reload (ALTER SYSTEM,
// then pg_reload_conf()), over the Unix socket: the workload port sees
// none of it.
func (p *Postgres) Set(ctx context.Context, settings map[string]string) error {
	args := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", p.dir, "-p", strconv.Itoa(p.port), "-U", "postgres", "-d", "postgres"}
	for k, v := range settings {
		// Each -c is its own transaction: ALTER SYSTEM runs in none.
		args = append(args, "-c", fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", k, strings.ReplaceAll(v, "'", "''")))
	}
	args = append(args, "-c", "SELECT pg_reload_conf()")
	if _, err := Run(ctx, exec.CommandContext(ctx, filepath.Join(p.bin, "psql"), args...)); err != nil {
		return fmt.Errorf("postgres settings: %w", err)
	}
	return nil
}

// EnableTLS copies a certificate and its key into the cluster's directory
// and turns TLS on (ssl is reloadable since PostgreSQL 10); clients that
// ask for TLS get it from then on.
func (p *Postgres) EnableTLS(ctx context.Context, certFile, keyFile string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dst := map[string]string{certFile: filepath.Join(p.dir, "server.crt"), keyFile: filepath.Join(p.dir, "server.key")}
	for src, to := range dst {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return err
		}
		if err := os.Chown(to, uid, gid); err != nil {
			return err
		}
	}
	return p.Set(ctx, map[string]string{"ssl": "on", "ssl_cert_file": dst[certFile], "ssl_key_file": dst[keyFile]})
}

// Log is the server's log file (stderr).
func (p *Postgres) Log() string { return p.log }

// Socket is the directory of the server's Unix socket.
func (p *Postgres) Socket() string { return p.dir }

// Pid is the postmaster's process id.
func (p *Postgres) Pid() int { return p.proc.Pid() }

// ReachableTempDir makes a temporary directory that the postgres user
// can reach (PostgreSQL must not run as root); the caller removes it.
func ReachableTempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
