package socket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "socket"

var (
	bitTCP = subItemBit("tcp_socket")
	bitUDP = subItemBit("udp_socket")
)

func subItemBit(name string) uint32 {
	bit, ok := probe.LookupBuiltin(Name).SubItemBit(name)
	if !ok {
		panic("socket: no sub-item " + name)
	}
	return bit
}

// idleTimeout is how long an endpoint without events is still reported
// (with measured zeros), as gala-gopher ages its endpoints.
const idleTimeout = 10 * time.Minute

// minWalkGap is the least time between two on-demand owner walks; a
// request inside it waits for the next report tick.
const minWalkGap = time.Second

// hook is one attach point: the program, how it attaches, the sub-item it
// serves and the fields it measures (named when the hook is missing).
type hook struct {
	prog    string
	kind    string // "tp_btf" or "cgroup"
	target  string // tracepoint name, or "" for cgroup
	attach  ebpf.AttachType
	sub     uint32
	metrics []string
}

var hooks = []hook{
	{"tcp_state", "tp_btf", "inet_sock_set_state", 0, bitTCP, []string{"endpoint_tcp (all fields)"}},
	{"tcp_rtx_synack", "tp_btf", "tcp_retransmit_synack", 0, bitTCP, []string{"retran_synacks"}},
	{"tcp_rtx_skb", "tp_btf", "tcp_retransmit_skb", 0, bitTCP, []string{"retran_syn"}},
	{"skb_drop", "tp_btf", "kfree_skb", 0, bitTCP, []string{"syn_drop", "ACK-time accept_overflow/listendrop"}},
	{"listen_ingress", "cgroup", "", ebpf.AttachCGroupInetIngress, bitTCP, []string{"SYN-time accept_overflow/syn_overflow/listendrop"}},
	{"listen_egress", "cgroup", "", ebpf.AttachCGroupInetEgress, bitTCP, []string{"synack_sent"}},
	{"udp_send", "tp_btf", "sock_send_length", 0, bitUDP, []string{"bind_sends"}},
	{"udp_recv", "tp_btf", "sock_recv_length", 0, bitUDP, []string{"bind_rcvs"}},
	{"udp_drop", "tp_btf", "udp_fail_queue_rcv_skb", 0, bitUDP, []string{"udp_rcv_drops"}},
	{"udp_bind4", "cgroup", "", ebpf.AttachCGroupInet4PostBind, bitUDP, []string{"owner of receive-only IPv4 UDP sockets"}},
	{"udp_bind6", "cgroup", "", ebpf.AttachCGroupInet6PostBind, bitUDP, []string{"owner of receive-only IPv6 UDP sockets"}},
}

// Probe is the socket feature. See the package documentation.
type Probe struct {
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	interval time.Duration // replaces report_period when set (tests)
	now      func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	coll     *ebpf.Collection
	links    map[string]link.Link
	reader   *bpfrt.Reader
	filter   *bpfrt.FilterSync
	cgroup2  string
	absent   map[string]bool // programs whose hook this kernel lacks
	agg      *aggregator
	kick     chan struct{} // period or targets changed
	walker   *link.Iter    // iter/task_file owner walk; nil when unavailable
	walkReq  chan struct{} // a hook met an unowned socket
	stopOnce sync.Once
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the probe's programs with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter, so
// each is logged once per daemon rather than once per start.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// withInterval replaces report_period (tests use sub-second periods).
func withInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// New returns a stopped socket probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.EndpointTcp, table.EndpointUdp} }

func (p *Probe) period(cfg probe.Config) time.Duration {
	if p.interval > 0 {
		return p.interval
	}
	if d := cfg.Params.Period(); d > 0 {
		return d
	}
	return probe.DefaultParams().Period()
}

// ringSize is ringbuf_map_size (MB) rounded down to a power of two.
func ringSize(mb int) uint32 {
	if mb < 1 {
		mb = 1
	}
	if mb > 32 {
		mb = 32
	}
	return 1 << (bits.Len(uint(mb)) - 1) << 20
}

// Start loads the BPF object, attaches the hooks of the enabled sub-items
// and starts the ring buffer reader, the snooper filter sync and the report
// loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("socket: started twice")
	}
	p.log = rt.Logger()
	if p.missing == nil {
		p.missing = bpfrt.NewMissingHooks(p.log)
	}
	if err := p.load(cfg); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.cfg, p.rt = cfg, rt
	p.agg = newAggregator()
	p.kick = make(chan struct{}, 1)
	p.walkReq = make(chan struct{}, 1)
	if err := p.syncLinks(cfg.SubItems); err != nil {
		p.rt = nil
		return errors.Join(err, p.closeLocked())
	}
	// After the hooks: a socket opened from now on is seen by them, one
	// opened before is in some task's fd table.
	if err := p.walkOwners(); err != nil {
		p.rt = nil
		return errors.Join(err, p.closeLocked())
	}
	if err := p.filter.Sync(cfg.Targets); err != nil {
		p.rt = nil
		return errors.Join(fmt.Errorf("socket: %w", err), p.closeLocked())
	}
	if p.stats != nil {
		if err := p.stats.Register(Name, p.coll.Programs); err != nil {
			p.log.Warn("socket: BPF run-time statistics unavailable", "err", err)
		}
	}
	rd := p.reader
	rt.Go(rd.Run)
	rt.Go(p.run)
	return nil
}

func (p *Probe) load(cfg probe.Config) error {
	spec, err := loadSocket()
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	spec.Maps["events"].MaxEntries = ringSize(cfg.Params.RingbufMapSize)
	if err := bpfrt.ApplyWakeup(spec, "events", bpfrt.Wakeup{Records: 64, RecordSize: RecordSize, FillPercent: 25}); err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	p.absent = map[string]bool{}
	cg, cgErr := bpfrt.HaveCgroup2()
	p.cgroup2 = cg
	for _, h := range hooks {
		var herr error
		if h.kind == "tp_btf" {
			herr = bpfrt.HaveTPBTF(h.target)
		} else {
			herr = cgErr
		}
		if herr != nil {
			_ = p.missing.Report(herr, h.metrics...)
			p.absent[h.prog] = true
			delete(spec.Programs, h.prog)
		}
	}
	if p.absent["tcp_state"] && p.absent["udp_send"] && p.absent["udp_recv"] && p.absent["udp_drop"] {
		return fmt.Errorf("socket: no usable hook: %w", probe.ErrNotSupported)
	}
	p.coll, err = ebpf.NewCollection(spec)
	if err != nil {
		return fmt.Errorf("socket: load: %w", err)
	}
	p.links = map[string]link.Link{}
	if p.walker, err = link.AttachIter(link.IterOptions{Program: p.coll.Programs["walk_owners"]}); err != nil {
		p.walker = nil
		_ = p.missing.Report(&bpfrt.HookError{Hook: "iter/task_file", Err: err},
			"owners of listeners and UDP sockets opened before the probe started (their endpoints are not reported)")
	}
	p.filter, err = bpfrt.NewFilterSync(p.coll.Maps[bpfrt.FilterModeMap], p.coll.Maps[bpfrt.FilterTGIDsMap], p.coll.Maps[bpfrt.FilterCgroupsMap])
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:   p.coll.Maps["events"],
		Lost:   p.coll.Maps[bpfrt.LostEventsMap],
		Handle: p.handle,
		OnLost: func(n uint64) {
			if rt := p.runtime(); rt != nil {
				rt.Lost(n)
			}
		},
		OnError: func(err error) {
			if rt := p.runtime(); rt != nil {
				rt.Error()
				rt.Logger().Warn("socket: bad record", "err", err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	return nil
}

func (p *Probe) runtime() probe.Runtime {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rt
}

// syncLinks attaches the hooks of the enabled sub-items and detaches the
// others; each sub-item's hooks come and go together.
func (p *Probe) syncLinks(sub uint32) error {
	for _, h := range hooks {
		want := sub&h.sub != 0 && !p.absent[h.prog]
		l, have := p.links[h.prog]
		switch {
		case want && !have:
			prog := p.coll.Programs[h.prog]
			var err error
			if h.kind == "tp_btf" {
				l, err = link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
			} else {
				l, err = link.AttachCgroup(link.CgroupOptions{Path: p.cgroup2, Attach: h.attach, Program: prog})
			}
			if err != nil {
				return fmt.Errorf("socket: attach %s: %w", h.prog, err)
			}
			p.links[h.prog] = l
		case !want && have:
			if err := l.Close(); err != nil {
				return fmt.Errorf("socket: detach %s: %w", h.prog, err)
			}
			delete(p.links, h.prog)
		}
	}
	return nil
}

// Reconfigure applies new sub-items (attach/detach), snoopers (filter maps)
// and parameters without reloading.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("socket: not started")
	}
	if err := p.syncLinks(cfg.SubItems); err != nil {
		return err
	}
	// Sockets opened while a sub-item's hooks were detached have no owner.
	if cfg.SubItems&^p.cfg.SubItems != 0 {
		if err := p.walkOwners(); err != nil {
			return err
		}
	}
	if err := p.filter.Sync(cfg.Targets); err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	p.cfg = cfg
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// Stop detaches every hook and unloads the object. The Manager has already
// cancelled the reader and report loop and waited for them. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	p.stopOnce.Do(func() { err = p.closeLocked() })
	return err
}

func (p *Probe) closeLocked() error {
	var errs []error
	if p.stats != nil {
		p.stats.Unregister(Name)
	}
	for name, l := range p.links {
		errs = append(errs, l.Close())
		delete(p.links, name)
	}
	if p.walker != nil {
		errs = append(errs, p.walker.Close())
		p.walker = nil
	}
	if p.reader != nil {
		errs = append(errs, p.reader.Close())
	}
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	return errors.Join(errs...)
}

func (p *Probe) handle(raw []byte) error {
	ev, err := Decode(raw)
	if err != nil {
		return err
	}
	if ev.Type == EvUnowned {
		select {
		case p.walkReq <- struct{}{}:
		default: // a walk is already pending
		}
		return nil
	}
	p.mu.Lock()
	p.agg.add(ev, p.now())
	p.mu.Unlock()
	return nil
}

// run ends a report period on every tick and follows snooper changes.
func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	cur := p.period(p.cfg)
	targets := p.cfg.Targets
	p.mu.Unlock()
	t := time.NewTicker(cur)
	defer t.Stop()
	changed := targetsChanged(targets)
	lastWalk := p.now()
	walkPending := false
	walk := func() {
		walkPending = false
		lastWalk = p.now()
		if err := p.walkOwners(); err != nil {
			p.rt.Error()
			p.log.Warn("socket: owner walk failed", "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.walkReq:
			if p.now().Sub(lastWalk) >= minWalkGap {
				walk()
			} else {
				walkPending = true
			}
		case <-p.kick:
			p.mu.Lock()
			if d := p.period(p.cfg); d != cur {
				cur = d
				t.Reset(d)
			}
			targets = p.cfg.Targets
			p.mu.Unlock()
			changed = targetsChanged(targets)
		case _, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
			p.mu.Lock()
			err := p.filter.Sync(targets)
			p.mu.Unlock()
			if err != nil {
				return fmt.Errorf("socket: %w", err)
			}
		case <-t.C:
			if walkPending {
				walk()
			}
			p.report(p.now())
		}
	}
}

// walkOwners runs the iter/task_file walk: every socket in a task's fd
// table without a recorded owner gets that task (bpf/include/sockowner.h).
// The program writes nothing; reading to the end runs it. The iterator is
// only closed by Stop, after the run loop has returned.
func (p *Probe) walkOwners() error {
	if p.walker == nil {
		return nil
	}
	rc, err := p.walker.Open()
	if err != nil {
		return fmt.Errorf("socket: owner walk: %w", err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("socket: owner walk: %w", err)
	}
	return nil
}

func targetsChanged(t snoop.Targets) <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.Changed()
}

// report publishes the period that ends at now and its events.
func (p *Probe) report(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return
	}
	period := p.period(p.cfg)
	recs, evs := p.agg.flush(now, period, p.cfg)
	for _, r := range recs {
		p.rt.Record(r)
	}
	for _, e := range evs {
		p.rt.Event(e)
	}
}

// ---- aggregation ----

// tcp counters, in table order.
const (
	cListendrop = iota
	cAcceptOverflow
	cSynOverflow
	cPassiveOpen
	cPassiveOpenFailed
	cRetranSynacks
	cRetranSyn
	cActiveOpen
	cActiveOpenFailed
	cSynSent
	cSynDrop
	cSynackSent
	nTCPCounters
)

var tcpCounterFields = [nTCPCounters]string{
	"listendrop", "accept_overflow", "syn_overflow", "passive_open", "passive_open_failed",
	"retran_synacks", "retran_syn", "active_open", "active_open_failed", "syn_sent",
	"syn_drop", "synack_sent",
}

// estabBounds are gala-gopher's estab_latency buckets, in ns.
var estabBounds = []float64{3e6, 10e6, 50e6, 100e6, 500e6, 1e9, 10e9}

type tcpKey struct {
	tgid       uint32
	comm       string
	role       uint8
	client     netip.Addr
	server     netip.Addr
	serverPort uint16
	family     uint16
}

type tcpEndpoint struct {
	c        [nTCPCounters]uint64
	latency  *table.Histogram
	lastSeen time.Time
}

type udpKey struct {
	tgid       uint32
	local      netip.Addr
	localPort  uint16
	remote     netip.Addr // invalid when unconnected
	remotePort uint16
	family     uint16
}

type udpEndpoint struct {
	drops, sends, rcvs uint64
	lastSeen           time.Time
}

type aggregator struct {
	tcp map[tcpKey]*tcpEndpoint
	udp map[udpKey]*udpEndpoint
}

func newAggregator() *aggregator {
	return &aggregator{tcp: map[tcpKey]*tcpEndpoint{}, udp: map[udpKey]*udpEndpoint{}}
}

func (a *aggregator) add(ev Event, now time.Time) {
	if ev.Type >= EvUDPSend {
		k := udpKey{tgid: ev.TGID, local: ev.Src, localPort: ev.SrcPort, family: ev.Family}
		if ev.DstPort != 0 && !ev.Dst.IsUnspecified() {
			k.remote, k.remotePort = ev.Dst, ev.DstPort
		}
		u := a.udp[k]
		if u == nil {
			u = &udpEndpoint{}
			a.udp[k] = u
		}
		u.lastSeen = now
		switch ev.Type {
		case EvUDPSend:
			u.sends += ev.Value
		case EvUDPRecv:
			u.rcvs += ev.Value
		case EvUDPDrop:
			u.drops += ev.Value
		}
		return
	}
	// Endpoints are per client IP: the client port is not a key.
	k := tcpKey{tgid: ev.TGID, comm: ev.Comm, role: ev.Role, client: ev.Src, server: ev.Dst, serverPort: ev.DstPort, family: ev.Family}
	t := a.tcp[k]
	if t == nil {
		t = &tcpEndpoint{latency: table.NewHistogram(estabBounds)}
		a.tcp[k] = t
	}
	t.lastSeen = now
	switch ev.Type {
	case EvSynSent:
		t.c[cSynSent]++
	case EvActiveOpen:
		t.c[cActiveOpen]++
		t.latency.Observe(float64(ev.Value))
	case EvActiveFail:
		t.c[cActiveOpenFailed]++
	case EvPassiveOpen:
		t.c[cPassiveOpen]++
		if ev.Value > 0 {
			t.latency.Observe(float64(ev.Value))
		}
	case EvPassiveFail:
		t.c[cPassiveOpenFailed]++
	case EvRetranSynack:
		t.c[cRetranSynacks]++
	case EvRetranSyn:
		t.c[cRetranSyn]++
	case EvSynDrop:
		t.c[cSynDrop]++
	case EvAcceptOverflow:
		t.c[cAcceptOverflow]++
		t.c[cListendrop]++
	case EvSynOverflow:
		t.c[cSynOverflow]++
		if ev.Value != 0 {
			t.c[cListendrop]++
		}
	case EvListenDrop:
		t.c[cListendrop]++
	case EvSynackSent:
		t.c[cSynackSent]++
	}
}

func roleName(r uint8) string {
	if r == RoleServer {
		return "server"
	}
	return "client"
}

// flush renders and resets one period; endpoints idle for idleTimeout are
// forgotten.
func (a *aggregator) flush(now time.Time, period time.Duration, cfg probe.Config) ([]*table.Record, []event.Event) {
	var recs []*table.Record
	var evs []event.Event
	T := table.EndpointTcp
	if cfg.Has(bitTCP) {
		for k, t := range a.tcp {
			if now.Sub(t.lastSeen) >= idleTimeout {
				delete(a.tcp, k)
				continue
			}
			r := T.NewRecord(now, period)
			r.SetStr(T.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
			r.SetStr(T.MustIndex("comm"), k.comm)
			r.SetStr(T.MustIndex("role"), roleName(k.role))
			r.SetStr(T.MustIndex("client_ip"), k.client.String())
			r.SetStr(T.MustIndex("server_ip"), k.server.String())
			r.SetStr(T.MustIndex("server_port"), strconv.Itoa(int(k.serverPort)))
			r.SetStr(T.MustIndex("protocol"), strconv.Itoa(int(k.family)))
			for i, name := range tcpCounterFields {
				r.SetNum(T.MustIndex(name), float64(t.c[i]))
			}
			r.SetHist(T.MustIndex("estab_latency"), t.latency)
			recs = append(recs, r)
			if cfg.Params.ReportEvent == 1 {
				evs = append(evs, tcpEvents(k, t, now)...)
			}
			t.c = [nTCPCounters]uint64{}
			t.latency = table.NewHistogram(estabBounds)
		}
	} else {
		clear(a.tcp)
	}
	U := table.EndpointUdp
	if cfg.Has(bitUDP) {
		for k, u := range a.udp {
			if now.Sub(u.lastSeen) >= idleTimeout {
				delete(a.udp, k)
				continue
			}
			r := U.NewRecord(now, period)
			r.SetStr(U.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
			r.SetStr(U.MustIndex("local_ip"), k.local.String())
			r.SetStr(U.MustIndex("local_port"), strconv.Itoa(int(k.localPort)))
			if k.remote.IsValid() {
				r.SetStr(U.MustIndex("remote_ip"), k.remote.String())
				r.SetStr(U.MustIndex("remote_port"), strconv.Itoa(int(k.remotePort)))
			}
			r.SetStr(U.MustIndex("protocol"), strconv.Itoa(int(k.family)))
			r.SetNum(U.MustIndex("udp_rcv_drops"), float64(u.drops))
			r.SetNum(U.MustIndex("bind_sends"), float64(u.sends))
			r.SetNum(U.MustIndex("bind_rcvs"), float64(u.rcvs))
			recs = append(recs, r)
			u.drops, u.sends, u.rcvs = 0, 0, 0
		}
	} else {
		clear(a.udp)
	}
	return recs, evs
}

// tcpEvents are gala-gopher's endpoint_tcp events for one period.
func tcpEvents(k tcpKey, t *tcpEndpoint, now time.Time) []event.Event {
	var out []event.Event
	id := fmt.Sprintf("%d_%s_%s_%d_%d", k.tgid, k.client, k.server, k.serverPort, k.role)
	ip := fmt.Sprintf("Client %s, Server %s:%d", k.client, k.server, k.serverPort)
	add := func(metric, format string, v uint64) {
		if v == 0 {
			return
		}
		out = append(out, event.Event{
			Time: now, Entity: "endpoint_tcp", EntityID: id, Metric: metric,
			PID: int(k.tgid), Comm: k.comm, IP: ip, Severity: event.SeverityWarn,
			Message: fmt.Sprintf(format, v),
		})
	}
	add("listendrop", "TCP listen drops(%d).", t.c[cListendrop])
	add("accept_overflow", "TCP accept queue overflow(%d).", t.c[cAcceptOverflow])
	add("syn_overflow", "TCP syn queue overflow(%d).", t.c[cSynOverflow])
	add("retran_synacks", "TCP SYN/ACK retransmission occurs.(%d).", t.c[cRetranSynacks])
	return out
}
