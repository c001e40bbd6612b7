package opengauss

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "opengauss_sli"

// DefaultConf is gala-gopher's configuration file of the probe.
const DefaultConf = "/etc/gala-gopher/extend_probes/pg_stat_probe.conf"

// query is gala-gopher's, without the shared-objects row (no database).
const query = `SELECT datid, datname, xact_commit FROM pg_stat_database
WHERE datname IS NOT NULL AND datname NOT IN ('template0', 'template1')`

// Probe is the opengauss_sli feature. See the package documentation.
type Probe struct {
	conf     string
	hostPath string
	// reportEvery, when set, replaces report_period (tests).
	reportEvery time.Duration
	now         func() time.Time

	mu      sync.Mutex
	cfg     probe.Config
	rt      probe.Runtime
	servers []*server
	kick    chan struct{}
}

// server is one configured server and what was read from it last.
type server struct {
	Server
	conn *pgx.Conn
	tgid int
	// last are the commit counts by database oid at lastAt.
	last   map[uint32]uint64
	lastAt time.Time
	warned bool
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithConf reads the servers from path instead of DefaultConf.
func WithConf(path string) Option { return func(p *Probe) { p.conf = path } }

// WithHostPath roots /proc (GOPHER_HOST_PATH), where the servers'
// processes are looked for.
func WithHostPath(root string) Option { return func(p *Probe) { p.hostPath = root } }

// New returns an opengauss_sli probe.
func New(opts ...Option) *Probe {
	p := &Probe{conf: DefaultConf, now: time.Now, kick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.PgTps} }

// Start reads the configuration file and starts polling. A file that
// cannot be read or parsed fails the start, naming what is wrong; a
// server that cannot be reached is logged and tried again every period.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	b, err := os.ReadFile(p.conf)
	if err != nil {
		return fmt.Errorf("%s: %w", Name, err)
	}
	servers, err := ParseConf(b)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", Name, p.conf, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return fmt.Errorf("%s: started twice", Name)
	}
	p.rt, p.cfg = rt, cfg
	p.servers = p.servers[:0]
	for _, s := range servers {
		p.servers = append(p.servers, &server{Server: s})
	}
	rt.Go(p.loop)
	return nil
}

// Reconfigure applies a new report_period.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return fmt.Errorf("%s: not started", Name)
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

// Stop closes the connections. Idempotent; called after loop returned.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		if s.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.conn.Close(ctx)
			cancel()
			s.conn = nil
		}
	}
	return nil
}

func (p *Probe) period() time.Duration { return probe.ReportPeriod(p.reportEvery, p.cfg.Params) }

// loop polls at start (the first counts) and then every period.
func (p *Probe) loop(ctx context.Context) error {
	p.poll(ctx)
	probe.Every(ctx, p.kick, &p.mu, p.period, func() { p.poll(ctx) })
	return nil
}

// poll reads every server's commit counts and records each database's
// commits per second since the previous read.
func (p *Probe) poll(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		for _, r := range p.pollServer(ctx, s) {
			p.rt.Record(r)
		}
	}
}

func (p *Probe) pollServer(ctx context.Context, s *server) []*table.Record {
	log := p.rt.Logger()
	if s.conn == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, s.connString())
		cancel()
		if err != nil {
			p.rt.Error()
			if !s.warned {
				s.warned = true
				log.Warn("opengauss_sli: cannot connect; retrying every period", "server", s.addr(), "err", err)
			}
			return nil
		}
		s.conn, s.warned, s.last = conn, false, nil
		s.tgid = listener(p.root(), s.IP, s.Port)
		log.Info("opengauss_sli: connected", "server", s.addr(), "tgid", s.tgid)
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := s.conn.Query(qctx, query)
	var (
		oids    []uint32
		names   []string
		commits []int64
	)
	if err == nil {
		var oid uint32
		var name string
		var commit int64
		_, err = pgx.ForEachRow(rows, []any{&oid, &name, &commit}, func() error {
			oids, names, commits = append(oids, oid), append(names, name), append(commits, commit)
			return nil
		})
	}
	now := p.now()
	if err != nil {
		p.rt.Error()
		log.Warn("opengauss_sli: pg_stat_database read failed; reconnecting next period", "server", s.addr(), "err", err)
		_ = s.conn.Close(context.Background())
		s.conn = nil
		return nil
	}
	var out []*table.Record
	next := make(map[uint32]uint64, len(oids))
	elapsed := now.Sub(s.lastAt)
	for i, oid := range oids {
		c := uint64(commits[i])
		next[oid] = c
		prev, ok := s.last[oid]
		if !ok || c < prev || elapsed <= 0 {
			continue // first read, or the counters were reset
		}
		r := table.PgTps.NewRecord(now, elapsed)
		r.SetStr(table.PgTps.MustIndex("tgid"), strconv.Itoa(s.tgid))
		r.SetStr(table.PgTps.MustIndex("ins_id"), strconv.FormatUint(uint64(oid), 10))
		r.SetStr(table.PgTps.MustIndex("app"), "POSTGRE")
		r.SetStr(table.PgTps.MustIndex("method"), "0")
		r.SetStr(table.PgTps.MustIndex("server_ip"), s.IP)
		r.SetStr(table.PgTps.MustIndex("server_port"), strconv.Itoa(s.Port))
		r.SetStr(table.PgTps.MustIndex("datname"), names[i])
		r.SetNum(table.PgTps.MustIndex("tps"), float64(c-prev)/elapsed.Seconds())
		out = append(out, r)
	}
	s.last, s.lastAt = next, now
	return out
}

func (s *server) addr() string { return s.IP + ":" + strconv.Itoa(s.Port) }

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}
