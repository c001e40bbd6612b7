package dbsli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/pgsql"
	"github.com/galago-project/galago/internal/l7/redis"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// Feature names.
const (
	KSLIName       = "ksli"
	PostgreSLIName = "postgre_sli"
)

// tlsScanInterval is how often postgre_sli looks for PostgreSQL servers'
// OpenSSL.
const tlsScanInterval = 2 * time.Second

// internMax bounds the interned method templates of a view.
const internMax = 4096

// unknownMethod is the method of a request whose command or statement the
// capture did not hold.
const unknownMethod = "UNKNOWN"

// view is what the two features differ in.
type view struct {
	name     string
	proto    l7.Protocol
	app      string // the app key: gala-gopher's "REDIS" / "POSTGRE"
	sli, max *table.Table
	// method is the method key of an exchange's API template.
	method func(api string) string
	// newParser makes a server connection's parser.
	newParser func(in *l7.Interner) l7.Parser
	// maxAlways: the max table every period (postgre_sli); else only with
	// continuous_sampling=1 (ksli, as gala-gopher).
	maxAlways bool
	// tls: attach the TLS uprobes to the servers' OpenSSL (postgre_sli).
	tls bool
	// servers are the process names whose OpenSSL is probed.
	servers []string
}

var ksliView = view{
	name: KSLIName, proto: l7.Redis, app: "REDIS", sli: table.RedisSli, max: table.RedisMaxSli,
	method: func(api string) string { return api },
	newParser: func(in *l7.Interner) l7.Parser {
		p := redis.NewParser(l7.Server)
		p.SetInterner(in)
		return p
	},
}

var pgView = view{
	name: PostgreSLIName, proto: l7.PgSQL, app: "POSTGRE", sli: table.PgSli, max: table.PgMaxSli,
	method:    statementKind,
	newParser: func(in *l7.Interner) l7.Parser { return pgsql.NewParserWith(l7.Server, in) },
	maxAlways: true, tls: true, servers: []string{"postgres", "gaussdb"},
}

// statementKind is the leading keyword of a SQL API template ("SELECT
// pgbench_accounts" -> "SELECT").
func statementKind(api string) string {
	if i := strings.IndexByte(api, ' '); i >= 0 {
		return api[:i]
	}
	return api
}

// Probe is one view (ksli or postgre_sli). See the package documentation.
type Probe struct {
	v        view
	shared   *syscap.Shared
	hostPath string
	// reportEvery, when set, replaces report_period (tests).
	reportEvery time.Duration
	// onFlush, when set, sees each period's rows (tests: request counts).
	onFlush func(map[rowKey]*row)
	// tlsReady is closed once the TLS uprobes were first attached.
	tlsReady chan struct{}
	now      func() time.Time

	mu    sync.Mutex
	cfg   probe.Config
	rt    probe.Runtime
	sub   *syscap.Sub
	agg   *agg
	conns map[uint64]*conn
	in    *l7.Interner
	out   []l7.Exchange
	kick  chan struct{}
}

// conn is one traced server connection.
type conn struct {
	info    syscap.Conn
	parser  l7.Parser
	desyncs uint64
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithShared makes the view a consumer of s, the syscall capture it
// shares with the l7 probe (without it the view has a capture of its own).
func WithShared(s *syscap.Shared) Option { return func(p *Probe) { p.shared = s } }

// WithHostPath roots /proc (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.hostPath = root } }

// NewKSLI returns the ksli feature: Redis request latency.
func NewKSLI(opts ...Option) *Probe { return newProbe(ksliView, opts) }

// NewPostgreSLI returns the postgre_sli feature: PostgreSQL statement
// latency, plain and TLS.
func NewPostgreSLI(opts ...Option) *Probe { return newProbe(pgView, opts) }

func newProbe(v view, opts []Option) *Probe {
	p := &Probe{v: v, now: time.Now, kick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return p.v.name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{p.v.sli, p.v.max} }

// Start subscribes to the syscall capture and starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) (err error) {
	var leave *syscap.Sub
	defer func() {
		if leave != nil {
			_ = leave.Close()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return fmt.Errorf("%s: started twice", p.v.name)
	}
	if err := bpfrt.HaveTPBTF("sys_exit"); err != nil {
		return fmt.Errorf("%s: %w: %w", p.v.name, probe.ErrNotSupported, err)
	}
	log := rt.Logger()
	p.rt, p.cfg = rt, cfg
	p.agg = newAgg()
	p.conns = map[uint64]*conn{}
	p.in = &l7.Interner{Max: internMax}
	p.tlsReady = make(chan struct{})
	shared := p.shared
	if shared == nil {
		shared = syscap.NewShared(syscap.Options{Log: log, HostPath: p.hostPath})
	}
	if p.sub, err = shared.Subscribe(handler{p}, rt.Lost); err != nil {
		p.rt = nil
		return fmt.Errorf("%s: %w", p.v.name, err)
	}
	// Every process: gala-gopher's ksli and postgre_sli have no snoopers.
	if err := p.sub.SetConfig(syscap.Config{Protocols: []l7.Protocol{p.v.proto}}); err != nil {
		// Left once p.mu is released (see Stop).
		leave, p.sub, p.rt = p.sub, nil, nil
		return fmt.Errorf("%s: %w", p.v.name, err)
	}
	log.Info(p.v.name + ": latency runs from the server's read of a request to its write of the response; " +
		"the time a request waits in the socket before the read is not measured (gala-gopher's tc ingress timestamp, dev_name, is not built)")
	rt.Go(p.sub.Run)
	rt.Go(p.loop)
	if p.v.tls {
		rt.Go(p.tlsLoop)
	}
	return nil
}

// Reconfigure applies new parameters (report_period, latency_thr,
// report_event, continuous_sampling).
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return fmt.Errorf("%s: not started", p.v.name)
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

// Stop leaves the capture, with p.mu released: the capture may be
// delivering a record to the handler, which waits for it. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	sub := p.sub
	p.sub = nil
	p.mu.Unlock()
	if sub != nil {
		return sub.Close()
	}
	return nil
}

func (p *Probe) period() time.Duration { return probe.ReportPeriod(p.reportEvery, p.cfg.Params) }

func (p *Probe) loop(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, p.period, p.report)
	return nil
}

// report publishes the period's rows and, with report_event=1 and
// latency_thr set, an event per row whose slowest request exceeded it.
// The capture's kernel-side losses are read first, so that they show in
// the period they happened (not at the capture's 10 s sweep).
func (p *Probe) report() {
	p.mu.Lock()
	now, period, cfg, rt, sub := p.now(), p.period(), p.cfg, p.rt, p.sub
	rows := p.agg.flush()
	p.mu.Unlock()
	if sub != nil {
		if err := sub.PollLost(); err != nil {
			probe.LogError(rt, p.v.name+": loss counters", err)
		}
	}
	if p.onFlush != nil {
		p.onFlush(rows)
	}
	withMax := p.v.maxAlways || cfg.Params.ContinuousSampling == 1
	thr := time.Duration(cfg.Params.LatencyThr) * time.Millisecond
	for k, r := range rows {
		for _, rec := range p.v.records(k, r, now, period, withMax) {
			rt.Record(rec)
		}
		if cfg.Params.ReportEvent == 1 {
			if e, ok := p.v.event(k, r, thr, now); ok {
				rt.Event(e)
			}
		}
	}
}

// handler adapts the view to syscap.Handler.
type handler struct{ p *Probe }

func (h handler) Conn(c *syscap.Conn) {
	p := h.p
	if c.Role != l7.Server || c.L4 != syscap.TCP || c.Proto != p.v.proto {
		return // the view is the server's: a client's connections are l7's
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns != nil {
		p.conns[c.ID] = &conn{info: *c, parser: p.v.newParser(p.in)}
	}
}

func (h handler) Data(d *syscap.Data) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := p.conns[d.ConnID]
	if cn == nil {
		return
	}
	p.out = cn.parser.Feed(l7.Chunk{Dir: d.Dir, TS: d.TS, Data: d.Bytes, Size: d.Size}, p.out[:0])
	p.exchangesLocked(cn)
}

func (h handler) Close(c *syscap.Close) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := p.conns[c.ConnID]
	if cn == nil {
		return
	}
	delete(p.conns, c.ConnID)
	p.out = cn.parser.Flush(p.out[:0])
	p.exchangesLocked(cn)
}

// exchangesLocked aggregates the exchanges in p.out: those with both
// halves (a request without its response has no latency).
func (p *Probe) exchangesLocked(cn *conn) {
	for i := range p.out {
		e := &p.out[i]
		if !e.HasRequest || !e.HasResponse || e.End < e.Start {
			continue
		}
		m := p.v.method(e.API)
		if m == "" {
			m = unknownMethod
		}
		k := rowKey{tgid: cn.info.TGID, fd: cn.info.FD, method: m}
		if !p.agg.add(k, cn.info.Local, cn.info.Remote, e.End-e.Start) {
			p.rt.Lost(1)
		}
	}
	if n := cn.parser.Desyncs(); n > cn.desyncs {
		p.rt.Lost(n - cn.desyncs)
		cn.desyncs = n
	}
}

// tlsLoop attaches the TLS uprobes to the host's OpenSSL and to the
// OpenSSL of the PostgreSQL servers (by process name) it finds.
func (p *Probe) tlsLoop(ctx context.Context) error {
	p.mu.Lock()
	sub, log, root, ready := p.sub, p.rt.Logger(), p.root(), p.tlsReady
	p.mu.Unlock()
	if sub == nil {
		return nil
	}
	a := syscap.NewTLSScanner(sub, root, func(msg string, args ...any) { log.Info(p.v.name+": "+msg, args...) })
	a.AttachHost()
	t := time.NewTicker(tlsScanInterval)
	defer t.Stop()
	for first := true; ; first = false {
		a.Scan(func(pid int) bool { return p.isServer(root, pid) })
		if first {
			close(ready)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// isServer reports whether process pid is one of the view's servers.
func (p *Probe) isServer(root string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return false
	}
	comm := string(bytes.TrimSpace(b))
	for _, s := range p.v.servers {
		if comm == s {
			return true
		}
	}
	return false
}

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}
