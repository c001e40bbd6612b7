package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/conntrack"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/flowtracer"
	"github.com/galago-project/galago/internal/sockowner"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "tcp"

// Sub-item bits, from probe.Builtin's tcp entry.
var (
	bitAbnormal = probe.MustSubItemBit(Name, "tcp_abnormal")
	bitWindows  = probe.MustSubItemBit(Name, "tcp_windows")
	bitRTT      = probe.MustSubItemBit(Name, "tcp_rtt")
	bitStats    = probe.MustSubItemBit(Name, "tcp_stats")
	bitSockbuf  = probe.MustSubItemBit(Name, "tcp_sockbuf")
	bitRate     = probe.MustSubItemBit(Name, "tcp_rate")
	bitSRTT     = probe.MustSubItemBit(Name, "tcp_srtt")
	bitDelay    = probe.MustSubItemBit(Name, "tcp_delay")
)

// Probe is the tcp feature. See the package documentation.
type Probe struct {
	stats   *bpfrt.Stats
	missing *bpfrt.MissingHooks
	// sampleEvery and reportEvery, when set, replace sample_period and
	// report_period (tests drive sub-second periods).
	sampleEvery, reportEvery time.Duration
	now                      func() time.Time

	mu   sync.Mutex
	cfg  probe.Config
	rt   probe.Runtime
	objs *tcpObjects
	// rec is the ring record being handled, decoded in place under mu:
	// a local would move to the heap (the aggregator's serverOf and
	// clientOf hooks take its address), one allocation per closed
	// connection.
	rec   conn
	links []link.Link
	// Optional hooks, attached only while a sub-item needs them: the
	// loaded programs and their links by program name, and why a hook is
	// missing on this kernel (reported when a sub-item asks for it).
	optProgs   map[string]*ebpf.Program
	optLinks   bpfrt.Links
	optMissing map[string]error
	// net_delay: the cgroup2 mount the sock_ops program attaches to, its
	// link while tcp_delay is on, why it cannot run here, and the
	// attachment generation (delay_epoch).
	cgroup2    string
	delayLink  link.Link
	delayErr   error
	delayEpoch uint32
	// Kernel support of tmout_count (tcp_sock.total_rto) and tcp_oom (the
	// reset reason of tcp_send_reset); nil when present.
	rtoErr, oomErr error
	iterTCP        *link.Iter // iter/task_file: owners and TCP sockets
	iterMPTCP      *link.Iter // iter/tcp: MPTCP subflows (in no fd table)
	reader         *bpfrt.Reader
	filter         *bpfrt.FilterSync
	agg            *aggregator
	hooks          hooksAvail
	periodFrom     time.Time
	warnedLate     bool
	// cfgChanged wakes the loop to re-arm its timers and follow new targets.
	cfgChanged chan struct{}
	// backends: cluster_ip_backend's lookups (backend.go); nil for 0.
	backends *conntrack.Resolver
	origins  *flowtracer.Origins
	// owners: the socket owner maps shared with the socket probe (nil:
	// the object's own); releaseOwners gives them back after the objects
	// are closed.
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

// WithStats exports the probe's BPF run time through s.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithOrigins is the flowtracer probe's table of real clients, read for
// server connections with cluster_ip_backend=2.
func WithOrigins(o *flowtracer.Origins) Option { return func(p *Probe) { p.origins = o } }

// WithOwners shares the socket owner maps with the other probes given the
// same Shared (one owner storage element per socket).
func WithOwners(s *sockowner.Shared) Option { return func(p *Probe) { p.owners = s } }

// WithMissingHooks reports missing hooks through m (one per daemon keeps
// restarts quiet); without it the probe logs them through its own logger.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// withPeriods replaces sample_period and report_period (tests).
func withPeriods(sample, report time.Duration) Option {
	return func(p *Probe) { p.sampleEvery, p.reportEvery = sample, report }
}

// New returns a tcp probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, cfgChanged: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables. proc_flow_perf carries net_delay only
// (sys_delay is not measured): see the package doc.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.TcpMetric, table.ProcFlowPerf} }

// optional hooks: the tracepoint, the program, the sub-item whose fields it
// feeds (it is attached only while that sub-item is on), what it feeds.
type optHook struct {
	tp       string
	prog     string
	subItem  uint32
	disables []string
}

var optionalHooks = []optHook{
	{"tcp_send_reset", "on_send_reset", bitAbnormal, []string{"send_rsts"}},
	{"tcp_receive_reset", "on_receive_reset", bitAbnormal, []string{"receive_rsts"}},
	{"kfree_skb", "on_kfree_skb", bitAbnormal, []string{"backlog_drops", "filter_drops"}},
	{"sock_exceed_buf_limit", "on_exceed_buf_limit", bitAbnormal, []string{"snd_buf_limit_count", "rmem_scheduls"}},
}

func (o *tcpObjects) optProgram(name string) *ebpf.Program {
	return map[string]*ebpf.Program{
		"on_send_reset": o.OnSendReset, "on_receive_reset": o.OnReceiveReset,
		"on_kfree_skb": o.OnKfreeSkb, "on_exceed_buf_limit": o.OnExceedBufLimit,
	}[name]
}

// Start loads and attaches the BPF object, takes the baseline of existing
// connections and starts the sample/report loop and the ring buffer reader.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("tcp: started twice")
	}
	log := rt.Logger()
	p.missing = p.missing.OrNew(log)
	defer func() {
		if err != nil {
			p.closeLocked()
		}
	}()
	if err := p.missing.Report(bpfrt.HaveTPBTF("inet_sock_set_state"), "the tcp probe"); err != nil {
		return fmt.Errorf("tcp: %w: %w", probe.ErrNotSupported, err)
	}
	spec, err := loadTcp()
	if err != nil {
		return fmt.Errorf("tcp: load spec: %w", err)
	}
	// Listeners and MPTCP namespaces are few and come and go rarely: their
	// maps hold what exists rather than 1.8 MiB preallocated.
	if err := bpfrt.AllocOnInsert(spec, append([]string{"galago_listen_owners", "netns_seen"}, bpfrt.FilterMaps...)...); err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	hz, hzErr := kernelHZ()
	if hzErr != nil {
		log.Warn("tcp: CONFIG_HZ unknown: rto and ato are not reported", "err", hzErr)
	} else if err := spec.Variables["kernel_hz"].Set(hz); err != nil {
		return fmt.Errorf("tcp: set kernel_hz: %w", err)
	}
	p.hooks.hz = hzErr == nil
	// One wake-up per 1024 close records (under a quarter of the 1 MiB ring)
	// rather than per 64: under connection churn each wake-up (epoll
	// return, goroutine switch) cost more than the records it delivered.
	// The reader's 100 ms deadline bounds the wait at low rates.
	wake := bpfrt.Wakeup{Records: 1024, RecordSize: recordSize, FillPercent: 25}
	if err := bpfrt.ApplyWakeup(spec, "events", wake); err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	// Optional programs whose hook is missing are removed before load: one
	// program the verifier cannot load would fail the whole collection.
	// The others are all loaded (so Reconfigure needs no reload) and
	// attached by syncHooksLocked while a sub-item needs them.
	p.optMissing = map[string]error{}
	for _, h := range optionalHooks {
		herr := bpfrt.HaveTPBTF(h.tp)
		if herr == nil && h.tp == "kfree_skb" {
			herr = kfreeSkbHasSocket()
		}
		if herr != nil {
			p.optMissing[h.prog] = herr
			delete(spec.Programs, h.prog)
		}
	}
	p.rtoErr = tcpSockHasTotalRTO()
	p.oomErr = resetHasReason()
	p.cgroup2, p.delayErr = bpfrt.HaveCgroup2()
	if p.delayErr == nil {
		p.delayErr = haveTxTimestamping()
	}
	if p.delayErr != nil {
		// The kfunc would fail the whole collection's load.
		delete(spec.Programs, "on_sock_ops")
	}
	replace, release, err := p.owners.Acquire(spec)
	if err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	p.releaseOwners = release
	objs := &tcpObjects{}
	if err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: replace}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			log.Error("tcp: verifier", "log", fmt.Sprintf("%+v", ve))
		}
		return fmt.Errorf("tcp: load BPF object: %w", err)
	}
	p.objs = objs
	if p.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: objs.GalagoFilterCfg, TGIDs: objs.FilterTgids, Cgroups: objs.FilterCgroups,
		Pending: objs.FilterPending, Decided: objs.FilterDecided, Lost: objs.FilterPendingLost,
		ForkProgram: objs.GalagoFilterFork, ExecProgram: objs.GalagoFilterExec,
	}, rt.Lost); err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	if err := p.filter.Sync(cfg.Targets); err != nil {
		return fmt.Errorf("tcp: snooper filter: %w", err)
	}
	progs := map[string]*ebpf.Program{"on_set_state": objs.OnSetState, "dump_tcp": objs.DumpTcp, "dump_mptcp": objs.DumpMptcp}
	maps.Copy(progs, p.filter.Programs())
	l, err := link.AttachTracing(link.TracingOptions{Program: objs.OnSetState})
	if err != nil {
		return fmt.Errorf("tcp: attach tp_btf/inet_sock_set_state: %w", err)
	}
	p.links = append(p.links, l)
	if objs.OnSockOps != nil {
		progs["on_sock_ops"] = objs.OnSockOps // run time stays 0 while detached
	}
	p.optProgs, p.optLinks = map[string]*ebpf.Program{}, bpfrt.Links{}
	for _, h := range optionalHooks {
		if prog := objs.optProgram(h.prog); prog != nil {
			p.optProgs[h.prog] = prog
			progs[h.prog] = prog // run time stays 0 while detached
		}
	}
	if p.iterTCP, err = link.AttachIter(link.IterOptions{Program: objs.DumpTcp}); err != nil {
		return fmt.Errorf("tcp: attach iter/task_file: %w", err)
	}
	if p.iterMPTCP, err = link.AttachIter(link.IterOptions{Program: objs.DumpMptcp}); err != nil {
		return fmt.Errorf("tcp: attach iter/tcp: %w", err)
	}
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring: objs.Events, Lost: objs.LostEvents,
		Wakeup: wake,
		Handle: p.handle, OnLost: rt.Lost,
		OnError: func(err error) {
			probe.LogError(rt, "tcp: bad ring buffer record", err)
		},
	})
	if err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	p.stats.TryRegister(log, Name, progs)
	if cfg.Has(bitDelay) {
		log.Warn("tcp: proc_flow_perf sys_delay is not measured by galago (no hook for the moment data is read on this kernel): see the tcp package documentation")
	}
	p.cfg, p.rt = cfg, rt
	p.agg = newAggregator()
	sample, _ := p.periods()
	p.agg.setSamplePeriod(sample)
	p.applyCfgLocked()
	p.syncHooksLocked()
	// Baseline: who owns the existing sockets and where their counters
	// stand, so the first period only counts what happens in it.
	recs, err := p.iterate()
	if err != nil {
		return err
	}
	p.agg.snapshot(recs, p.hooks, true)
	p.reportDroppedLocked()
	p.periodFrom = p.now()
	rt.Go(p.reader.Run)
	rt.Go(p.filter.Run)
	rt.Go(p.loop)
	return nil
}

func (p *Probe) applyCfgLocked() {
	p.agg.reportCport = p.cfg.Params.ReportCport == 1
	p.syncBackendsLocked()
	p.agg.targets = p.cfg.Targets
}

// Reconfigure applies new parameters, sub-items and snoopers without
// reloading: the in-kernel filter is synced now, timers are re-armed.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil || p.objs == nil {
		return errors.New("tcp: not started")
	}
	p.cfg = cfg
	p.applyCfgLocked()
	p.syncHooksLocked()
	if err := p.filter.Sync(cfg.Targets); err != nil {
		return fmt.Errorf("tcp: snooper filter: %w", err)
	}
	probe.Kick(p.cfgChanged)
	return nil
}

// Stop detaches every program and releases the maps. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	return nil
}

func (p *Probe) closeLocked() {
	p.stats.Unregister(Name)
	if p.reader != nil {
		_ = p.reader.Close()
		p.reader = nil
	}
	if p.filter != nil {
		_ = p.filter.Close()
		p.filter = nil
	}
	for _, it := range []*link.Iter{p.iterTCP, p.iterMPTCP} {
		if it != nil {
			_ = it.Close()
		}
	}
	p.iterTCP, p.iterMPTCP = nil, nil
	_ = p.optLinks.Close()
	if p.delayLink != nil {
		_ = p.delayLink.Close()
		p.delayLink = nil
	}
	_ = bpfrt.CloseLinks(p.links)
	p.links = nil
	if p.objs != nil {
		_ = p.objs.Close()
		p.objs = nil
	}
	if p.releaseOwners != nil {
		p.releaseOwners()
		p.releaseOwners = nil
	}
	if p.backends != nil {
		_ = p.backends.Close()
		p.backends = nil
	}
}

// syncHooksLocked attaches the optional hooks the enabled sub-items need and
// detaches the others, so a configuration without them runs only the
// mandatory hooks. A hook missing on this kernel is reported (once per
// daemon) when a sub-item asks for it; its fields stay unset. Counters of a
// hook attached mid-period count from the attachment on.
func (p *Probe) syncHooksLocked() {
	for _, h := range optionalHooks {
		want := p.cfg.Has(h.subItem)
		l, attached := p.optLinks[h.prog]
		switch {
		case want && !attached:
			if err := p.optMissing[h.prog]; err != nil {
				_ = p.missing.Report(err, h.disables...)
				continue
			}
			l, err := link.AttachTracing(link.TracingOptions{Program: p.optProgs[h.prog]})
			if err != nil {
				// Not cached as missing: a later reconfiguration retries.
				_ = p.missing.Report(&bpfrt.HookError{Hook: "tp_btf/" + h.tp, Err: err}, h.disables...)
				continue
			}
			p.optLinks[h.prog] = l
		case !want && attached:
			_ = l.Close()
			delete(p.optLinks, h.prog)
		}
	}
	on := func(prog string) bool { return p.optLinks[prog] != nil }
	p.hooks.resets = on("on_send_reset") && on("on_receive_reset")
	p.hooks.dropReason = on("on_kfree_skb")
	p.hooks.bufLimit = on("on_exceed_buf_limit")
	abnormal := p.cfg.Has(bitAbnormal)
	if abnormal {
		_ = p.missing.Report(p.rtoErr, "tmout_count")
		_ = p.missing.Report(p.oomErr, "tcp_oom")
	}
	p.hooks.totalRTO = abnormal && p.rtoErr == nil
	p.hooks.oom = on("on_send_reset") && p.oomErr == nil
	p.syncDelayLocked()
}

// syncDelayLocked attaches the sock_ops program (net_delay) at the cgroup2
// root while tcp_delay is on, and detaches it otherwise: it runs for every
// timed write of every flagged connection, a cost only paid on demand.
// Connections flagged under an earlier attachment stay flagged (the flag
// lives in the socket); their stamps are told apart by delay_epoch.
func (p *Probe) syncDelayLocked() {
	want := p.cfg.Has(bitDelay)
	switch {
	case want && p.delayLink == nil:
		if p.delayErr != nil {
			_ = p.missing.Report(p.delayErr, "net_delay")
			break
		}
		p.delayEpoch++
		if err := p.objs.DelayEpoch.Set(p.delayEpoch); err != nil {
			_ = p.missing.Report(&bpfrt.HookError{Hook: "sockops", Err: fmt.Errorf("set delay_epoch: %w", err)}, "net_delay")
			break
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: p.cgroup2, Attach: ebpf.AttachCGroupSockOps, Program: p.objs.OnSockOps})
		if err != nil {
			// Not cached: a later reconfiguration retries.
			_ = p.missing.Report(&bpfrt.HookError{Hook: "sockops " + p.cgroup2, Err: err}, "net_delay")
			break
		}
		p.delayLink = l
	case !want && p.delayLink != nil:
		_ = p.delayLink.Close()
		p.delayLink = nil
	}
	p.hooks.netDelay = p.delayLink != nil
}

// kernelSpec is the running kernel's BTF (cached by cilium/ebpf).
func kernelSpec(hook string) (*btf.Spec, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, &bpfrt.HookError{Hook: hook, Err: err}
	}
	return spec, nil
}

// tcpSockHasTotalRTO checks for tcp_sock.total_rto (Linux 6.7+), the
// source of tmout_count.
func tcpSockHasTotalRTO() error {
	const hook = "tcp_sock.total_rto"
	spec, err := kernelSpec(hook)
	if err != nil {
		return err
	}
	var st *btf.Struct
	if err := spec.TypeByName("tcp_sock", &st); err != nil {
		return &bpfrt.HookError{Hook: hook, Err: err}
	}
	for _, m := range st.Members {
		if m.Name == "total_rto" {
			return nil
		}
	}
	return &bpfrt.HookError{Hook: hook, Err: errors.New("no such field (Linux 6.7+)")}
}

// resetHasReason checks that tcp_send_reset passes the reset reason and
// that SK_RST_REASON_TCP_ABORT_ON_MEMORY exists, the source of tcp_oom.
func resetHasReason() error {
	const hook = "tp_btf/tcp_send_reset reason"
	spec, err := kernelSpec(hook)
	if err != nil {
		return err
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_tcp_send_reset", &td); err != nil {
		return &bpfrt.HookError{Hook: hook, Err: err}
	}
	if ptr, ok := td.Type.(*btf.Pointer); ok {
		if fp, ok := ptr.Target.(*btf.FuncProto); ok && len(fp.Params) >= 4 {
			var e *btf.Enum
			if err := spec.TypeByName("sk_rst_reason", &e); err != nil {
				return &bpfrt.HookError{Hook: hook, Err: err}
			}
			for _, v := range e.Values {
				if v.Name == "SK_RST_REASON_TCP_ABORT_ON_MEMORY" {
					return nil
				}
			}
			return &bpfrt.HookError{Hook: hook, Err: errors.New("no SK_RST_REASON_TCP_ABORT_ON_MEMORY")}
		}
	}
	return &bpfrt.HookError{Hook: hook, Err: errors.New("no reset reason argument (Linux 6.10+)")}
}

// haveTxTimestamping checks for BPF TX timestamping of sock_ops programs
// (the kfunc bpf_sock_ops_enable_tx_tstamp, Linux 6.15+), the source of
// net_delay.
func haveTxTimestamping() error {
	const hook = "sockops TX timestamping"
	spec, err := kernelSpec(hook)
	if err != nil {
		return err
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_sock_ops_enable_tx_tstamp", &fn); err != nil {
		return &bpfrt.HookError{Hook: hook, Err: fmt.Errorf("kfunc bpf_sock_ops_enable_tx_tstamp: %w (Linux 6.15+)", err)}
	}
	return nil
}

// kfreeSkbHasSocket checks that kfree_skb passes the drop reason and the
// receiving socket (Linux 6.12+), which on_kfree_skb reads.
func kfreeSkbHasSocket() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return &bpfrt.HookError{Hook: "tp_btf/kfree_skb", Err: err}
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_kfree_skb", &td); err != nil {
		return &bpfrt.HookError{Hook: "tp_btf/kfree_skb", Err: err}
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if ok {
		if fp, ok := ptr.Target.(*btf.FuncProto); ok && len(fp.Params) >= 5 {
			return nil
		}
	}
	return &bpfrt.HookError{Hook: "tp_btf/kfree_skb", Err: errors.New("no drop reason and socket arguments (Linux 6.12+)")}
}

// iterate runs one pass over every task's open files (owner bookkeeping
// and the records of the TCP sockets they hold, every network namespace at
// once), then iter/tcp for MPTCP subflows in the namespaces where the pass
// met a connected MPTCP socket, and decodes the output, one record per
// connection. It needs no lock: the iterators are only closed by Stop,
// after the loop has returned.
func (p *Probe) iterate() ([]conn, error) {
	b, err := bpfrt.ReadIter(p.iterTCP)
	if err != nil {
		return nil, fmt.Errorf("tcp: task_file iterator: %w", err)
	}
	out, err := decodeAll(b)
	if err != nil {
		return nil, err
	}
	nss, err := takeNetns(p.objs.NetnsSeen)
	if err != nil {
		return nil, fmt.Errorf("tcp: read netns_seen: %w", err)
	}
	if len(nss) == 0 {
		return firstPerConn(out), nil
	}
	own, err := netnsOwn()
	if err != nil {
		return nil, fmt.Errorf("tcp: own network namespace: %w", err)
	}
	for ns, tgid := range nss {
		var b []byte
		if ns == own {
			b, err = bpfrt.ReadIter(p.iterMPTCP)
		} else {
			var rc io.ReadCloser
			if rc, err = openIterIn(p.iterMPTCP, tgid); err != nil {
				// The process (or its namespace) went away since the walk.
				continue
			}
			b, err = io.ReadAll(rc)
			rc.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("tcp: tcp iterator in netns %d: %w", ns, err)
		}
		recs, err := decodeAll(b)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return firstPerConn(out), nil
}

// firstPerConn drops repeated snapshot records of one connection: the walk
// writes a socket once per descriptor that holds it (dup, fork, a
// descriptor passed to another process), with the same content.
func firstPerConn(recs []conn) []conn {
	seen := make(map[connID]struct{}, len(recs))
	out := recs[:0]
	for _, c := range recs {
		if c.raw.Type == recSnapshot {
			id := connID{c.raw.Cookie, c.raw.Gen}
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
		}
		out = append(out, c)
	}
	return out
}

// handle takes one ring buffer record (reader goroutine).
func (p *Probe) handle(raw []byte) error {
	if recType(raw) == recDelay {
		d, err := decodeDelay(raw)
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.agg != nil {
			p.agg.delay(&d)
			p.reportDroppedLocked()
		}
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.rec, err = decode(raw); err != nil {
		return err
	}
	c := &p.rec
	if p.agg == nil {
		return nil
	}
	defer p.reportDroppedLocked()
	switch c.raw.Type {
	case recClose:
		p.agg.closed(c, p.hooks)
	case recLate:
		if !p.agg.late(c) && !p.warnedLate {
			// The connection closed before the probe ever saw it (its
			// close record was lost): nothing to charge the event to.
			p.warnedLate = true
			p.rt.Logger().Debug("tcp: event for an unknown closed connection dropped")
		}
	default:
		return fmt.Errorf("tcp: unexpected record type %d in ring buffer", c.raw.Type)
	}
	return nil
}

func (p *Probe) periods() (sample, report time.Duration) {
	params := p.cfg.Params
	sample, report = p.sampleEvery, p.reportEvery
	if report <= 0 {
		report = params.Period()
		if report <= 0 {
			report = probe.DefaultParams().Period()
		}
	}
	if sample <= 0 {
		sample = time.Duration(params.SamplePeriod) * time.Millisecond
		if sample <= 0 {
			sample = time.Duration(probe.DefaultParams().SamplePeriod) * time.Millisecond
		}
	}
	return min(sample, report), report
}

func (p *Probe) loop(ctx context.Context) error {
	p.mu.Lock()
	sampleEvery, reportEvery := p.periods()
	p.mu.Unlock()
	sampleT := time.NewTicker(sampleEvery)
	defer sampleT.Stop()
	reportT := time.NewTicker(reportEvery)
	defer reportT.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sampleT.C:
			if err := p.sample(); err != nil {
				return err
			}
		case <-reportT.C:
			if err := p.sample(); err != nil {
				return err
			}
			p.report()
		case <-p.cfgChanged:
			p.mu.Lock()
			s, r := p.periods()
			p.mu.Unlock()
			if s != sampleEvery || r != reportEvery {
				p.mu.Lock()
				p.agg.setSamplePeriod(s)
				p.mu.Unlock()
				sampleEvery, reportEvery = s, r
				sampleT.Reset(s)
				reportT.Reset(r)
			}
		}
	}
}

// sample runs one iterator pass into the current period.
func (p *Probe) sample() error {
	recs, err := p.iterate()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.agg.snapshot(recs, p.hooks, false)
	p.reportDroppedLocked()
	return nil
}

// reportDroppedLocked reports the records the aggregator's memory bounds
// kept out (maxTracked, maxRows) as lost events: the probe's lost-events
// self-metric, like records lost to a full ring buffer.
func (p *Probe) reportDroppedLocked() {
	if n := p.agg.takeDropped(); n > 0 {
		p.rt.Lost(n)
	}
}

// report publishes the period's rows and, with report_event=1, its events.
func (p *Probe) report() {
	p.mu.Lock()
	now := p.now()
	period := now.Sub(p.periodFrom)
	p.periodFrom = now
	rows := p.agg.flush()
	flows := p.agg.flushFlows()
	p.reportDroppedLocked()
	cfg, h, rt := p.cfg, p.hooks, p.rt
	p.mu.Unlock()
	if cfg.Has(bitDelay) && h.netDelay {
		for k, hist := range flows {
			rt.Record(flowRecord(k, hist, now, period))
		}
	}
	for k, l := range rows {
		rt.Record(record(k, l, cfg, h, now, period))
		if cfg.Params.ReportEvent == 1 {
			for _, e := range events(k, l, cfg, h, now) {
				rt.Event(e)
			}
		}
	}
}
