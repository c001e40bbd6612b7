package realsrv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Counters are a server's own monotonic counts for the workload's port,
// corrected for the harness's own reads: the ground truth that galago's
// figures are compared with. Has* say which the server can give.
type Counters struct {
	Conns       uint64 `json:"conns"`     // TCP connections accepted on the workload port
	Requests    uint64 `json:"requests"`  // requests (commands) the server handled
	BytesIn     uint64 `json:"bytes_in"`  // bytes received on the workload port's connections
	BytesOut    uint64 `json:"bytes_out"` // bytes sent on them
	HasRequests bool   `json:"has_requests"`
	HasBytes    bool   `json:"has_bytes"`
	// BytesOutInFlight bounds the part of BytesOut that the client may
	// never have acknowledged: answers to requests in flight when the
	// load generator stopped and closed its connections (wrk). The
	// kernel's bytes_acked, which galago reports, leaves them out.
	BytesOutInFlight uint64 `json:"bytes_out_in_flight,omitempty"`
}

// Sub is c − before, field by field.
func (c Counters) Sub(before Counters) Counters {
	return Counters{
		Conns: c.Conns - before.Conns, Requests: c.Requests - before.Requests,
		BytesIn: c.BytesIn - before.BytesIn, BytesOut: c.BytesOut - before.BytesOut,
		HasRequests: c.HasRequests, HasBytes: c.HasBytes, BytesOutInFlight: c.BytesOutInFlight,
	}
}

// Add is c + o, field by field (the in-flight bounds too: each load's
// stop leaves its own answers in flight).
func (c Counters) Add(o Counters) Counters {
	return Counters{
		Conns: c.Conns + o.Conns, Requests: c.Requests + o.Requests,
		BytesIn: c.BytesIn + o.BytesIn, BytesOut: c.BytesOut + o.BytesOut,
		HasRequests: c.HasRequests && o.HasRequests, HasBytes: c.HasBytes && o.HasBytes,
		BytesOutInFlight: c.BytesOutInFlight + o.BytesOutInFlight,
	}
}

// Server is one real server the workloads load, started once per run on a
// loopback port and shared by every arm.
type Server interface {
	Name() string
	// Port is the TCP port the load generator connects to.
	Port() int
	// Counters reads the server's own counters. Reads never use the
	// workload port, so galago sees no harness traffic there.
	Counters(ctx context.Context) (Counters, error)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func WaitTCP(ctx context.Context, port int, what string) error {
	return WaitFor(ctx, 20*time.Second, what, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// --- nginx ---

// Nginx is Debian's nginx with every path under its directory: the
// workload port answers "ok" to every request; a second port serves
// stub_status, nginx's own accepted-connection and request counters.
type Nginx struct {
	dir              string
	port, statusPort int
	reads            uint64 // stub_status requests made so far
	proc             *Proc
}

// NginxOptions are what a test adds to the bench's nginx.
type NginxOptions struct {
	// Workers is worker_processes (0: auto, one per core).
	Workers int
	// CertFile and KeyFile, when set, make the workload port TLS.
	CertFile, KeyFile string
	// Locations are added to the workload server block, e.g.
	// `location = /e404 { return 404; }`.
	Locations string
}

// StartNginx starts nginx under dir: every request answered "ok".
func StartNginx(ctx context.Context, procs *Procs, dir string) (*Nginx, error) {
	return StartNginxWith(ctx, procs, dir, NginxOptions{})
}

// StartNginxWith starts nginx under dir with o.
func StartNginxWith(ctx context.Context, procs *Procs, dir string, o NginxOptions) (*Nginx, error) {
	n := &Nginx{dir: dir}
	var err error
	if n.port, err = FreePort(); err != nil {
		return nil, err
	}
	if n.statusPort, err = FreePort(); err != nil {
		return nil, err
	}
	// worker_processes auto: one per core, as a production nginx; access
	// log off so that the server's own cost is the request path only.
	workers, tls := "auto", ""
	if o.Workers > 0 {
		workers = strconv.Itoa(o.Workers)
	}
	if o.CertFile != "" {
		tls = fmt.Sprintf(" ssl; ssl_certificate %s; ssl_certificate_key %s", o.CertFile, o.KeyFile)
	}
	conf := fmt.Sprintf(`daemon off; worker_processes %[4]s; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 16384; }
http {
  access_log off; client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s; scgi_temp_path %[1]s; keepalive_requests 1000000;
  server { listen 127.0.0.1:%[2]d reuseport%[5]s; location / { return 200 "ok"; } %[6]s }
  server { listen 127.0.0.1:%[3]d; location / { stub_status; } }
}
`, dir, n.port, n.statusPort, workers, tls, o.Locations)
	if err := WriteFile(filepath.Join(dir, "nginx.conf"), conf, 0o644); err != nil {
		return nil, err
	}
	if n.proc, err = procs.Start("nginx", exec.Command("nginx", "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)); err != nil {
		return nil, err
	}
	if err := WaitTCP(ctx, n.port, "nginx"); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.proc.Output.String())
	}
	if err := WaitTCP(ctx, n.statusPort, "nginx stub_status"); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Nginx) Name() string { return "nginx" }
func (n *Nginx) Port() int    { return n.port }

// Counters reads stub_status. Its accepts and requests include the
// status request itself (counted when accepted, before the reply), so
// every status read so far is taken out.
func (n *Nginx) Counters(ctx context.Context) (Counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", n.statusPort), nil)
	if err != nil {
		return Counters{}, err
	}
	// One connection per read, so the correction is one per read.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return Counters{}, fmt.Errorf("nginx stub_status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Counters{}, fmt.Errorf("nginx stub_status: %w", err)
	}
	n.reads++
	st, err := parseStubStatus(body)
	if err != nil {
		return Counters{}, err
	}
	return Counters{Conns: st.accepts - n.reads, Requests: st.requests - n.reads, HasRequests: true}, nil
}

type stubStatus struct{ accepts, handled, requests uint64 }

// parseStubStatus parses nginx's stub_status page:
//
//	Active connections: 1
//	server accepts handled requests
//	 16 16 31
//	Reading: 0 Writing: 1 Waiting: 0
func parseStubStatus(b []byte) (stubStatus, error) {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "server accepts handled requests" || i+1 >= len(lines) {
			continue
		}
		f := strings.Fields(lines[i+1])
		if len(f) != 3 {
			break
		}
		var v [3]uint64
		for j := range f {
			n, err := strconv.ParseUint(f[j], 10, 64)
			if err != nil {
				return stubStatus{}, fmt.Errorf("nginx stub_status: %q: %w", lines[i+1], err)
			}
			v[j] = n
		}
		return stubStatus{accepts: v[0], handled: v[1], requests: v[2]}, nil
	}
	return stubStatus{}, fmt.Errorf("nginx stub_status: no counters in %q", b)
}

// --- redis ---

// Redis is redis-server on a loopback port, with a Unix socket for the
// harness's INFO reads (redis counts them, galago's TCP probes do not see
// them).
type Redis struct {
	port   int
	sock   string
	reads  uint64 // INFO reads so far
	inFix  uint64 // command bytes of the INFO reads
	outFix uint64 // reply bytes of the earlier INFO reads
	proc   *Proc
}

// StartRedis starts redis-server under dir.
func StartRedis(ctx context.Context, procs *Procs, dir string) (*Redis, error) {
	r := &Redis{sock: filepath.Join(dir, "redis.sock")}
	var err error
	if r.port, err = FreePort(); err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--unixsocket", r.sock, "--unixsocketperm", "700", "--protected-mode", "no")
	if r.proc, err = procs.Start("redis-server", cmd); err != nil {
		return nil, err
	}
	if err := WaitTCP(ctx, r.port, "redis-server"); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, r.proc.Output.String())
	}
	return r, nil
}

func (r *Redis) Name() string { return "redis" }
func (r *Redis) Port() int    { return r.port }

// Counters reads INFO stats over the Unix socket. Every read is one
// connection and one command's input, counted by redis before it answers
// (so this read's are in); its reply is counted after, so only the
// earlier replies are in.
func (r *Redis) Counters(ctx context.Context) (Counters, error) {
	info, wire, err := r.info(ctx, "stats")
	if err != nil {
		return Counters{}, err
	}
	get := func(k string) (uint64, error) {
		v, ok := info[k]
		if !ok {
			return 0, fmt.Errorf("redis INFO stats: no %s", k)
		}
		return strconv.ParseUint(v, 10, 64)
	}
	var vals [4]uint64
	for i, k := range []string{"total_connections_received", "total_commands_processed", "total_net_input_bytes", "total_net_output_bytes"} {
		if vals[i], err = get(k); err != nil {
			return Counters{}, err
		}
	}
	out := Counters{
		Conns: vals[0] - r.reads,
		// The command counter grows once the command has run: this
		// read's INFO is not in it yet.
		Requests: vals[1] - (r.reads - 1),
		BytesIn:  vals[2] - r.inFix,
		BytesOut: vals[3] - r.outFix,
		HasBytes: true, HasRequests: true,
	}
	r.outFix += uint64(wire)
	return out, nil
}

// CommandStats reads INFO commandstats: the calls of each command
// (lower case) since start, this read's INFO not included.
func (r *Redis) CommandStats(ctx context.Context) (map[string]uint64, error) {
	info, wire, err := r.info(ctx, "commandstats")
	if err != nil {
		return nil, err
	}
	r.outFix += uint64(wire)
	return parseCommandStats(info)
}

// LatencyStats reads INFO latencystats: per command (lower case) the
// percentiles of its execution time redis tracks
// (latency-tracking-info-percentiles), keyed "p50", "p100", ..., in µs.
func (r *Redis) LatencyStats(ctx context.Context) (map[string]map[string]float64, error) {
	info, wire, err := r.info(ctx, "latencystats")
	if err != nil {
		return nil, err
	}
	r.outFix += uint64(wire)
	return parseLatencyStats(info)
}

// parseLatencyStats reads INFO latencystats'
// "latency_percentiles_usec_<name>:p50=1.003,p100=12.031" entries.
func parseLatencyStats(info map[string]string) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "latency_percentiles_usec_")
		if !ok {
			continue
		}
		ps := map[string]float64{}
		for _, f := range strings.Split(v, ",") {
			p, val, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("redis latencystats %s: %q", k, f)
			}
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return nil, fmt.Errorf("redis latencystats %s: %w", k, err)
			}
			ps[p] = x
		}
		out[name] = ps
	}
	return out, nil
}

// info runs one INFO section read over the Unix socket and counts it for
// Counters' corrections (all but its reply, which the caller adds once
// the read's own figures are computed).
func (r *Redis) info(ctx context.Context, section string) (map[string]string, int, error) {
	cmd := "INFO " + section + "\r\n"
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", r.sock)
	if err != nil {
		return nil, 0, fmt.Errorf("redis INFO: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return nil, 0, fmt.Errorf("redis INFO: %w", err)
	}
	body, wire, err := readBulk(bufio.NewReader(c))
	if err != nil {
		return nil, 0, fmt.Errorf("redis INFO: %w", err)
	}
	r.reads++
	r.inFix += uint64(len(cmd))
	info, err := parseRedisInfo(body)
	return info, wire, err
}

// parseCommandStats reads INFO commandstats' "cmdstat_<name>:calls=N,..."
// entries.
func parseCommandStats(info map[string]string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				calls, err := strconv.ParseUint(n, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("redis commandstats %s: %w", k, err)
				}
				out[name] = calls
			}
		}
	}
	return out, nil
}

// readBulk reads one RESP bulk string; wire is its size on the wire.
func readBulk(br *bufio.Reader) (body []byte, wire int, err error) {
	head, err := br.ReadString('\n')
	if err != nil {
		return nil, 0, err
	}
	if !strings.HasPrefix(head, "$") || !strings.HasSuffix(head, "\r\n") {
		return nil, 0, fmt.Errorf("not a bulk reply: %q", head)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(head[1:], "\r\n"))
	if err != nil || n < 0 {
		return nil, 0, fmt.Errorf("bulk length %q", head)
	}
	body = make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, 0, err
	}
	return body[:n], len(head) + n + 2, nil
}

// parseRedisInfo parses INFO's "key:value" lines.
func parseRedisInfo(b []byte) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "" || l[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("redis INFO line %q", l)
		}
		out[k] = v
	}
	return out, nil
}

// --- PostgreSQL ---

// Postgres is a PostgreSQL cluster run as the postgres user (it refuses
// root) with its data, socket and log under its directory. Each TCP
// connection is logged (log_connections), which is the ground truth of
// connections: the lines with host=127.0.0.1 (harness queries would use
// the Unix socket, host=[local]).
type Postgres struct {
	dir, bin string
	port     int
	log      string
	proc     *Proc
}

// pgBin finds the newest installed PostgreSQL's binaries.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pgbench")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no /usr/lib/postgresql/*/bin with postgres and pgbench (apt-get install postgresql)")
}

// StartPostgres initialises a cluster in dir/pg and starts it. Durability
// is off (fsync, synchronous_commit): the workloads measure the network
// and CPU path, not the disk.
func StartPostgres(ctx context.Context, procs *Procs, dir string) (*Postgres, error) {
	return StartPostgresScale(ctx, procs, dir, 10)
}

// StartPostgresScale is StartPostgres with pgbench tables of the given
// scale factor (1: 100k accounts rows).
func StartPostgresScale(ctx context.Context, procs *Procs, dir string, scale int) (*Postgres, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL must not run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	p := &Postgres{dir: filepath.Join(dir, "pg"), bin: bin, log: filepath.Join(dir, "pg", "server.log")}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(p.dir, uid, gid); err != nil {
		return nil, err
	}
	if p.port, err = FreePort(); err != nil {
		return nil, err
	}
	data := filepath.Join(p.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	initdb.SysProcAttr = cred
	initdb.Dir = p.dir
	if _, err := procs.Run(ctx, initdb); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own copy
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "log_connections=on", "-c", "logging_collector=off",
		"-c", "max_connections=200", "-c", "shared_buffers=128MB")
	cmd.SysProcAttr = cred
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if p.proc, err = procs.Start("postgres", cmd); err != nil {
		return nil, err
	}
	if err := WaitTCP(ctx, p.port, "postgres"); err != nil {
		log, _ := os.ReadFile(p.log)
		return nil, fmt.Errorf("%w\n%s", err, Tail(log, 2000))
	}
	// The port listens before the server accepts connections ("the
	// database system is starting up"): wait until it does, over the
	// socket pgbench -i uses.
	if err := WaitFor(ctx, 20*time.Second, "postgres ready", func() error {
		_, err := Run(ctx, exec.CommandContext(ctx, filepath.Join(bin, "pg_isready"), "-q", "-h", p.dir, "-p", strconv.Itoa(p.port)))
		return err
	}); err != nil {
		return nil, err
	}
	// pgbench tables, scale 10 (1M accounts rows, ~150 MB): fits in
	// shared memory and page cache, so a select-only run stays CPU bound.
	// Over the Unix socket: not logged as a TCP connection.
	ini := exec.Command(filepath.Join(bin, "pgbench"), "-i", "-q", "-s", strconv.Itoa(scale), "-h", p.dir, "-p", strconv.Itoa(p.port), "-U", "postgres", "postgres")
	ini.Dir = p.dir
	if _, err := procs.Run(ctx, ini); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Postgres) Name() string { return "postgres" }
func (p *Postgres) Port() int    { return p.port }

// Pgbench is the pgbench binary of the running server's version.
func (p *Postgres) Pgbench() string { return filepath.Join(p.bin, "pgbench") }

// Counters counts the TCP connections in the server log.
func (p *Postgres) Counters(context.Context) (Counters, error) {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return Counters{}, err
	}
	return Counters{Conns: uint64(bytes.Count(b, []byte("connection received: host=127.0.0.1 ")))}, nil
}

// --- memcached ---

// Memcached is memcached on a loopback port, with a second listener for
// the harness's stats reads (galago sees them on that port only).
type Memcached struct {
	port, statsPort int
	reads           uint64 // stats reads so far
	outFix          uint64 // reply bytes of the earlier stats reads
	proc            *Proc
}

// statsCmd is the command of each read.
const statsCmd = "stats\r\n"

// StartMemcached starts memcached (as nobody: it refuses to keep root).
func StartMemcached(ctx context.Context, procs *Procs) (*Memcached, error) {
	m := &Memcached{}
	var err error
	if m.port, err = FreePort(); err != nil {
		return nil, err
	}
	if m.statsPort, err = FreePort(); err != nil {
		return nil, err
	}
	cmd := exec.Command("memcached", "-u", "nobody", "-l", fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", m.port, m.statsPort),
		"-U", "0", "-t", "2", "-m", "256", "-c", "4096")
	if m.proc, err = procs.Start("memcached", cmd); err != nil {
		return nil, err
	}
	if err := WaitTCP(ctx, m.statsPort, "memcached"); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, m.proc.Output.String())
	}
	return m, nil
}

func (m *Memcached) Name() string { return "memcached" }
func (m *Memcached) Port() int    { return m.port }

// Counters reads "stats" on the stats port. Like redis, memcached counts
// a read's connection and command bytes before answering and its reply
// after: this read's reply is not in bytes_written yet.
func (m *Memcached) Counters(ctx context.Context) (Counters, error) {
	stats, wire, err := m.stats(ctx)
	if err != nil {
		return Counters{}, err
	}
	var vals [5]uint64
	for i, k := range []string{"total_connections", "cmd_get", "cmd_set", "bytes_read", "bytes_written"} {
		v, ok := stats[k]
		if !ok {
			return Counters{}, fmt.Errorf("memcached stats: no %s", k)
		}
		if vals[i], err = strconv.ParseUint(v, 10, 64); err != nil {
			return Counters{}, fmt.Errorf("memcached stats %s: %w", k, err)
		}
	}
	out := Counters{
		Conns:    vals[0] - m.reads,
		Requests: vals[1] + vals[2],
		BytesIn:  vals[3] - m.reads*uint64(len(statsCmd)),
		BytesOut: vals[4] - m.outFix,
		HasBytes: true, HasRequests: true,
	}
	m.outFix += uint64(wire)
	return out, nil
}

// Stats reads "stats" on the stats port: every general-purpose counter
// by name.
func (m *Memcached) Stats(ctx context.Context) (map[string]string, error) {
	stats, wire, err := m.stats(ctx)
	if err != nil {
		return nil, err
	}
	m.outFix += uint64(wire)
	return stats, nil
}

func (m *Memcached) stats(ctx context.Context) (map[string]string, int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", m.statsPort))
	if err != nil {
		return nil, 0, fmt.Errorf("memcached stats: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, statsCmd); err != nil {
		return nil, 0, fmt.Errorf("memcached stats: %w", err)
	}
	stats, wire, err := readMemcachedStats(bufio.NewReader(c))
	if err != nil {
		return nil, 0, err
	}
	m.reads++
	return stats, wire, nil
}

// readMemcachedStats reads "STAT <name> <value>" lines through "END";
// wire is the reply's size.
func readMemcachedStats(br *bufio.Reader) (map[string]string, int, error) {
	out := map[string]string{}
	wire := 0
	for {
		line, err := br.ReadString('\n')
		wire += len(line)
		if err != nil {
			return nil, 0, fmt.Errorf("memcached stats: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			return out, wire, nil
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "STAT" {
			return nil, 0, fmt.Errorf("memcached stats: line %q", line)
		}
		out[f[1]] = f[2]
	}
}
