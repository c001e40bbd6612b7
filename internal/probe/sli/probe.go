package sli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "sli"

var (
	bitCPU  = probe.MustSubItemBit(Name, "cpu")
	bitMem  = probe.MustSubItemBit(Name, "mem")
	bitIO   = probe.MustSubItemBit(Name, "io")
	bitNode = probe.MustSubItemBit(Name, "node")
	bitCon  = probe.MustSubItemBit(Name, "container")
	bitHist = probe.MustSubItemBit(Name, "histogram")
)

// hook is one tp_btf program, the sub-item that attaches it and the
// fields its absence leaves out.
type hook struct {
	prog, target string
	sub          uint32
	fields       string
}

var hooks = []hook{
	{"sli_sched_switch", "sched_switch", bitCPU, "cpu_rundelay, cpu_sleep, cpu_iowait, cpu_block"},
	{"sli_sched_wakeup", "sched_wakeup", bitCPU, "cpu_rundelay, cpu_sleep, cpu_iowait, cpu_block"},
	{"sli_sched_wakeup_new", "sched_wakeup_new", bitCPU, "cpu_rundelay of new tasks"},
	{"sli_exit", "sched_process_exit", bitCPU, "cpu_rundelay, cpu_sleep, cpu_iowait, cpu_block of threads that exit within a period"},
	{"sli_direct_reclaim_begin", "mm_vmscan_direct_reclaim_begin", bitMem, "mem_reclaim (global direct reclaim)"},
	{"sli_direct_reclaim_end", "mm_vmscan_direct_reclaim_end", bitMem, "mem_reclaim (global direct reclaim)"},
	{"sli_memcg_reclaim_begin", "mm_vmscan_memcg_reclaim_begin", bitMem, "mem_reclaim (memory cgroup limit)"},
	{"sli_memcg_reclaim_end", "mm_vmscan_memcg_reclaim_end", bitMem, "mem_reclaim (memory cgroup limit)"},
	{"sli_compaction_begin", "mm_compaction_begin", bitMem, "mem_compact"},
	{"sli_compaction_end", "mm_compaction_end", bitMem, "mem_compact"},
	{"sli_bio_queue", "block_bio_queue", bitIO, "bio_latency"},
	{"sli_bio_complete", "block_bio_complete", bitIO, "bio_latency of bio-based devices"},
	{"sli_rq_complete", "block_rq_complete", bitIO, "bio_latency of disks"},
}

// wakeupHook: the programs sched_switch replaces when the kernel keeps
// each task's queueing time (haveQueuedClock).
var wakeupHook = map[string]bool{"sli_sched_wakeup": true, "sli_sched_wakeup_new": true}

// haveQueuedClock reports whether the kernel's struct sched_info has
// last_queued and run_delay (CONFIG_SCHED_INFO: the queueing time and run
// delay behind /proc/<pid>/schedstat, kept with or without schedstats),
// from which sched_switch alone times sleeps and run delays. Without
// them the wakeup tracepoints time them.
func haveQueuedClock() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var st *btf.Struct
	if err := spec.TypeByName("sched_info", &st); err != nil {
		return false
	}
	n := 0
	for _, m := range st.Members {
		if m.Name == "last_queued" || m.Name == "run_delay" {
			n++
		}
	}
	return n == 2
}

// omission is a field of the reference this kernel or this version gives
// no honest source for: logged once when its sub-item is first enabled.
type omission struct {
	sub    uint32
	err    *bpfrt.HookError
	fields string
}

var omitted = []omission{
	{bitCPU, &bpfrt.HookError{Hook: "tracepoint/sched_stat_wait",
		Err: errors.New("needs CONFIG_SCHEDSTATS; the run-queue time it gives is what cpu_rundelay measures")}, "sli cpu_wait"},
	{bitCPU, &bpfrt.HookError{Hook: "sched_switch context-switch and utime inference",
		Err: errors.New("not built")}, "sli cpu_longsys, sli_cpu_container_stat"},
	{bitMem, &bpfrt.HookError{Hook: "kprobe/do_swap_page",
		Err: errors.New("no tracepoint brackets a swap-in and kprobes are not used")}, "sli mem_swapin"},
}

// Probe is the sli feature. See the package documentation.
type Probe struct {
	ids      identity.Resolver
	fs       procfs.FS
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	objs     sliObjects
	loaded   bool
	links    map[string]link.Link
	take     *link.Iter   // sli_take: the threads' scheduler latencies of a period
	walk     bytes.Buffer // its output, kept between periods
	absent   map[string]bool
	queued   bool // sched_switch alone (queued_clock): the wakeup hooks are not attached
	noQueued bool // tests: the wakeup hooks, as on a kernel without sched_info
	filter   *bpfrt.FilterSync
	lost     bpfrt.LostCounter
	prevStat *procfs.Stat
	host     string
	kick     chan struct{}
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

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// withWakeupHooks times sleeps and run delays with the wakeup hooks, as
// on a kernel without sched_info's queueing time (tests).
func withWakeupHooks() Option { return func(p *Probe) { p.noQueued = true } }

// withInterval replaces report_period (tests).
func withInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// New returns a stopped sli probe; fsys roots /proc (GOPHER_HOST_PATH), ids
// names the containers of the observed processes.
func New(fsys procfs.FS, ids identity.Resolver, opts ...Option) *Probe {
	p := &Probe{fs: fsys, ids: ids, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	return []*table.Table{
		table.SliCpuNodeStat,
		table.SliCpuNodeGauge, table.SliCpuNodeHistogram, table.SliCpuContainerGauge, table.SliCpuContainerHistogram,
		table.SliMemNodeGauge, table.SliMemNodeHistogram, table.SliMemContainerGauge, table.SliMemContainerHistogram,
		table.SliIoNodeGauge, table.SliIoNodeHistogram, table.SliIoContainerGauge, table.SliIoContainerHistogram,
	}
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.interval, cfg.Params)
}

// checkSubItems refuses a configuration that selects no data (no cpu, mem
// or io) or no view of it (neither node nor container).
func checkSubItems(sub uint32) error {
	f := probe.LookupBuiltin(Name)
	if sub&(bitCPU|bitMem|bitIO) == 0 {
		return fmt.Errorf("sli: no data sub-item enabled (cpu, mem, io) in %v", f.SubItemNames(sub))
	}
	if sub&(bitNode|bitCon) == 0 {
		return fmt.Errorf("sli: neither node nor container enabled in %v", f.SubItemNames(sub))
	}
	return nil
}

// Start loads the BPF object, attaches the hooks of the enabled sub-items
// and starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("sli: started twice")
	}
	if err := checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	p.log = rt.Logger()
	if p.missing == nil {
		p.missing = bpfrt.NewMissingHooks(p.log)
	}
	p.host, _ = os.Hostname()
	if err := p.load(rt.Lost); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	if err := p.apply(cfg); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.cfg, p.rt = cfg, rt
	p.kick = make(chan struct{}, 1)
	if p.stats != nil {
		progs := p.filter.Programs()
		for _, h := range hooks {
			if prog := p.objs.program(h.prog); prog != nil {
				progs[h.prog] = prog
			}
		}
		p.stats.TryRegister(p.log, Name, progs)
	}
	rt.Go(p.filter.Run)
	rt.Go(p.run)
	return nil
}

// program returns the named program of the object.
func (o *sliObjects) program(name string) *ebpf.Program {
	return map[string]*ebpf.Program{
		"sli_sched_switch": o.SliSchedSwitch, "sli_sched_wakeup": o.SliSchedWakeup, "sli_sched_wakeup_new": o.SliSchedWakeupNew, "sli_exit": o.SliExit,
		"sli_direct_reclaim_begin": o.SliDirectReclaimBegin, "sli_direct_reclaim_end": o.SliDirectReclaimEnd,
		"sli_memcg_reclaim_begin": o.SliMemcgReclaimBegin, "sli_memcg_reclaim_end": o.SliMemcgReclaimEnd,
		"sli_compaction_begin": o.SliCompactionBegin, "sli_compaction_end": o.SliCompactionEnd,
		"sli_bio_queue": o.SliBioQueue, "sli_bio_complete": o.SliBioComplete, "sli_rq_complete": o.SliRqComplete,
	}[name]
}

func (p *Probe) load(onLost func(uint64)) error {
	spec, err := loadSli()
	if err != nil {
		return fmt.Errorf("sli: %w", err)
	}
	if err := bpfrt.AllocOnInsert(spec, bpfrt.FilterMaps...); err != nil {
		return fmt.Errorf("sli: %w", err)
	}
	p.absent = map[string]bool{}
	if p.queued = !p.noQueued && haveQueuedClock(); p.queued {
		if err := spec.Variables["queued_clock"].Set(uint32(1)); err != nil {
			return fmt.Errorf("sli: set queued_clock: %w", err)
		}
	}
	for _, h := range hooks {
		if err := bpfrt.HaveTPBTF(h.target); err != nil {
			_ = p.missing.Report(err, h.fields)
			p.absent[h.prog] = true
			delete(spec.Programs, h.prog)
		}
	}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return fmt.Errorf("sli: load BPF object: %w", err)
	}
	p.loaded = true
	p.links = map[string]link.Link{}
	if p.take, err = link.AttachIter(link.IterOptions{Program: p.objs.SliTake}); err != nil {
		return fmt.Errorf("sli: attach iter/task: %w", err)
	}
	p.lost = bpfrt.LostCounter{Map: p.objs.SliLost, Bios: p.objs.BioStarts, OnLost: onLost}
	o := &p.objs
	if p.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: o.GalagoFilterCfg, TGIDs: o.FilterTgids, Cgroups: o.FilterCgroups,
		Pending: o.FilterPending, Decided: o.FilterDecided, Lost: o.FilterPendingLost,
		ForkProgram: o.GalagoFilterFork, ExecProgram: o.GalagoFilterExec,
	}, onLost); err != nil {
		return fmt.Errorf("sli: %w", err)
	}
	return nil
}

// apply makes the kernel side follow cfg: the snooper filter and the
// node/container switches first, then the links.
func (p *Probe) apply(cfg probe.Config) error {
	if err := p.filter.Sync(cfg.Targets); err != nil {
		return fmt.Errorf("sli: %w", err)
	}
	for _, v := range []struct {
		v  *ebpf.Variable
		on bool
	}{{p.objs.NodeOn, cfg.Has(bitNode)}, {p.objs.ConOn, cfg.Has(bitCon)}} {
		x := uint32(0)
		if v.on {
			x = 1
		}
		if err := v.v.Set(x); err != nil {
			return fmt.Errorf("sli: set run-time switch: %w", err)
		}
	}
	for _, o := range omitted {
		if cfg.Has(o.sub) {
			_ = p.missing.Report(o.err, o.fields) // once per hook
		}
	}
	for _, h := range hooks {
		want := cfg.Has(h.sub) && !p.absent[h.prog] && (!p.queued || !wakeupHook[h.prog])
		l, have := p.links[h.prog]
		switch {
		case want && !have:
			l, err := link.AttachTracing(link.TracingOptions{Program: p.objs.program(h.prog), AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				return fmt.Errorf("sli: attach %s: %w", h.prog, err)
			}
			p.links[h.prog] = l
		case !want && have:
			if err := l.Close(); err != nil {
				return fmt.Errorf("sli: detach %s: %w", h.prog, err)
			}
			delete(p.links, h.prog)
		}
	}
	return nil
}

// Reconfigure applies new sub-items, snoopers and report period without
// reloading.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("sli: not started")
	}
	if err := checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	if err := p.apply(cfg); err != nil {
		return err
	}
	p.cfg = cfg
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// Stop detaches every hook and unloads the object. Idempotent.
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
	if p.take != nil {
		errs = append(errs, p.take.Close())
		p.take = nil
	}
	if p.filter != nil {
		errs = append(errs, p.filter.Close())
		p.filter = nil
	}
	if p.loaded {
		errs = append(errs, p.objs.Close())
		p.loaded = false
	}
	return errors.Join(errs...)
}

// run ends a report period on every tick.
func (p *Probe) run(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, func() time.Duration { return p.period(p.cfg) }, func() {
		if err := p.report(p.now()); err != nil {
			p.rt.Error()
			p.log.Warn("sli: report failed", "err", err)
		}
	})
	return nil
}

// report ends one period: the node rows and the rows of the observed
// containers, taken from the kernel, for the enabled sub-items.
func (p *Probe) report(now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded || p.rt == nil {
		return nil
	}
	cfg, period := p.cfg, p.period(p.cfg)
	var errs []error
	// The programs add each latency to one place: a scheduler latency to
	// its thread (taken by the walk, takeThreads), any other to one row,
	// its cgroup's when the cgroup has one (observed, container sub-item
	// on), else the node's (row_for in sli.bpf.c). The node's figures are
	// therefore its own row plus every cgroup row and every thread's
	// record, so a container's sum is always within the node's.
	rows := map[uint64]sliSliRow{}
	errs = append(errs, bpfrt.TakeAll(p.objs.ConStats, func(cgid uint64, v []sliSliRow) { rows[cgid] = sumRows(v) }))
	var node []sliSliRow
	var alone sliSliRow // threads in no kept cgroup
	slot, err := p.endPeriod()
	if err == nil {
		// the walk even when the node row cannot be read: the halves of
		// the period that ended are not walked again
		var nerr error
		node, nerr = p.takeNode(slot)
		errs = append(errs, nerr, p.takeThreads(rows, &alone))
	}
	errs = append(errs, err, p.lost.Poll())
	if cfg.Has(bitNode) {
		whole := addRows(sumRows(node), alone)
		for _, row := range rows {
			whole = addRows(whole, row)
		}
		for _, r := range records(cfg, "", p.host, whole, now, period) {
			p.rt.Record(r)
		}
		if cfg.Has(bitCPU) {
			errs = append(errs, p.nodeStat(now, period))
		}
	} else {
		p.prevStat = nil
	}
	if cfg.Has(bitCon) && len(rows) > 0 {
		byCon := map[string]sliSliRow{}
		cgids := make([]uint64, 0, len(rows))
		for id := range rows {
			cgids = append(cgids, id)
		}
		names := p.containersOf(cfg.Targets, cgids)
		for cgid, row := range rows {
			if id, ok := names[cgid]; ok {
				byCon[id] = addRows(byCon[id], row)
			}
		}
		ids := make([]string, 0, len(byCon))
		for id := range byCon {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			for _, r := range records(cfg, id, "", byCon[id], now, period) {
				p.rt.Record(r)
			}
		}
	}
	return errors.Join(errs...)
}

// nodeGrace is how long a program that read node_slot or period before
// they changed may still add to what they named: a program's run,
// preempted at worst.
const nodeGrace = time.Millisecond

// endPeriod switches the programs to the other node row (node_slot) and
// the threads to the next period, and waits until nothing writes what the
// period that ended left: the node row slot (returned) and the threads'
// halves of the period before the current one.
func (p *Probe) endPeriod() (slot uint32, err error) {
	if err := p.objs.NodeSlot.Get(&slot); err != nil {
		return 0, fmt.Errorf("sli: read node_slot: %w", err)
	}
	slot &= 1 // as the programs read it
	if err := p.objs.NodeSlot.Set(slot ^ 1); err != nil {
		return 0, fmt.Errorf("sli: flip node_slot: %w", err)
	}
	var cur uint64
	if err := p.objs.Period.Get(&cur); err != nil {
		return 0, fmt.Errorf("sli: read period: %w", err)
	}
	if err := p.objs.Period.Set(cur + 1); err != nil {
		return 0, fmt.Errorf("sli: advance period: %w", err)
	}
	time.Sleep(nodeGrace)
	return slot, nil
}

// takeThreads walks every thread (sli_take) for its scheduler latencies
// of the period endPeriod ended and adds them to rows[cgroup], or to
// alone for threads that count in the node only. Threads that exited
// meanwhile added theirs to the maps' rows (sli_exit).
func (p *Probe) takeThreads(rows map[uint64]sliSliRow, alone *sliSliRow) error {
	if err := bpfrt.ReadIterTo(p.take, &p.walk); err != nil {
		return fmt.Errorf("sli: iter/task: %w", err)
	}
	return addTaskRecs(p.walk.Bytes(), rows, alone)
}

// takeNode returns the node row slot's per-CPU values and zeroes them;
// endPeriod switched the programs to the other row first, so nothing
// writes the row while it is read and zeroed.
func (p *Probe) takeNode(old uint32) ([]sliSliRow, error) {
	var per []sliSliRow
	if err := p.objs.NodeStats.Lookup(old, &per); err != nil {
		return nil, fmt.Errorf("sli: read node_stats: %w", err)
	}
	if err := p.objs.NodeStats.Put(old, make([]sliSliRow, len(per))); err != nil {
		return nil, fmt.Errorf("sli: zero node_stats: %w", err)
	}
	return per, nil
}

// nodeStat publishes sli_cpu_node_stat: the node's busy share of CPU time
// over the period (/proc/stat, as baseinfo's system_cpu) and its CPUs.
func (p *Probe) nodeStat(now time.Time, period time.Duration) error {
	st, err := p.fs.Stat()
	if err != nil {
		return fmt.Errorf("sli: %w", err)
	}
	prev := p.prevStat
	p.prevStat = &st
	if prev == nil || st.Total.Total() <= prev.Total.Total() {
		return nil
	}
	r := table.SliCpuNodeStat.NewRecord(now, period)
	r.SetStr(table.SliCpuNodeStat.MustIndex("sli_node_key"), p.host)
	busy := float64(st.Total.Busy()-prev.Total.Busy()) / float64(st.Total.Total()-prev.Total.Total()) * 100
	r.SetNum(table.SliCpuNodeStat.MustIndex("cpu_busy"), busy)
	r.SetNum(table.SliCpuNodeStat.MustIndex("cpu_cores"), float64(len(st.CPUs)))
	p.rt.Record(r)
	return nil
}

// cgroupNamer is the identity resolver's lookup of a cgroup's container.
type cgroupNamer interface {
	ContainerOfCgroup(id uint64) (containerID, podID string)
}

// containersOf maps cgroup2 ids to their containers' short ids: through
// the identity resolver's cgroup lookup when it has one, else through the
// observed processes (a cgroup none of them is in is not named).
func (p *Probe) containersOf(t snoop.Targets, cgids []uint64) map[uint64]string {
	out := map[uint64]string{}
	if n, ok := p.ids.(cgroupNamer); ok {
		for _, id := range cgids {
			if cid, _ := n.ContainerOfCgroup(id); cid != "" {
				out[id] = identity.ShortID(cid)
			}
		}
		return out
	}
	if t == nil || p.ids == nil {
		return out
	}
	pids := t.PIDs()
	if t.Mode() == snoop.Blacklist {
		all, err := p.fs.PIDs()
		if err != nil {
			return out
		}
		pids = all[:0]
		for _, pid := range all {
			if t.Observed(pid) {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		proc, ok := p.ids.Process(pid)
		if ok && proc.ContainerID != "" && proc.CgroupID != 0 {
			out[proc.CgroupID] = identity.ShortID(proc.ContainerID)
		}
	}
	return out
}
