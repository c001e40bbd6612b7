package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"io"
	"net"
	"net/textproto"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workload is one application load: a server and a load generator, both
// real programs. Workloads are data (the Workloads table): adding one is
// one entry, plus a server when it needs a new one.
type Workload interface {
	Name() string
	// Server names the server it loads ("nginx", "redis", "postgres").
	Server() string
	// Describe says in one line what runs, for the report.
	Describe() string
	// Prepare runs once before the workload's arms, without any agent:
	// warm-up and calibration.
	Prepare(ctx context.Context, srv realsrv.Server, dir string) error
	// Run loads the server for about d and returns the tool's figures.
	Run(ctx context.Context, srv realsrv.Server, dir string, d time.Duration) (realsrv.LoadResult, error)
	// Truth completes the server's counter deltas over one run where the
	// server cannot count alone (nginx's bytes from its request count).
	Truth(delta realsrv.Counters) realsrv.Counters
	// ConnPerRequest is true when every request opens a new connection.
	ConnPerRequest() bool
}

// Workloads is every workload make bench runs, in order.
var Workloads = []Workload{
	&wrkLoad{name: "nginx-keepalive", conns: 32, threads: 2},
	&wrkLoad{name: "nginx-close", conns: 32, threads: 2, close: true},
	&redisLoad{clients: 32, tests: "set,get"},
	&pgbenchLoad{clients: 16, threads: 2},
	&memcslapLoad{threads: 16},
}

// --- nginx + wrk ---

type wrkLoad struct {
	name           string
	conns, threads int
	close          bool // "Connection: close": one connection per request
	// Bytes of one request as wrk sends it to the nginx port, and of
	// nginx's answer: measured by Prepare.
	reqLen, respLen uint64
}

func (w *wrkLoad) Name() string         { return w.name }
func (w *wrkLoad) Server() string       { return "nginx" }
func (w *wrkLoad) ConnPerRequest() bool { return w.close }

func (w *wrkLoad) Describe() string {
	mode := "keep-alive"
	if w.close {
		mode = "a new connection per request"
	}
	return fmt.Sprintf("nginx (return 200 \"ok\"), wrk -t%d -c%d --latency, %s", w.threads, w.conns, mode)
}

func (w *wrkLoad) args(port int, d time.Duration) []string {
	a := []string{"-t" + strconv.Itoa(w.threads), "-c" + strconv.Itoa(w.conns), "-d" + realsrv.Seconds(d) + "s", "--latency"}
	if w.close {
		a = append(a, "-H", "Connection: close")
	}
	return append(a, fmt.Sprintf("http://127.0.0.1:%d/", port))
}

// Prepare measures the request wrk sends (against a recording listener:
// wrk cannot print it) and nginx's answer to it, so that the bytes of a
// run follow from nginx's request count; then warms nginx up.
func (w *wrkLoad) Prepare(ctx context.Context, srv realsrv.Server, _ string) error {
	req, err := captureWrkRequest(ctx, w)
	if err != nil {
		return err
	}
	// The Host header carries the port: rewrite it for nginx's.
	host := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	req = bytes.ReplaceAll(req, []byte(host(0)), []byte(host(srv.Port())))
	w.reqLen = uint64(len(req))
	if w.respLen, err = responseLen(ctx, srv.Port(), req); err != nil {
		return err
	}
	_, err = w.Run(ctx, srv, "", 2*time.Second)
	return err
}

// captureWrkRequest runs wrk for a second against a listener that answers
// like nginx and records the first request's bytes. Its Host header has
// port 0 in place of the listener's.
func captureWrkRequest(ctx context.Context, w *wrkLoad) ([]byte, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var once sync.Once
	var first []byte
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					raw, err := readHead(br)
					if err != nil {
						return
					}
					once.Do(func() { first = raw })
					resp := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
					if w.close {
						resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
					}
					if _, err := io.WriteString(c, resp); err != nil || w.close {
						return
					}
				}
			}()
		}
	}()
	one := &wrkLoad{threads: 1, conns: 1, close: w.close}
	if _, err := realsrv.Run(ctx, exec.CommandContext(ctx, "wrk", one.args(port, time.Second)...)); err != nil {
		return nil, err
	}
	ln.Close()
	if first == nil {
		return nil, errors.New("wrk sent no request to the recording listener")
	}
	return bytes.ReplaceAll(first, []byte(fmt.Sprintf("127.0.0.1:%d", port)), []byte("127.0.0.1:0")), nil
}

// readHead reads one bodiless HTTP request (through its blank line).
func readHead(br *bufio.Reader) ([]byte, error) {
	var raw []byte
	for {
		line, err := br.ReadSlice('\n')
		raw = append(raw, line...)
		if err != nil {
			return nil, err
		}
		if string(line) == "\r\n" {
			return raw, nil
		}
	}
}

// responseLen sends req to the server and returns the bytes of its
// response (head and Content-Length body).
func responseLen(ctx context.Context, port int, req []byte) (uint64, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	br := bufio.NewReader(c)
	head, err := readHead(br)
	if err != nil {
		return 0, fmt.Errorf("nginx response: %w", err)
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return 0, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return 0, fmt.Errorf("nginx response head: %w", err)
	}
	n, err := strconv.ParseUint(h.Get("Content-Length"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nginx response: Content-Length %q", h.Get("Content-Length"))
	}
	return uint64(len(head)) + n, nil
}

func (w *wrkLoad) Run(ctx context.Context, srv realsrv.Server, _ string, d time.Duration) (realsrv.LoadResult, error) {
	out, err := realsrv.Run(ctx, exec.CommandContext(ctx, "wrk", w.args(srv.Port(), d)...))
	if err != nil {
		return realsrv.LoadResult{}, err
	}
	return realsrv.ParseWrk(out)
}

// Truth: every request nginx handled was received whole (nginx counts it
// once its head is read) and answered with the same bytes; when wrk stops
// it closes its connections with up to one request each in flight, whose
// answer may never be acknowledged.
func (w *wrkLoad) Truth(d realsrv.Counters) realsrv.Counters {
	d.BytesIn = d.Requests * w.reqLen
	d.BytesOut = d.Requests * w.respLen
	d.BytesOutInFlight = uint64(w.conns) * w.respLen
	d.HasBytes = w.reqLen > 0 && w.respLen > 0
	return d
}

// --- redis-benchmark ---

type redisLoad struct {
	clients int
	tests   string
	// perSecond is the request rate of one test measured by Prepare,
	// which sizes -n so that a run lasts about the asked duration
	// (redis-benchmark counts requests, it has no duration option).
	perSecond float64
}

func (r *redisLoad) Name() string         { return "redis" }
func (r *redisLoad) Server() string       { return "redis" }
func (r *redisLoad) ConnPerRequest() bool { return false }

func (r *redisLoad) Describe() string {
	return fmt.Sprintf("redis-server, redis-benchmark -c %d -t %s --csv (p99: the worse test)", r.clients, r.tests)
}

func (r *redisLoad) n(d time.Duration) int {
	tests := strings.Count(r.tests, ",") + 1
	return max(1000, int(r.perSecond*d.Seconds()/float64(tests)))
}

func (r *redisLoad) Prepare(ctx context.Context, srv realsrv.Server, dir string) error {
	r.perSecond = 20000 // first guess, for a run of about a second
	res, err := r.Run(ctx, srv, dir, 2*time.Second)
	if err != nil {
		return err
	}
	r.perSecond = res.Throughput
	return nil
}

func (r *redisLoad) Run(ctx context.Context, srv realsrv.Server, _ string, d time.Duration) (realsrv.LoadResult, error) {
	n := r.n(d)
	out, err := realsrv.Run(ctx, exec.CommandContext(ctx, "redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()),
		"-c", strconv.Itoa(r.clients), "-n", strconv.Itoa(n), "-t", r.tests, "--csv"))
	if err != nil {
		return realsrv.LoadResult{}, err
	}
	return realsrv.ParseRedisBenchmark(out, n)
}

func (r *redisLoad) Truth(d realsrv.Counters) realsrv.Counters { return d }

// --- pgbench ---

type pgbenchLoad struct {
	clients, threads int
}

func (p *pgbenchLoad) Name() string         { return "pgbench" }
func (p *pgbenchLoad) Server() string       { return "postgres" }
func (p *pgbenchLoad) ConnPerRequest() bool { return false }

func (p *pgbenchLoad) Describe() string {
	return fmt.Sprintf("PostgreSQL (scale 10, fsync off), pgbench -S -c %d -j %d over TCP (p99 from its -l transaction log)", p.clients, p.threads)
}

func (p *pgbenchLoad) Prepare(ctx context.Context, srv realsrv.Server, dir string) error {
	_, err := p.Run(ctx, srv, dir, 2*time.Second)
	return err
}

func (p *pgbenchLoad) Run(ctx context.Context, srv realsrv.Server, dir string, d time.Duration) (realsrv.LoadResult, error) {
	pg, ok := srv.(*realsrv.Postgres)
	if !ok {
		return realsrv.LoadResult{}, fmt.Errorf("pgbench needs the postgres server, got %s", srv.Name())
	}
	prefix := filepath.Join(dir, "pgbench-log")
	cmd := exec.CommandContext(ctx, pg.Pgbench(), "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres",
		"-n", "-S", "-c", strconv.Itoa(p.clients), "-j", strconv.Itoa(p.threads), "-T", realsrv.Seconds(d),
		"-l", "--log-prefix", prefix, "postgres")
	cmd.Dir = dir
	out, err := realsrv.Run(ctx, cmd)
	if err != nil {
		return realsrv.LoadResult{}, err
	}
	res, err := realsrv.ParsePgbench(out)
	if err != nil {
		return res, err
	}
	if res.P99Ms, err = realsrv.PgbenchP99(prefix); err != nil {
		return res, err
	}
	res.HasP99 = true
	return res, nil
}

func (p *pgbenchLoad) Truth(d realsrv.Counters) realsrv.Counters { return d }

// --- memcslap ---

type memcslapLoad struct {
	threads int
	// perSecond is the get rate measured by Prepare, which sizes -e so
	// that a run's get phase lasts about the asked duration (memcslap
	// counts operations, it has no duration option).
	perSecond float64
}

func (m *memcslapLoad) Name() string         { return "memcached" }
func (m *memcslapLoad) Server() string       { return "memcached" }
func (m *memcslapLoad) ConnPerRequest() bool { return false }

func (m *memcslapLoad) Describe() string {
	return fmt.Sprintf("memcached (-t 2), memcslap -c %d -t get (throughput of the get phase; memcslap gives no latency percentiles)", m.threads)
}

// execute is memcslap's -e: gets per thread (and keys set first).
func (m *memcslapLoad) execute(d time.Duration) int {
	return max(1000, int(m.perSecond*d.Seconds()/float64(m.threads)))
}

func (m *memcslapLoad) Prepare(ctx context.Context, srv realsrv.Server, dir string) error {
	m.perSecond = 20000
	res, err := m.Run(ctx, srv, dir, 2*time.Second)
	if err != nil {
		return err
	}
	m.perSecond = res.Throughput
	return nil
}

func (m *memcslapLoad) Run(ctx context.Context, srv realsrv.Server, _ string, d time.Duration) (realsrv.LoadResult, error) {
	out, err := realsrv.Run(ctx, exec.CommandContext(ctx, "memcslap", "-s", fmt.Sprintf("127.0.0.1:%d", srv.Port()),
		"-c", strconv.Itoa(m.threads), "-t", "get", "-e", strconv.Itoa(m.execute(d))))
	if err != nil {
		return realsrv.LoadResult{}, err
	}
	return realsrv.ParseMemcslap(out)
}

func (m *memcslapLoad) Truth(d realsrv.Counters) realsrv.Counters { return d }
