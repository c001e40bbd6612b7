package socket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/sockowner"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "socket"

var (
	bitTCP = probe.MustSubItemBit(Name, "tcp_socket")
	bitUDP = probe.MustSubItemBit(Name, "udp_socket")
)

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
	kind    string // "tp_btf", "cgroup" or "sockops" (a cgroup hook that needs bpf_cast_to_kern_ctx)
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
	{"synack_sent", "sockops", "", ebpf.AttachCGroupSockOps, bitTCP, []string{"synack_sent"}},
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
	links    bpfrt.Links
	reader   *bpfrt.Reader
	filter   *bpfrt.FilterSync
	cgroup2  string
	absent   map[string]bool // programs whose hook this kernel lacks
	agg      *aggregator
	kick     chan struct{} // period or targets changed
	walker   *link.Iter    // iter/task_file owner walk; nil when unavailable
	walkReq  chan struct{} // a hook met an unowned socket
	seq      uint64        // report periods ended (socket_period)
	lost     uint64        // agg_lost reported so far
	stopOnce probe.StopOnce
	// owners: the socket owner maps shared with the tcp probe (nil: the
	// object's own); releaseOwners gives them back after coll is closed.
	owners        *sockowner.Shared
	releaseOwners func()
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

// WithOwners shares the socket owner maps with the other probes given the
// same Shared (one owner storage element per socket).
func WithOwners(s *sockowner.Shared) Option { return func(p *Probe) { p.owners = s } }

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
	return probe.ReportPeriod(p.interval, cfg.Params)
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
	p.missing = p.missing.OrNew(p.log)
	if err := p.load(cfg, rt); err != nil {
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
	p.stats.TryRegister(p.log, Name, p.coll.Programs)
	rd := p.reader
	rt.Go(rd.Run)
	rt.Go(p.filter.Run)
	rt.Go(p.run)
	return nil
}

// loadSpec is the socket object's spec as the probe loads it: the listener
// index and the filter maps allocated on insert (listeners come and go
// rarely: the map holds what exists rather than 1.8 MiB preallocated).
func loadSpec() (*ebpf.CollectionSpec, error) {
	spec, err := loadSocket()
	if err != nil {
		return nil, err
	}
	if err := bpfrt.AllocOnInsert(spec, append([]string{"galago_listen_owners"}, bpfrt.FilterMaps...)...); err != nil {
		return nil, err
	}
	return spec, nil
}

func (p *Probe) load(cfg probe.Config, rt probe.Runtime) error {
	spec, err := loadSpec()
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	// The ring buffer carries only walk requests (once per unowned
	// socket, each submitted with an immediate wake-up): its fixed 64 KiB
	// (4096 requests) replace ringbuf_map_size.
	p.absent = map[string]bool{}
	cg, cgErr := bpfrt.HaveCgroup2()
	p.cgroup2 = cg
	for _, h := range hooks {
		var herr error
		switch h.kind {
		case "tp_btf":
			herr = bpfrt.HaveTPBTF(h.target)
		case "sockops":
			herr = cgErr
			if herr == nil {
				herr = haveKernCtx()
			}
		default:
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
	replace, release, err := p.owners.Acquire(spec)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	p.releaseOwners = release
	p.coll, err = ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: replace})
	if err != nil {
		return fmt.Errorf("socket: load: %w", err)
	}
	p.links = bpfrt.Links{}
	if p.walker, err = link.AttachIter(link.IterOptions{Program: p.coll.Programs["walk_owners"]}); err != nil {
		p.walker = nil
		_ = p.missing.Report(&bpfrt.HookError{Hook: "iter/task_file", Err: err},
			"owners of listeners and UDP sockets opened before the probe started (their endpoints are not reported)")
	}
	p.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjectsOf(p.coll), rt.Lost)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:    p.coll.Maps["events"],
		Lost:    p.coll.Maps[bpfrt.LostEventsMap],
		Handle:  p.handle,
		OnLost:  rt.Lost,
		OnError: func(err error) { probe.LogError(rt, "socket: bad record", err) },
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
		if _, err := p.links.Set(h.prog, sub&h.sub != 0 && !p.absent[h.prog], func() (link.Link, error) {
			prog := p.coll.Programs[h.prog]
			if h.kind == "tp_btf" {
				return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
			}
			return link.AttachCgroup(link.CgroupOptions{Path: p.cgroup2, Attach: h.attach, Program: prog})
		}); err != nil {
			return fmt.Errorf("socket: %w", err)
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
	probe.Kick(p.kick)
	return nil
}

// Stop detaches every hook and unloads the object. The Manager has already
// cancelled the reader and report loop and waited for them. Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	var errs []error
	p.stats.Unregister(Name)
	errs = append(errs, p.links.Close())
	if p.walker != nil {
		errs = append(errs, p.walker.Close())
		p.walker = nil
	}
	if p.reader != nil {
		errs = append(errs, p.reader.Close())
	}
	if p.filter != nil {
		errs = append(errs, p.filter.Close())
		p.filter = nil
	}
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	if p.releaseOwners != nil {
		p.releaseOwners()
		p.releaseOwners = nil
	}
	return errors.Join(errs...)
}

// handle takes one ring buffer record: an owner walk request.
func (p *Probe) handle(raw []byte) error {
	req, err := DecodeWalkRequest(raw)
	if err != nil {
		return err
	}
	if rt := p.runtime(); rt != nil {
		rt.Logger().Debug("socket: unowned socket, owner walk requested", "family", req.Family, "port", req.Port, "netns", req.Netns)
	}
	probe.Kick(p.walkReq) // one pending walk covers every request
	return nil
}

// run ends a report period on every tick and runs the owner walks.
func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	cur := p.period(p.cfg)
	p.mu.Unlock()
	t := time.NewTicker(cur)
	defer t.Stop()
	lastWalk := p.now()
	walkPending := false
	walk := func() {
		walkPending = false
		lastWalk = p.now()
		if err := p.walkOwners(); err != nil {
			probe.LogError(p.rt, "socket: owner walk failed", err)
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
			p.mu.Unlock()
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

// report publishes the period that ends at now and its events: it moves
// socket_period on (the slot of the per-period latency maximum), reads both
// endpoint maps, reports the growth since the previous read, and deletes
// endpoints idle for idleTimeout.
func (p *Probe) report(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return
	}
	seq := p.seq
	p.seq++
	if err := p.coll.Variables["socket_period"].Set(p.seq); err != nil {
		p.fail(fmt.Errorf("socket: advance period: %w", err))
	}
	if err := p.collect(now, seq); err != nil {
		p.fail(err)
	}
	if lost, err := p.aggLost(); err != nil {
		p.fail(err)
	} else if lost > p.lost {
		p.rt.Lost(lost - p.lost)
		p.lost = lost
	}
	period := p.period(p.cfg)
	recs, evs := p.agg.flush(now, period, p.cfg)
	if n := p.agg.takeExpired(); n > 0 {
		p.rt.Lost(n)
	}
	for _, r := range recs {
		p.rt.Record(r)
	}
	for _, e := range evs {
		p.rt.Event(e)
	}
}

func (p *Probe) fail(err error) {
	probe.LogError(p.rt, "socket: report", err)
}

// collect reads the endpoint maps of the enabled sub-items into the
// aggregator; a disabled sub-item's endpoints are deleted, so that enabling
// it again starts from zero.
func (p *Probe) collect(now time.Time, seq uint64) error {
	tcpMap, udpMap := p.coll.Maps["tcp_endpoints"], p.coll.Maps["udp_endpoints"]
	var errs []error
	if p.cfg.Has(bitTCP) {
		entries, err := readTCP(tcpMap)
		if err != nil {
			errs = append(errs, err)
		} else {
			p.agg.observeTCP(entries, seq, now)
			for _, k := range p.agg.idleTCP(now) {
				raw := p.agg.tcp[k].raw
				var v [tcpValSize]byte
				found, err := lookupAndDelete(tcpMap, raw[:], v[:])
				if err != nil {
					errs = append(errs, err)
					continue
				}
				final, _ := decodeTCPVal(v[:])
				p.agg.retireTCP(k, final, found, seq, now)
			}
		}
	} else {
		clear(p.agg.tcp)
		errs = append(errs, deleteAll(tcpMap))
	}
	if p.cfg.Has(bitUDP) {
		entries, err := readUDP(udpMap)
		if err != nil {
			errs = append(errs, err)
		} else {
			p.agg.observeUDP(entries, now)
			for _, k := range p.agg.idleUDP(now) {
				raw := p.agg.udp[k].raw
				var v [udpValSize]byte
				found, err := lookupAndDelete(udpMap, raw[:], v[:])
				if err != nil {
					errs = append(errs, err)
					continue
				}
				final, _ := decodeUDPVal(v[:])
				p.agg.retireUDP(k, final, found, now)
			}
		}
	} else {
		clear(p.agg.udp)
		errs = append(errs, deleteAll(udpMap))
	}
	return errors.Join(errs...)
}

// batchSize is how many endpoints one BPF_MAP_LOOKUP_BATCH returns; larger
// than any hash bucket, as the kernel requires.
const batchSize = 512

// readBatch reads every element of m in batches of fixed-size byte arrays.
func readBatch[K, V any](m *ebpf.Map, each func(k *K, v *V)) error {
	keys := make([]K, batchSize)
	vals := make([]V, batchSize)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			each(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("socket: read %s: %w", m, err)
		}
	}
}

func readTCP(m *ebpf.Map) ([]tcpEntry, error) {
	var out []tcpEntry
	var bad error
	err := readBatch(m, func(k *[tcpKeySize]byte, v *[tcpValSize]byte) {
		key, err := decodeTCPKey(k[:])
		if err != nil {
			bad = err
			return
		}
		val, _ := decodeTCPVal(v[:])
		out = append(out, tcpEntry{raw: *k, key: key, val: val})
	})
	return out, errors.Join(err, bad)
}

func readUDP(m *ebpf.Map) ([]udpEntry, error) {
	var out []udpEntry
	var bad error
	err := readBatch(m, func(k *[udpKeySize]byte, v *[udpValSize]byte) {
		key, err := decodeUDPKey(k[:])
		if err != nil {
			bad = err
			return
		}
		val, _ := decodeUDPVal(v[:])
		out = append(out, udpEntry{raw: *k, key: key, val: val})
	})
	return out, errors.Join(err, bad)
}

// lookupAndDelete removes key from m and returns its last value
// atomically: an increment that raced the idle decision is in it.
func lookupAndDelete(m *ebpf.Map, key, val []byte) (bool, error) {
	err := m.LookupAndDelete(key, val)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("socket: delete idle endpoint: %w", err)
	}
	return true, nil
}

// deleteAll empties m (a disabled sub-item's endpoints).
func deleteAll(m *ebpf.Map) error {
	var keys [][]byte
	it := m.Iterate()
	key := make([]byte, m.KeySize())
	val := make([]byte, m.ValueSize())
	for it.Next(&key, &val) {
		keys = append(keys, append([]byte(nil), key...))
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("socket: empty %s: %w", m, err)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("socket: empty %s: %w", m, err)
		}
	}
	return nil
}

// aggLost sums agg_lost over the CPUs: increments lost to a full endpoint
// map since the probe loaded.
func (p *Probe) aggLost() (uint64, error) {
	var per []uint64
	if err := p.coll.Maps["agg_lost"].Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("socket: read agg_lost: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// The BPF structs as the Go side reads them.
var (
	_ [tcpKeySize]byte  = [unsafe.Sizeof(socketSocketTcpKey{})]byte{}
	_ [tcpValSize]byte  = [unsafe.Sizeof(socketSocketTcpVal{})]byte{}
	_ [udpKeySize]byte  = [unsafe.Sizeof(socketSocketUdpKey{})]byte{}
	_ [udpValSize]byte  = [unsafe.Sizeof(socketSocketUdpVal{})]byte{}
	_ [WalkReqSize]byte = [unsafe.Sizeof(socketSocketWalkReq{})]byte{}
)

// haveKernCtx checks for the kfunc bpf_cast_to_kern_ctx (Linux 6.3+),
// through which synack_sent reaches the request socket and its listener;
// without it the program would fail the whole object's load.
func haveKernCtx() error {
	const hook = "sockops bpf_cast_to_kern_ctx"
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return &bpfrt.HookError{Hook: hook, Err: err}
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_cast_to_kern_ctx", &fn); err != nil {
		return &bpfrt.HookError{Hook: hook, Err: fmt.Errorf("kfunc bpf_cast_to_kern_ctx: %w (Linux 6.3+)", err)}
	}
	return nil
}
