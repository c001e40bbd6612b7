package kafkaprobe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature's name.
const Name = "kafka"

// Probe is the kafka feature. See the package documentation.
type Probe struct {
	shared   *syscap.Shared
	hostPath string
	// reportEvery, when set, replaces report_period (tests).
	reportEvery time.Duration
	// onFlush, when set, sees each period's rows (tests).
	onFlush func(map[rowKey]uint64)
	// tlsScope, when set, limits the processes whose TLS libraries and
	// executables get uprobes (tests: scanning every process of a busy
	// machine takes seconds).
	tlsScope func(pid int) bool
	now      func() time.Time

	mu    sync.Mutex
	cfg   probe.Config
	rt    probe.Runtime
	sub   *syscap.Sub
	agg   *agg
	conns map[uint64]*conn
	// names are each process's topic ids learnt from Metadata responses,
	// shared by its connections (clients ask for metadata on another
	// connection than the one they fetch on).
	names map[uint32]*procNames
	out   []l7.Exchange
	kick  chan struct{}
	// tlsKick wakes the TLS uprobe loop at a change of support_ssl.
	tlsKick chan struct{}
}

// conn is one traced Kafka connection.
type conn struct {
	info    syscap.Conn
	parser  *kafka.Parser
	desyncs uint64 // desyncs and hidden messages counted so far
}

type procNames struct {
	names kafka.TopicNames
	conns int
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithShared makes the feature a consumer of s, the syscall capture it
// shares with the l7 probe (without it the feature has a capture of its
// own).
func WithShared(s *syscap.Shared) Option { return func(p *Probe) { p.shared = s } }

// WithHostPath roots /proc (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.hostPath = root } }

// New returns the kafka feature.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, kick: make(chan struct{}, 1), tlsKick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.Kafkaprobe} }

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
		return fmt.Errorf("%s: started twice", Name)
	}
	if err := bpfrt.HaveTPBTF("sys_exit"); err != nil {
		return fmt.Errorf("%s: %w: %w", Name, probe.ErrNotSupported, err)
	}
	log := rt.Logger()
	p.rt, p.cfg = rt, cfg
	p.agg = newAgg()
	p.conns = map[uint64]*conn{}
	p.names = map[uint32]*procNames{}
	shared := p.shared
	if shared == nil {
		shared = syscap.NewShared(syscap.Options{Log: log, HostPath: p.hostPath})
	}
	if p.sub, err = shared.Subscribe(handler{p}, rt.Lost); err != nil {
		p.rt = nil
		return fmt.Errorf("%s: %w", Name, err)
	}
	// Every process, as gala-gopher's kafkaprobe (no snoopers).
	// Whole chunks: every batch header of a large Fetch response or
	// Produce request, not only those in its first 4 KiB.
	if err := p.sub.SetConfig(syscap.Config{Protocols: []l7.Protocol{l7.Kafka}, Whole: []l7.Protocol{l7.Kafka}, WholeMax: syscap.WholeMaxLimit}); err != nil {
		leave, p.sub, p.rt = p.sub, nil, nil // left once p.mu is released (see Stop)
		return fmt.Errorf("%s: %w", Name, err)
	}
	log.Info(Name+": records are counted from the Kafka connections' syscalls (the l7 capture), not from an XDP program; dev_name is accepted and not used",
		"kafka_port", cfg.Params.KafkaPort)
	rt.Go(p.sub.Run)
	rt.Go(p.loop)
	rt.Go(p.tlsLoop)
	return nil
}

// tlsLoop keeps the capture's TLS uprobes (OpenSSL, Go crypto/tls) on
// every process while support_ssl is 1, so that Kafka over TLS is read
// from its plaintext.
func (p *Probe) tlsLoop(ctx context.Context) error {
	p.mu.Lock()
	log, sub := p.rt.Logger(), p.sub
	p.mu.Unlock()
	scope := p.tlsScope
	if scope == nil {
		scope = func(int) bool { return true }
	}
	root := p.hostPath
	if root == "" {
		root = "/"
	}
	return syscap.RunTLS(ctx, sub, root, func(msg string, args ...any) { log.Info(Name+": "+msg, args...) }, p.tlsKick,
		func() (bool, func(int) bool) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.cfg.Params.SupportSSL == 1, scope
		})
}

// Reconfigure applies new parameters (report_period, kafka_port).
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return fmt.Errorf("%s: not started", Name)
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	probe.Kick(p.tlsKick)
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

func (p *Probe) report() {
	p.mu.Lock()
	now, period, rt := p.now(), p.period(), p.rt
	rows := p.agg.flush()
	p.mu.Unlock()
	if p.onFlush != nil {
		p.onFlush(rows)
	}
	for k, n := range rows {
		rt.Record(record(k, n, now, period))
	}
}

// handler adapts the feature to syscap.Handler.
type handler struct{ p *Probe }

func (h handler) Conn(c *syscap.Conn) {
	p := h.p
	if c.L4 != syscap.TCP || c.Proto != l7.Kafka {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return
	}
	cn := &conn{info: *c, parser: kafka.NewParser(c.Role)}
	pn := p.names[c.TGID]
	if pn == nil {
		pn = &procNames{}
		p.names[c.TGID] = pn
	}
	pn.conns++
	cn.parser.SetTopicNames(&pn.names)
	cn.parser.OnTopic = func(t kafka.TopicRecords) { p.topicLocked(cn, t) }
	p.conns[c.ID] = cn
}

func (h handler) Data(d *syscap.Data) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := p.conns[d.ConnID]
	if cn == nil {
		return
	}
	// The exchanges are l7's; this view only needs the parser's OnTopic.
	p.out = cn.parser.Feed(l7.Chunk{Dir: d.Dir, TS: d.TS, Data: d.Bytes, Size: d.Size}, p.out[:0])
	p.desyncsLocked(cn)
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
	p.desyncsLocked(cn)
	if pn := p.names[cn.info.TGID]; pn != nil {
		if pn.conns--; pn.conns <= 0 {
			delete(p.names, cn.info.TGID)
		}
	}
}

// topicLocked counts one topic's records of a Produce request or Fetch
// response on connection cn, if its broker listens on kafka_port.
func (p *Probe) topicLocked(cn *conn, t kafka.TopicRecords) {
	client, server, s := cn.info.Local, cn.info.Remote, atClient
	if cn.info.Role == l7.Server {
		client, server, s = cn.info.Remote, cn.info.Local, atServer
	}
	if int(server.Port()) != p.cfg.Params.KafkaPort {
		return
	}
	if !t.Exact {
		// A capture gap hid batch headers: the records after it are not
		// counted.
		p.rt.Lost(1)
	}
	if t.Records <= 0 {
		return
	}
	k := rowKey{kind: t.Kind, client: client, server: server, topic: topicName(t)}
	if !p.agg.add(k, s, uint64(t.Records)) {
		p.rt.Lost(uint64(t.Records))
	}
}

// desyncsLocked counts as lost what the parser could not frame and the
// messages whose topics a capture gap hid.
func (p *Probe) desyncsLocked(cn *conn) {
	if n := cn.parser.Desyncs() + cn.parser.Hidden(); n > cn.desyncs {
		p.rt.Lost(n - cn.desyncs)
		cn.desyncs = n
	}
}
