package l7

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack"
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/flowtracer"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "l7"

// Sub-item bits, from probe.Builtin's l7 entry.
var (
	bitBytes = probe.MustSubItemBit(Name, "l7_bytes_metrics")
	bitRPC   = probe.MustSubItemBit(Name, "l7_rpc_metrics")
)

// flavor is what the l7 and sermant features differ in.
type flavor struct {
	name       string
	lT, rT, aT *table.Table // lT nil: no link table
	// protocols, when set, are traced whatever l7_protocol says.
	protocols []l7.Protocol
}

var l7Flavor = flavor{name: Name, lT: table.L7Link, rT: table.L7Rpc, aT: table.L7RpcApi}

// Probe is the l7 feature (or, made by NewSermant, the sermant feature).
// See the package documentation.
type Probe struct {
	f        flavor
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	hostPath string
	ringSize int // capture ring buffer bytes; 0: syscap's default
	// reportEvery, when set, replaces report_period (tests).
	reportEvery time.Duration
	now         func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	shared   *syscap.Shared // nil: a capture of its own
	capture  *syscap.Sub
	agg      *aggregator
	conns    map[uint64]*conn
	out      []l7.Exchange // reused by every Feed
	interns  map[l7.Protocol]*l7.Interner
	topics   map[uint32]*procTopics // Kafka topic names per process
	warned   map[string]bool
	kick     chan struct{}
	tlsKick  chan struct{}
	lastSeen time.Time
	// backends replaces service addresses of client connections by their
	// DNAT backend (cluster_ip_backend 1 or 2); nil for 0.
	backends *conntrack.Resolver
	origins  *flowtracer.Origins
	// spans, when set, also gets every exchange (OTLP traces); clock
	// turns the capture's monotonic stamps into wall time, re-read every
	// report period.
	spans SpanSink
	clock monoToWall
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats exports the probe's BPF run time through s.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithOrigins is the flowtracer probe's table of real clients, read for
// server connections with cluster_ip_backend=2.
func WithOrigins(o *flowtracer.Origins) Option { return func(p *Probe) { p.origins = o } }

// WithMissingHooks reports missing hooks through m.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// WithHostPath roots /proc (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.hostPath = root } }

// WithShared makes the probe a consumer of s, the syscall capture it
// shares with the ksli and postgre_sli views.
func WithShared(s *syscap.Shared) Option { return func(p *Probe) { p.shared = s } }

// WithRingSize sets the capture's ring buffer to bytes (galago.l7_ringbuf_mb):
// a power of 2 from syscap.MinRingSize to syscap.MaxRingSize, checked by
// Start; 0 keeps syscap.DefaultRingSize.
func WithRingSize(bytes int) Option { return func(p *Probe) { p.ringSize = bytes } }

// New returns an l7 probe.
func New(opts ...Option) *Probe {
	return newFlavor(l7Flavor, opts)
}

func newFlavor(f flavor, opts []Option) *Probe {
	p := &Probe{f: f, now: time.Now, kick: make(chan struct{}, 1), tlsKick: make(chan struct{}, 1), warned: map[string]bool{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return p.f.name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	if p.f.lT == nil {
		return []*table.Table{p.f.rT, p.f.aT}
	}
	return []*table.Table{p.f.lT, p.f.rT, p.f.aT}
}

// Start loads the syscall capture and starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) (err error) {
	// A failed start leaves the capture after unlocking: see Stop.
	var leave *syscap.Sub
	defer func() {
		if leave != nil {
			_ = leave.Close()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("l7: started twice")
	}
	log := rt.Logger()
	if p.missing == nil {
		p.missing = bpfrt.NewMissingHooks(log)
	}
	if err := p.missing.Report(bpfrt.HaveTPBTF("sys_exit"), "the l7 probe"); err != nil {
		return fmt.Errorf("l7: %w: %w", probe.ErrNotSupported, err)
	}
	p.rt, p.cfg = rt, cfg
	p.agg = newAggregator()
	p.agg.lT, p.agg.rT, p.agg.aT = p.f.lT, p.f.rT, p.f.aT
	if p.spans != nil {
		p.clock = newMonoToWall()
		// The capture already holds only the snoopers' connections (the
		// kernel filter, or the shared capture's per-consumer check); a
		// process admitted at exec is not in the user-space target set yet.
		p.agg.onExchange = func(c *conn, e *l7.Exchange) { p.spans.Span(p.clock.span(c, e)) }
	}
	p.conns = map[uint64]*conn{}
	p.interns = map[l7.Protocol]*l7.Interner{}
	p.topics = map[uint32]*procTopics{}
	defer func() {
		if err != nil {
			leave = p.closeLocked()
			p.rt = nil
		}
	}()
	shared := p.shared
	if shared == nil {
		shared = syscap.NewShared(syscap.Options{Log: log, HostPath: p.hostPath, RingSize: p.ringSize})
	}
	p.capture, err = shared.Subscribe(handler{p}, rt.Lost)
	if err != nil {
		return fmt.Errorf("l7: %w", err)
	}
	p.capture.CheckedAtReport() // report: the rows of processes not observed are held back or dropped
	if err := p.applyLocked(); err != nil {
		return err
	}
	p.stats.TryRegister(log, p.f.name, p.capture.Programs())
	p.lastSeen = p.now()
	rt.Go(p.capture.Run)
	rt.Go(p.loop)
	rt.Go(p.tlsLoop)
	return nil
}

// applyLocked sends the configuration to the capture.
func (p *Probe) applyLocked() error {
	root := p.hostPath
	if root == "" {
		root = "/"
	}
	p.backends = conntrack.ForParam(p.backends, p.cfg.Params.ClusterIPBackend, conntrack.Options{
		Log: p.rt.Logger(), ProcRoot: filepath.Join(root, "proc"), OnError: p.rt.Error,
	})
	protos := p.protocolsLocked()
	capCfg := syscap.Config{Protocols: protos}
	if slices.Contains(protos, l7.HTTP2) {
		// HTTP/2 multiplexes streams: any write may start frames anywhere
		// in it, not only a turn's first one, and a frame header cut off
		// by the capture (later chunks of a turn keep DefaultContCap
		// bytes) loses the connection's frame boundaries and HPACK table:
		// seen with grpc-go, whose batched writes of a few streams' frames
		// exceed 256 bytes. Later chunks are captured as whole as first
		// ones (up to CaptureMax).
		capCfg.ContCap = syscap.CaptureMax
	}
	if err := p.capture.SetConfig(capCfg); err != nil {
		return fmt.Errorf("l7: %w", err)
	}
	if err := p.capture.SetTargets(p.cfg.Targets); err != nil {
		return fmt.Errorf("l7: snooper filter: %w", err)
	}
	return nil
}

// protocolsLocked maps l7_protocol to the protocols to trace: those with a
// parser; one line is logged for each requested protocol galago cannot
// parse.
func (p *Probe) protocolsLocked() []l7.Protocol {
	if p.f.protocols != nil {
		return p.f.protocols
	}
	names := p.cfg.Params.L7Protocol
	if len(names) == 0 {
		names = DefaultProtocols
	}
	var out []l7.Protocol
	for _, n := range names {
		ps, ok := protocolsByName[strings.ToLower(n)]
		if !ok {
			continue // refused by the params check
		}
		for _, pr := range ps {
			if _, ok := parsers[pr]; !ok {
				if !p.warned["proto."+pr.String()] {
					p.warned["proto."+pr.String()] = true
					p.rt.Logger().Warn("l7: protocol not supported by galago: not traced", "protocol", n)
				}
				continue
			}
			if !slices.Contains(out, pr) {
				out = append(out, pr)
			}
		}
	}
	return out
}

// Reconfigure applies new parameters, sub-items and snoopers.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil || p.capture == nil {
		return errors.New("l7: not started")
	}
	p.cfg = cfg
	if err := p.applyLocked(); err != nil {
		return err
	}
	for _, ch := range []chan struct{}{p.kick, p.tlsKick} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// Stop detaches everything. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	sub := p.closeLocked()
	p.mu.Unlock()
	// The shared capture may still be delivering a record to the
	// handler, which waits for p.mu: leave it unlocked.
	if sub != nil {
		_ = sub.Close()
	}
	return nil
}

// closeLocked releases what Start acquired but the capture, which it
// returns for the caller to close once p.mu is released.
func (p *Probe) closeLocked() *syscap.Sub {
	if p.stats != nil {
		p.stats.Unregister(p.f.name)
	}
	sub := p.capture
	p.capture = nil
	if p.backends != nil {
		_ = p.backends.Close()
		p.backends = nil
	}
	return sub
}

func (p *Probe) period() time.Duration { return probe.ReportPeriod(p.reportEvery, p.cfg.Params) }

func (p *Probe) loop(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, p.period, p.report)
	return nil
}

// report publishes the period's rows, after the capture's kernel-side
// losses (TLS calls without a socket, a full connection table) so that a
// period's loss shows with it, not at the capture's next sweep.
func (p *Probe) report() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return
	}
	if p.capture == nil {
		return // stopped
	}
	if err := p.capture.PollLost(); err != nil {
		p.rt.Error()
		p.rt.Logger().Warn("l7: loss counters", "err", err)
	}
	now := p.now()
	period := p.period()
	recs, dropped := p.agg.flush(now, period, p.cfg.Has(bitBytes), p.cfg.Has(bitRPC), p.cfg.Targets)
	if dropped > 0 {
		p.rt.Lost(dropped)
		p.rt.Logger().Debug("l7: rows of processes never classified dropped", "requests", dropped)
	}
	if p.spans != nil {
		p.clock = newMonoToWall()
	}
	for _, r := range recs {
		p.rt.Record(r)
	}
	p.lastSeen = now
}

// handler adapts the probe to syscap.Handler (the capture calls it on its
// reading goroutine).
type handler struct{ p *Probe }

func (h handler) Conn(c *syscap.Conn) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	mk, ok := parsers[c.Proto]
	if !ok {
		return
	}
	cn := &conn{info: *c, parser: mk(p.env(c))}
	if c.Remote.IsValid() {
		cn.key = rowKeyOf(c, p.serverOf(c), c.SSL)
	}
	p.conns[c.ID] = cn
}

func (h handler) Data(d *syscap.Data) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := p.conns[d.ConnID]
	if cn == nil {
		return // its Conn record was lost (counted) or its protocol has no parser
	}
	if !cn.key.serverIP.IsValid() {
		// An unconnected UDP socket: one parser and row per peer.
		if !d.Peer.IsValid() {
			return
		}
		cn = cn.peer(d.Peer, p.env(&cn.info))
		if cn == nil {
			p.rt.Lost(1)
			return
		}
	}
	link, rpc := cn.rows(p.agg)
	link.last = max(link.last, d.TS)
	if d.Dir == l7.Egress {
		link.bytesSent += uint64(d.Size)
		link.segsSent++
	} else {
		link.bytesRecv += uint64(d.Size)
		link.segsRecv++
	}
	chunk := l7.Chunk{Dir: d.Dir, TS: d.TS, Data: d.Bytes, Size: d.Size}
	p.out = cn.parser.Feed(chunk, p.out[:0])
	for i := range p.out {
		p.agg.exchange(cn.key, rpc, &p.out[i], cn)
	}
	p.reportDesyncs(cn)
	if cn.info.Proto != l7.HTTP {
		return
	}
	if next, rest, ok := upgraded(cn.parser, chunk, func() parserEnv { return p.env(&cn.info) }); ok {
		// h2c: the connection goes on as HTTP/2, in rows of its own.
		cn.parser, cn.desyncs = next, 0
		cn.info.Proto = l7.HTTP2
		cn.key.proto = l7.HTTP2
		cn.link, cn.rpc = nil, nil
		_, rpc = cn.rows(p.agg)
		if rest.Size > 0 {
			p.out = cn.parser.Feed(rest, p.out[:0])
			for i := range p.out {
				p.agg.exchange(cn.key, rpc, &p.out[i], cn)
			}
		}
	}
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
	p.releaseTopics(cn.info.TGID, cn.info.Proto)
	p.flushConn(cn)
	for _, pc := range cn.peers {
		p.flushConn(pc)
	}
}

// flushConn accounts what the parser of a closing connection (or UDP
// peer) still holds.
func (p *Probe) flushConn(pc *conn) {
	if pc.parser == nil || !pc.key.serverIP.IsValid() {
		return
	}
	_, rpc := pc.rows(p.agg)
	p.out = pc.parser.Flush(p.out[:0])
	for i := range p.out {
		p.agg.exchange(pc.key, rpc, &p.out[i], pc)
	}
	p.reportDesyncs(pc)
}

// serverOf is the remote address of connection c in its row: for a TCP
// client with cluster_ip_backend set, the backend its service address was
// DNAT'd to (one ctnetlink lookup per new connection); for a TCP server
// with cluster_ip_backend=2, the real client the flowtracer probe read
// from its SYN, when it did.
func (p *Probe) serverOf(c *syscap.Conn) netip.AddrPort {
	if p.backends == nil || c.L4 != syscap.TCP {
		return c.Remote
	}
	if c.Role == l7.Server {
		if p.cfg.Params.ClusterIPBackend == 2 {
			if orig, ok := p.origins.Lookup(c.Netns, c.Local, c.Remote); ok {
				return orig
			}
		}
		return c.Remote
	}
	return p.backends.Backend(conntrack.Tuple{Netns: c.Netns, PID: c.TGID, Src: c.Local, Dst: c.Remote})
}

// reportDesyncs reports what a parser could not account for as lost.
func (p *Probe) reportDesyncs(cn *conn) {
	if n := cn.parser.Desyncs(); n > cn.desyncs {
		p.rt.Lost(n - cn.desyncs)
		cn.desyncs = n
	}
}

// procTopics are one process's Kafka topic names, shared by its
// connections while it has some.
type procTopics struct {
	names kafka.TopicNames
	conns int
}

// env is what the parser of connection c is made with.
func (p *Probe) env(c *syscap.Conn) parserEnv {
	in := p.interns[c.Proto]
	if in == nil {
		in = &l7.Interner{Max: internMax}
		p.interns[c.Proto] = in
	}
	e := parserEnv{role: c.Role, l4: c.L4, in: in, paths: p.spans != nil}
	if c.Proto == l7.Kafka {
		t := p.topics[c.TGID]
		if t == nil {
			t = &procTopics{}
			p.topics[c.TGID] = t
		}
		t.conns++
		e.topics = &t.names
	}
	return e
}

// releaseTopics drops a process's Kafka topic names with its last
// connection.
func (p *Probe) releaseTopics(tgid uint32, proto l7.Protocol) {
	if proto != l7.Kafka {
		return
	}
	if t := p.topics[tgid]; t != nil {
		if t.conns--; t.conns <= 0 {
			delete(p.topics, tgid)
		}
	}
}

// peer returns the per-peer state of an unconnected UDP socket.
func (c *conn) peer(remote netip.AddrPort, e parserEnv) *conn {
	if pc := c.peers[remote]; pc != nil {
		return pc
	}
	if len(c.peers) >= maxPeers {
		return nil
	}
	if c.peers == nil {
		c.peers = map[netip.AddrPort]*conn{}
	}
	pc := &conn{info: c.info, parser: parsers[c.info.Proto](e), key: rowKeyOf(&c.info, remote, c.info.SSL)}
	c.peers[remote] = pc
	return pc
}
