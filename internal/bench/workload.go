package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"io"
	"math"
	"net"
	"net/textproto"
	"os"
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
	&pgbenchLoad{clients: 16, threads: 2, work: time.Millisecond},
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
	// work, when set, replaces pgbench's select-only script with one
	// query a transaction that keeps the backend busy for about work:
	// a sum over generate_series(1, rows), rows calibrated by Prepare.
	// Issue 8 asks for the throughput ratio "when each request does 1 ms
	// of work" beside the tiny requests' worst case.
	work time.Duration
	rows int64
	// baseMs and workMs are one client's mean latency of the select-only
	// script and of the calibrated work script (Prepare).
	baseMs, workMs float64
}

func (p *pgbenchLoad) Name() string {
	if p.work > 0 {
		return fmt.Sprintf("pgbench-%s", p.work)
	}
	return "pgbench"
}
func (p *pgbenchLoad) Server() string       { return "postgres" }
func (p *pgbenchLoad) ConnPerRequest() bool { return false }

func (p *pgbenchLoad) Describe() string {
	if p.work > 0 {
		return fmt.Sprintf("PostgreSQL (fsync off), pgbench -c %d -j %d over TCP, one query a transaction doing %s of work: "+
			"SELECT sum(i) FROM generate_series(1, %d), calibrated with one client to %.3f ms of mean latency "+
			"against %.3f ms for a select-only one (p99 from its -l transaction log)",
			p.clients, p.threads, p.work, p.rows, p.workMs, p.baseMs)
	}
	return fmt.Sprintf("PostgreSQL (scale 10, fsync off), pgbench -S -c %d -j %d over TCP (p99 from its -l transaction log)", p.clients, p.threads)
}

func (p *pgbenchLoad) Prepare(ctx context.Context, srv realsrv.Server, dir string) error {
	if p.work > 0 {
		if err := p.calibrate(ctx, srv, dir); err != nil {
			return err
		}
	}
	_, err := p.Run(ctx, srv, dir, 2*time.Second)
	return err
}

// workScript is the work query's pgbench script.
func (p *pgbenchLoad) workScript(dir string) string { return filepath.Join(dir, "work.sql") }

// calibrate sizes the work query so that one client's mean latency is
// the select-only script's plus p.work: a query's own work, without the
// round trip every query pays. One client's mean over 2 s swings by a
// few percent on a shared machine, so it keeps the closest of a few
// tries; Describe reports what was reached.
func (p *pgbenchLoad) calibrate(ctx context.Context, srv realsrv.Server, dir string) error {
	base, err := p.pgbench(ctx, srv, dir, 1, 1, 2*time.Second, false)
	if err != nil {
		return err
	}
	p.baseMs = base.MeanMs
	target := p.baseMs + float64(p.work)/float64(time.Millisecond)
	rows, bestRows, bestMs := int64(10000), int64(0), 0.0
	for range 6 {
		p.rows = rows
		if err := p.writeWorkScript(dir); err != nil {
			return err
		}
		res, err := p.pgbench(ctx, srv, dir, 1, 1, 2*time.Second, false)
		if err != nil {
			return err
		}
		if res.MeanMs <= p.baseMs {
			return fmt.Errorf("pgbench work calibration: %d rows took %.3f ms, no more than select-only's %.3f ms",
				rows, res.MeanMs, p.baseMs)
		}
		if bestRows == 0 || math.Abs(res.MeanMs-target) < math.Abs(bestMs-target) {
			bestRows, bestMs = rows, res.MeanMs
		}
		if math.Abs(res.MeanMs-target) <= 0.03*target {
			break
		}
		// The query's own time is linear in its rows.
		rows = max(1, int64(float64(rows)*(target-p.baseMs)/(res.MeanMs-p.baseMs)))
	}
	p.rows, p.workMs = bestRows, bestMs
	return p.writeWorkScript(dir)
}

// writeWorkScript writes the work query's script for p.rows.
func (p *pgbenchLoad) writeWorkScript(dir string) error {
	script := fmt.Sprintf("SELECT sum(i) FROM generate_series(1, %d) AS s(i);\n", p.rows)
	return os.WriteFile(p.workScript(dir), []byte(script), 0o644)
}

func (p *pgbenchLoad) Run(ctx context.Context, srv realsrv.Server, dir string, d time.Duration) (realsrv.LoadResult, error) {
	return p.pgbench(ctx, srv, dir, p.clients, p.threads, d, true)
}

// args is pgbench's command line: select-only, or the work script once
// calibrate has sized it; the per-transaction log under prefix with withP99.
func (p *pgbenchLoad) args(port int, dir, prefix string, clients, threads int, d time.Duration, withP99 bool) []string {
	script := []string{"-S"}
	if p.work > 0 && p.rows > 0 {
		script = []string{"-f", p.workScript(dir)}
	}
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-n"}, script...)
	args = append(args, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", realsrv.Seconds(d))
	if withP99 {
		args = append(args, "-l", "--log-prefix", prefix)
	}
	return append(args, "postgres")
}

// pgbench runs pgbench with the workload's script; withP99 reads its
// per-transaction logs for the p99.
func (p *pgbenchLoad) pgbench(ctx context.Context, srv realsrv.Server, dir string, clients, threads int, d time.Duration,
	withP99 bool) (realsrv.LoadResult, error) {
	pg, ok := srv.(*realsrv.Postgres)
	if !ok {
		return realsrv.LoadResult{}, fmt.Errorf("pgbench needs the postgres server, got %s", srv.Name())
	}
	prefix := filepath.Join(dir, "pgbench-log")
	cmd := exec.CommandContext(ctx, pg.Pgbench(), p.args(pg.Port(), dir, prefix, clients, threads, d, withP99)...)
	cmd.Dir = dir
	out, err := realsrv.Run(ctx, cmd)
	if err != nil {
		return realsrv.LoadResult{}, err
	}
	res, err := realsrv.ParsePgbench(out)
	if err != nil || !withP99 {
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
