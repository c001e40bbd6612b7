package l7

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// The privileged tests of this package run real servers and clients
// (realsrv) in a cgroup2 directory of their own, select that cgroup with
// the probe's snooper filter, and compare the probe's rows, summed over
// every report period, with the ground truth: the load generator's own
// count and the server's own counters. Every comparison is exact, except
// latency (within 20% of the load generator's mean).

// cgroupRoot is the cgroup2 mount of this machine's hybrid hierarchy
// (ENVIRONMENT.md); a pure cgroup2 host has it at /sys/fs/cgroup.
func cgroupRoot(t *testing.T) string {
	t.Helper()
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st syscall.Statfs_t
		// CGROUP2_SUPER_MAGIC
		if syscall.Statfs(d, &st) == nil && st.Type == 0x63677270 {
			return d
		}
	}
	t.Fatalf("%s=1 but no cgroup2 mount at /sys/fs/cgroup/unified or /sys/fs/cgroup", probetest.PrivilegedEnv)
	return ""
}

// cgTargets selects one cgroup2 directory, as a container snooper does:
// the kernel filter by cgroup id; Observed for the rows by the process's
// cgroup, remembered (a process that exited before the report is still
// observed, as snoop.Set keeps exited members).
type cgTargets struct {
	path string // relative to the cgroup2 root, with a leading '/'
	id   uint64
	ch   chan struct{}

	mu   sync.Mutex
	seen map[int]bool
}

func (c *cgTargets) Mode() snoop.Mode             { return snoop.Whitelist }
func (c *cgTargets) PIDs() []int                  { return nil }
func (c *cgTargets) CgroupIDs() []uint64          { return []uint64{c.id} }
func (c *cgTargets) Labels(int) map[string]string { return nil }
func (c *cgTargets) Changed() <-chan struct{}     { return c.ch }
func (c *cgTargets) remember(pid int)             { c.mu.Lock(); c.seen[pid] = true; c.mu.Unlock() }
func (c *cgTargets) known(pid int) (in bool, ok bool) {
	c.mu.Lock()
	in, ok = c.seen[pid]
	c.mu.Unlock()
	return
}

func (c *cgTargets) Observed(pid int) bool {
	if in, ok := c.known(pid); ok {
		return in
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok && p == c.path {
			in = true
		}
	}
	if in {
		c.remember(pid)
	}
	return in
}

// env is one test's probe, cgroup and processes.
type env struct {
	t       *testing.T
	p       *Probe
	rt      *probetest.Runtime
	procs   *realsrv.Procs
	targets *cgTargets
	dir     string
	ctx     context.Context
}

// reportEvery is the tests' report period: rows are summed over periods.
const reportEvery = 300 * time.Millisecond

// newEnv starts the probe for protocols (support_ssl on when ssl) on a
// new cgroup of its own, in which every process of e.procs starts.
func newEnv(t *testing.T, protocols []string, ssl bool, tools ...string) *env {
	t.Helper()
	return newEnvOf(t, New(), protocols, ssl, tools...)
}

// newEnvOf is newEnv for probe p (the l7 feature or another flavor).
func newEnvOf(t *testing.T, p *Probe, protocols []string, ssl bool, tools ...string) *env {
	t.Helper()
	probetest.RequireTools(t, tools...)
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	root := cgroupRoot(t)
	rel := fmt.Sprintf("/galago-l7-test-%d-%s", os.Getpid(), regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	cg := filepath.Join(root, rel)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("cgroup: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(cg, &st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	e := &env{t: t, dir: t.TempDir(), ctx: ctx, procs: realsrv.NewProcs(),
		targets: &cgTargets{path: rel, id: st.Ino, ch: make(chan struct{}), seen: map[int]bool{}}}
	t.Cleanup(func() {
		cancel()
		e.procs.StopAll()
		e.procs.Close()
		// The cgroup empties once its last process is reaped.
		for i := 0; ; i++ {
			err := os.Remove(cg)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if i == 100 {
				t.Errorf("rmdir %s: %v", cg, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := e.procs.InCgroup(cg); err != nil {
		t.Fatal(err)
	}
	// A process that lives less than a report period (a PostgreSQL
	// backend of a short pgbench run) is seen here, as a container
	// snooper sees a container's processes, and stays observed once it
	// has exited.
	go func() {
		procs := filepath.Join(cg, "cgroup.procs")
		for ctx.Err() == nil {
			if b, err := os.ReadFile(procs); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						e.targets.remember(pid)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	params := probe.DefaultParams()
	params.L7Protocol = protocols
	if ssl {
		params.SupportSSL = 1
	}
	e.p = p
	e.p.reportEvery = reportEvery
	e.rt = probetest.NewRuntime(t, probetest.ProbeName(p.Name()), probetest.WithTimeout(30*time.Second))
	cfg := probe.Config{SubItems: bitBytes | bitRPC, Params: params, Targets: e.targets}
	if err := e.p.Start(e.rt.Context(), cfg, e.rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.rt.Shutdown(t, e.p) })
	if ssl {
		e.waitAttached("openssl", "")
	}
	return e
}

// waitAttached waits for the probe's log of TLS uprobes attached to a
// library of the given kind (and file, when not empty).
func (e *env) waitAttached(library, file string) {
	e.t.Helper()
	start := time.Now()
	defer func() { e.t.Logf("TLS uprobes (%s) attached after %v", library, time.Since(start)) }()
	probetest.WaitFor(e.t, fmt.Sprintf("TLS uprobes attached (%s %s)", library, file), func() bool {
		for _, l := range e.rt.LogEntries() {
			if l.Msg == "l7: TLS uprobes attached" && l.Attrs["library"] == library && (file == "" || strings.HasSuffix(l.Attrs["file"], file)) {
				return true
			}
		}
		return false
	})
}

// run runs a client to completion in the test's cgroup and returns its
// output; its pid stays observed after it exits.
func (e *env) run(name string, args ...string) []byte {
	e.t.Helper()
	cmd := exec.CommandContext(e.ctx, name, args...)
	cmd.Dir = e.dir
	out, err := e.procs.Run(e.ctx, cmd)
	if cmd.Process != nil {
		e.targets.remember(cmd.Process.Pid)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// tally is the sum of the rpc fields of some rows over every period.
type tally struct {
	rows                                 int
	req, resp, errs, clientErr, serverEr float64
	latSum                               float64
	latN                                 uint64
	tgids                                map[string]bool
}

func (s tally) latAvgMs() float64 {
	if s.latN == 0 {
		return 0
	}
	return s.latSum / float64(s.latN) / 1e6
}

func (s tally) String() string {
	return fmt.Sprintf("req %v resp %v err %v (client %v server %v) latency avg %.3f ms over %d (%d rows, %d processes)",
		s.req, s.resp, s.errs, s.clientErr, s.serverEr, s.latAvgMs(), s.latN, s.rows, len(s.tgids))
}

// rowMatch selects rows of one table.
type rowMatch struct {
	tbl      *table.Table
	role     string // l7_role: client or server
	port     int    // server_port
	protocol string
	ssl      string // "ssl", "no_ssl"
	api      string // l7_rpc_api only; "" for every api
	tgids    map[int]bool
}

func (m rowMatch) match(r *table.Record) bool {
	if r.Table != m.tbl || r.Str("l7_role") != m.role || r.Str("server_port") != strconv.Itoa(m.port) ||
		r.Str("protocol") != m.protocol || (m.ssl != "" && r.Str("ssl") != m.ssl) || (m.api != "" && r.Str("api") != m.api) {
		return false
	}
	if m.tgids != nil {
		pid, _ := strconv.Atoi(r.Str("tgid"))
		return m.tgids[pid]
	}
	return true
}

func sumRows(recs []*table.Record, m rowMatch) tally {
	s := tally{tgids: map[string]bool{}}
	num := func(r *table.Record, name string) float64 {
		if i := r.Table.Index(name); i >= 0 && r.Values[i].Set {
			return r.Values[i].Num
		}
		return 0
	}
	for _, r := range recs {
		if !m.match(r) {
			continue
		}
		s.rows++
		s.tgids[r.Str("tgid")] = true
		s.req += num(r, "req_count")
		s.resp += num(r, "resp_count")
		s.errs += num(r, "err_count")
		s.clientErr += num(r, "client_err_count")
		s.serverEr += num(r, "server_err_count")
		s.latSum += num(r, "latency_sum")
		if i := r.Table.Index("latency"); i >= 0 && r.Values[i].Hist != nil {
			s.latN += r.Values[i].Hist.Count()
		}
	}
	return s
}

// settle waits until every want holds its request count (or the runtime's
// timeout passes), then two more report periods so that counts beyond it
// show, and returns every record published.
func (e *env) settle(want map[string]expect) []*table.Record {
	e.t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		recs := e.rt.Records()
		done := true
		for _, w := range want {
			if s := sumRows(recs, w.m); s.req < w.req() || s.resp < w.resp() {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * reportEvery)
	return e.rt.Records()
}

// expect is one exact count: the rows m match must hold n requests and n
// responses, or noResp fewer responses (requests that get none).
type expect struct {
	m      rowMatch
	n      float64
	noResp float64
}

func (w expect) req() float64  { return w.n }
func (w expect) resp() float64 { return w.n - w.noResp }

// check waits for the counts, then compares each and logs every tally.
func (e *env) check(wants map[string]expect) ([]*table.Record, map[string]tally) {
	e.t.Helper()
	start := time.Now()
	recs := e.settle(wants)
	e.t.Logf("counts settled after %v", time.Since(start))
	out := map[string]tally{}
	for k, w := range wants {
		s := sumRows(recs, w.m)
		out[k] = s
		e.t.Logf("%s: %v (want %v requests, %v responses)", k, s, w.req(), w.resp())
		if s.req != w.req() || s.resp != w.resp() {
			e.t.Errorf("%s: %v requests and %v responses, want %v and %v", k, s.req, s.resp, w.req(), w.resp())
		}
	}
	return recs, out
}

// waitReq waits (at most 10 s) until the rows m matches hold n requests
// and returns the records; the caller compares. It gives up at once when
// the probe has lost events: the counts cannot get there.
func (e *env) waitReq(m rowMatch, n float64) []*table.Record {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := e.rt.Records()
		if sumRows(recs, m).req >= n || e.rt.LostCount() > 0 || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLost fails the test if the probe lost anything.
func (e *env) checkLost() {
	e.t.Helper()
	if n := e.rt.LostCount(); n != 0 {
		e.t.Errorf("galago_probe_events_lost_total{probe=l7} = %d, want 0", n)
		for _, l := range e.rt.LogEntries() {
			if l.Level >= slog.LevelInfo {
				e.t.Logf("probe log: %s %v", l.Msg, l.Attrs)
			}
		}
	}
}

// lines is the output's non-empty lines.
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}
