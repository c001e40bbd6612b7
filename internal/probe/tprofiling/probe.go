package tprofiling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
)

// Name is the feature name.
const Name = "tprofiling"

// DefaultOutputDir is gala-gopher's trace directory when output_dir is
// empty.
const DefaultOutputDir = "/var/log/gala-gopher/tprofiling"

// Bounds.
const (
	// tick is how often events are aggregated out and written.
	tick = time.Second
	// maxPending bounds the open aggregates (one per thread and name).
	maxPending = 65536
	// maxPerTick bounds the events that leave the aggregator per tick.
	maxPerTick = 50000
	// maxPerPeriod bounds the events a kafka-channel report period holds.
	maxPerPeriod = 200000
	// maxCache bounds the process and file name caches (cleared when full).
	maxCache = 4096
	// maxBlocks bounds the live blocks mem_glibc tracks (for the size a
	// free returns); what it refuses is counted lost.
	maxBlocks = 1 << 20
	// pruneEvery is how often the kernel's stack map is pruned: a stack
	// no event has named for that long, and that no open aggregate nor
	// thread holds, is deleted, so a long run keeps room for new stacks.
	pruneEvery = 10 * time.Second
)

// subItemTypes are the built sub-items and the event types they enable.
var subItemTypes = []struct {
	item string
	typ  syscap.TprofType
}{
	{"oncpu", syscap.TprofOncpu}, {"offcpu", syscap.TprofOffcpu}, {"syscall_file", syscap.TprofFile},
	{"syscall_net", syscap.TprofNet}, {"syscall_sched", syscap.TprofSched}, {"syscall_lock", syscap.TprofLock},
	{"pthread_sync", syscap.TprofPthread}, {"python_gc", syscap.TprofPyGC}, {"oncpu_sample", syscap.TprofSample},
	{"mem_glibc", syscap.TprofMemGlibc},
}

// typeItem is the sub-item of each event type.
var typeItem = func() map[syscap.TprofType]string {
	m := map[syscap.TprofType]string{}
	for _, s := range subItemTypes {
		m[s.typ] = s.item
	}
	return m
}()

// bitMemUsage is mem_usage, sampled from /proc in user space (no kernel
// event type).
var bitMemUsage = probe.MustSubItemBit(Name, "mem_usage")

// built are the sub-items this probe implements.
var built = func() uint32 {
	b := bitMemUsage
	for _, s := range subItemTypes {
		b |= probe.MustSubItemBit(Name, s.item)
	}
	return b
}()

// Probe is the tprofiling feature. See the package documentation.
type Probe struct {
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	hub      *Hub
	ids      identity.Resolver
	procRoot string
	period   time.Duration // replaces report_period when set (tests)
	tick     time.Duration
	pruneAge time.Duration // pruneEvery, shorter in tests
	memEvery time.Duration // memUsageEvery, shorter in tests
	sampleHz int           // oncpu_sample's frequency: 0 is syscap.TprofSampleHz (tests set it)
	now      func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	tp       *syscap.Tprof
	stopOnce probe.StopOnce

	amu sync.Mutex // the aggregator: the reader adds, the run loop takes
	agg *aggregator
	// stackSeen is when (CLOCK_MONOTONIC ns) an event last named each
	// stack id (under amu).
	stackSeen map[int32]uint64
	// blocks are mem_glibc's live blocks and their sizes, at most
	// blockCap (reader only).
	blocks   map[block]int64
	blockCap int

	// run loop only
	file       traceFile
	periodEvs  []Event
	sift       eventSift
	lastReport time.Time
	lastPrune  uint64 // CLOCK_MONOTONIC ns
	mem        memUsage
	paths      map[[3]uint64]string
	stacks     *stackNames

	// stackLost counts the events sent without their stack (in the lost
	// metric too): the kernel's failures and the ids user space could not
	// read.
	stackLost atomic.Uint64

	cmu   sync.Mutex // procs: the run loop and the hub's requests read it
	procs map[uint32]proc
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the probe's programs with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// WithHostPath reads processes through <host>/proc (GOPHER_HOST_PATH).
func WithHostPath(host string) Option {
	return func(p *Probe) { p.procRoot = filepath.Join("/", host, "proc") }
}

// WithHub makes the probe publish its events to h (the daemon's timeline).
func WithHub(h *Hub) Option { return func(p *Probe) { p.hub = h } }

// WithIdentity names processes' containers (container.id, container.name)
// and Java processes' main class (proc.name).
func WithIdentity(ids identity.Resolver) Option { return func(p *Probe) { p.ids = ids } }

// withPeriods replaces the tick, report_period and the stack map's
// pruning period (tests).
func withPeriods(tick, report, prune time.Duration) Option {
	return func(p *Probe) { p.tick, p.period, p.pruneAge = tick, report, prune }
}

// New returns a stopped tprofiling probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, procRoot: "/proc", tick: tick, pruneAge: pruneEvery, memEvery: memUsageEvery}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Start loads the tprofiling section of the syscall capture, attaches the
// hooks of the sub-items and starts the aggregation and output loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("tprofiling: started twice")
	}
	p.log = rt.Logger()
	p.missing = p.missing.OrNew(p.log)
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	p.agg = newAggregator(window(cfg), maxPending, maxPerTick)
	p.stackSeen = map[int32]uint64{}
	p.blocks, p.blockCap = map[block]int64{}, maxBlocks
	tp, err := syscap.OpenTprof(syscap.TprofOptions{
		Targets: cfg.Targets, Handle: p.onEvent, OnLost: rt.Lost,
		OnStackLost: func(n uint64) {
			p.stackLost.Add(n)
			rt.Lost(n)
		},
		OnError: func(err error) {
			probe.LogError(rt, "tprofiling: bad record", err)
		},
		HostRoot: filepath.Dir(p.procRoot), Log: p.log, SampleHz: p.sampleHz,
	})
	if err != nil {
		if errors.Is(err, bpfrt.ErrHookUnavailable) {
			_ = p.missing.Report(err, "tprofiling")
			return fmt.Errorf("tprofiling: %w: %w", probe.ErrNotSupported, err)
		}
		return fmt.Errorf("tprofiling: %w", err)
	}
	p.tp = tp
	if err := p.applyLocked(cfg); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.rt, p.cfg = rt, cfg
	p.file = traceFile{dir: outputDir(cfg), now: p.now}
	p.lastReport = p.now()
	p.paths = map[[3]uint64]string{}
	p.stacks = newStackNames(p.procRoot, tp.Stack)
	p.mem = memUsage{procRoot: p.procRoot, every: p.memEvery, page: int64(os.Getpagesize())}
	p.cmu.Lock()
	p.procs = map[uint32]proc{}
	p.cmu.Unlock()
	p.hub.setActive(true, p.procName)
	p.stats.TryRegister(p.log, Name, tp.Programs())
	rt.Go(tp.RunFilter)
	// The last output waits for the reader's final drain: the events
	// still in the ring when the probe stops are written too.
	readerDone := make(chan struct{})
	rt.Go(func(ctx context.Context) error {
		defer close(readerDone)
		return tp.RunReader(ctx)
	})
	rt.Go(func(ctx context.Context) error { return p.run(ctx, readerDone) })
	return nil
}

// checkSubItems refuses a request for unbuilt sub-items only, and logs the
// unbuilt ones of a mixed request.
func (p *Probe) checkSubItems(sub uint32) error {
	return probe.CheckBuiltSubItems(Name, sub, built, p.log)
}

// window is min_aggr_dur in ns.
func window(cfg probe.Config) uint64 {
	ms := cfg.Params.MinAggrDur
	if ms <= 0 {
		ms = probe.DefaultParams().MinAggrDur
	}
	return uint64(ms) * uint64(time.Millisecond)
}

func outputDir(cfg probe.Config) string {
	if cfg.Params.OutputDir != "" {
		return cfg.Params.OutputDir
	}
	return DefaultOutputDir
}

func kafka(cfg probe.Config) bool { return cfg.Params.ProfilingChannel == "kafka" }

// applyLocked sets the snoopers, the event types and the minimum duration.
func (p *Probe) applyLocked(cfg probe.Config) error {
	if err := p.tp.SetTargets(cfg.Targets); err != nil {
		return fmt.Errorf("tprofiling: %w", err)
	}
	var types []syscap.TprofType
	for _, s := range subItemTypes {
		if cfg.Has(probe.MustSubItemBit(Name, s.item)) {
			types = append(types, s.typ)
		}
	}
	return p.tp.SetTypes(uint64(cfg.Params.MinExecDur)*uint64(time.Microsecond), types...)
}

// onEvent takes one kernel event (on the reader's goroutine).
func (p *Probe) onEvent(k syscap.TprofEvent) {
	e := fromKernel(k)
	if k.Type == syscap.TprofMemGlibc {
		p.memBytes(&e, k)
	}
	p.amu.Lock()
	p.agg.add(e)
	if e.StackID >= 0 {
		p.stackSeen[e.StackID] = e.End()
	}
	p.amu.Unlock()
}

// block is a live heap block of a process.
type block struct {
	tgid uint32
	addr uint64
}

// memBytes sets a mem_glibc event's mem.size: the bytes allocated, minus
// those of the block freed (realloc's old one, free's), whose size is
// the one its allocation asked for while observed (0 when it was
// allocated before; a full table counts the block lost). Reader only.
func (p *Probe) memBytes(e *Event, k syscap.TprofEvent) {
	freed := k.Ino
	if k.Call == syscap.MemFree {
		freed = uint64(k.Ret)
	} else if k.Ret != 0 {
		if len(p.blocks) < p.blockCap {
			p.blocks[block{k.TGID, uint64(k.Ret)}] = int64(k.Arg)
		} else {
			p.rt.Lost(1)
		}
		e.Bytes = int64(k.Arg)
	}
	if freed != 0 {
		b := block{k.TGID, freed}
		e.Bytes -= p.blocks[b]
		delete(p.blocks, b)
	}
}

// Reconfigure applies new sub-items, snoopers and parameters without a
// reload. A change of channel or output_dir starts a new trace file.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("tprofiling: not running")
	}
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	if err := p.applyLocked(cfg); err != nil {
		return err
	}
	p.amu.Lock()
	p.agg.window = window(cfg)
	p.amu.Unlock()
	p.cfg = cfg
	return nil
}

func (p *Probe) config() probe.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

func (p *Probe) reportPeriod(cfg probe.Config) time.Duration {
	if p.period > 0 {
		return p.period
	}
	return cfg.Params.Period()
}

// run aggregates and writes every tick until ctx is done, then, once the
// reader has drained the ring (readerDone), writes what is left with the
// calls still in progress.
func (p *Probe) run(ctx context.Context, readerDone <-chan struct{}) error {
	t := time.NewTicker(p.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-readerDone
			if err := p.output(true); err != nil {
				p.log.Warn("tprofiling: last output failed", "err", err)
			}
			return nil
		case <-t.C:
			if err := p.output(false); err != nil {
				probe.LogError(p.rt, "tprofiling: output failed", err)
			}
		}
	}
}

// monoNow is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// output takes the finished aggregates and the calls in progress and
// sends them to the hub and the configured channel.
func (p *Probe) output(final bool) error {
	cfg := p.config()
	// pthread_sync's and python_gc's uprobes, per observed process: the
	// processes new since the last tick.
	p.tp.ScanUprobes(func(pid int) bool { return cfg.Targets == nil || cfg.Targets.Observed(pid) })
	mono := monoNow()
	c := clock{offset: p.now().UnixNano() - int64(mono)}
	p.amu.Lock()
	p.agg.flush(mono, final)
	evs, dropped := p.agg.take()
	win := p.agg.window
	p.amu.Unlock()
	if cfg.Has(bitMemUsage) {
		evs = append(evs, p.mem.sample(cfg, mono)...)
	}
	if dropped > 0 {
		p.rt.Lost(dropped)
	}
	open, err := p.openCalls(cfg, mono, win)
	if err != nil {
		probe.LogError(p.rt, "tprofiling: calls in progress unavailable", err)
	}
	evs, expired := p.sift.events(cfg.Targets, evs)
	if expired > 0 {
		p.rt.Lost(expired)
	}
	// Calls in progress come again at the next report while they last.
	open = slices.DeleteFunc(open, func(e Event) bool { return cfg.Targets != nil && !cfg.Targets.Observed(int(e.TGID)) })
	p.stacks.newReport()
	var noStack uint64
	for _, es := range [][]Event{evs, open} {
		for i := range es {
			p.resolvePath(&es[i])
			if !p.stacks.name(&es[i]) {
				noStack++
			}
		}
	}
	if noStack > 0 {
		p.stackLost.Add(noStack)
		p.rt.Lost(noStack)
	}
	if mono-p.lastPrune >= uint64(p.pruneAge) {
		p.lastPrune = mono
		if err := p.pruneStacks(mono - uint64(p.pruneAge)); err != nil {
			probe.LogError(p.rt, "tprofiling: pruning the stack map failed", err)
		}
	}
	p.hub.publish(evs, open, c)
	if !kafka(cfg) {
		if p.file.dir != outputDir(cfg) {
			_ = p.file.close()
			p.file = traceFile{dir: outputDir(cfg), now: p.now}
		}
		if final {
			evs = append(evs, open...)
		}
		err := p.file.write(evs, c, p.procName)
		if final {
			err = errors.Join(err, p.file.close())
		}
		return err
	}
	if err := p.file.close(); err != nil { // the channel was local before
		p.log.Warn("tprofiling: closing the trace file", "err", err)
	}
	if room := maxPerPeriod - len(p.periodEvs); len(evs) > room {
		p.rt.Lost(uint64(len(evs) - room))
		evs = evs[:room]
	}
	p.periodEvs = append(p.periodEvs, evs...)
	if !final && p.now().Sub(p.lastReport) < p.reportPeriod(cfg) {
		return nil
	}
	p.lastReport = p.now()
	all := append(p.periodEvs, open...)
	p.periodEvs = nil
	sortEvents(all)
	logs, err := threadLogs(all, c, p.now().UnixMilli(), p.procOf)
	if err != nil {
		return err
	}
	lr, ok := p.rt.(probe.LogRuntime)
	if !ok {
		return errors.New("tprofiling: the runtime carries no log records")
	}
	for _, l := range logs {
		lr.Log(l)
	}
	return nil
}

// pruneStacks deletes from the kernel's stack map the stacks no event has
// named since before (CLOCK_MONOTONIC ns) and no open aggregate holds
// (nor a thread: DeleteStacks keeps those). A stack the kernel recorded
// that no event has named yet is given the time of this pass, so it goes
// at the next one if still unnamed: an event in the ring is read well
// within pruneEvery. Run loop only.
func (p *Probe) pruneStacks(before uint64) error {
	ids, err := p.tp.StackIDs()
	if err != nil {
		return err
	}
	now := monoNow()
	var old []int32
	p.amu.Lock()
	held := p.agg.stackIDs()
	for _, id := range ids {
		seen, ok := p.stackSeen[id]
		switch {
		case !ok:
			p.stackSeen[id] = now
		case seen < before && !held[id]:
			old = append(old, id)
		}
	}
	p.amu.Unlock()
	gone, err := p.tp.DeleteStacks(old)
	p.amu.Lock()
	for _, id := range gone {
		delete(p.stackSeen, id)
	}
	p.amu.Unlock()
	p.stacks.forget(gone)
	return err
}

// eventSift keeps the events of the processes the snoopers observe. The
// kernel filter also lets through a new process until user space has
// classified it (its first milliseconds, which the snoopers may well
// claim): its events wait for the next report while the snoopers have not
// settled about it (snoop.Holdback), and are dropped if it turned out not
// observed.
type eventSift struct {
	hold snoop.Holdback
	held []Event
}

// events returns the report's events (those held from the last report
// first) of observed processes, and how many it dropped as lost, held too
// long.
func (s *eventSift) events(t snoop.Targets, evs []Event) ([]Event, uint64) {
	if len(s.held) > 0 {
		evs = append(s.held, evs...)
		s.held = nil
	}
	if t == nil {
		return evs, 0
	}
	g := s.hold.Begin(t)
	defer s.hold.End()
	for _, e := range evs {
		g.Note(e.TGID, e.Start+e.Dur)
	}
	var expired uint64
	out := evs[:0]
	for _, e := range evs {
		switch g.Verdict(e.TGID) {
		case snoop.Report:
			out = append(out, e)
		case snoop.Hold:
			s.held = append(s.held, e)
		case snoop.Expire:
			expired++
		}
	}
	return out, expired
}

// openCalls are the calls in progress for at least the aggregation window
// (shorter ones will come as events soon). The kernel says file for a
// call on any fd (it looks at the fd when the call returns): one on a
// socket is a net event, kept when syscall_net is on.
func (p *Probe) openCalls(cfg probe.Config, mono, win uint64) ([]Event, error) {
	inflight, err := p.tp.InFlight()
	var out []Event
	for _, o := range inflight {
		if mono < o.Start || mono-o.Start < win {
			continue
		}
		if o.Type == syscap.TprofFile && o.Call.HasFD() {
			fd := filepath.Join(p.procRoot, strconv.Itoa(int(o.TGID)), "fd", strconv.FormatUint(o.Arg, 10))
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:") {
				o.Type = syscap.TprofNet
			}
		}
		if !cfg.Has(probe.MustSubItemBit(Name, typeItem[o.Type])) {
			continue
		}
		comm := readTrim(filepath.Join(p.procRoot, strconv.Itoa(int(o.TGID)), "task", strconv.Itoa(int(o.PID)), "comm"))
		out = append(out, fromOpen(o, comm, mono))
	}
	sortEvents(out)
	return out, err
}

// resolvePath sets file.path of a file event from /proc/<tgid>/fd/<fd>
// when that fd still names the event's file (same inode).
func (p *Probe) resolvePath(e *Event) {
	if e.FD < 0 || e.Local.IsValid() || e.Ino == 0 {
		return
	}
	key := [3]uint64{uint64(e.TGID), uint64(e.FD), e.Ino}
	if path, ok := p.paths[key]; ok {
		e.FilePath = path
		return
	}
	fd := filepath.Join(p.procRoot, strconv.Itoa(int(e.TGID)), "fd", strconv.FormatInt(e.FD, 10))
	path, err := os.Readlink(fd)
	if err != nil {
		return
	}
	var st unix.Stat_t
	if unix.Stat(fd, &st) != nil || st.Ino != e.Ino {
		return
	}
	if len(p.paths) >= maxCache {
		clear(p.paths)
	}
	p.paths[key] = path
	e.FilePath = path
}

// procOf is what the outputs say of process tgid (cached).
func (p *Probe) procOf(tgid uint32) proc {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	if pr, ok := p.procs[tgid]; ok {
		return pr
	}
	pr := proc{Comm: readTrim(filepath.Join(p.procRoot, strconv.Itoa(int(tgid)), "comm"))}
	pr.Name = pr.Comm
	if p.ids != nil {
		if ip, ok := p.ids.Process(int(tgid)); ok {
			if ip.MainClass != "" {
				pr.Name = ip.MainClass
			}
			pr.ContainerID = ip.ContainerID
			if c, ok := p.ids.Container(ip.ContainerID); ok && ip.ContainerID != "" {
				pr.ContainerName = c.Name
			}
		}
	}
	if pr.Comm == "" {
		// Gone before it was named: do not cache the blank.
		return pr
	}
	if len(p.procs) >= maxCache {
		clear(p.procs)
	}
	p.procs[tgid] = pr
	return pr
}

func (p *Probe) procName(tgid uint32) string { return p.procOf(tgid).Comm }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Stop detaches every hook and unloads the programs. The Manager has
// already cancelled the loop (which wrote the last events) and waited for
// it. Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	p.hub.setActive(false, nil)
	p.stats.Unregister(Name)
	var errs []error
	if p.tp != nil {
		errs = append(errs, p.tp.Close())
		p.tp = nil
	}
	errs = append(errs, p.file.close())
	return errors.Join(errs...)
}
