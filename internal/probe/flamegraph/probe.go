package flamegraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/symtab"
)

// Name is the feature name.
const Name = "flamegraph"

var (
	bitOnCPU  = probe.MustSubItemBit(Name, "oncpu")
	bitOffCPU = probe.MustSubItemBit(Name, "offcpu")
	bitMem    = probe.MustSubItemBit(Name, "mem")
	bitGlibc  = probe.MustSubItemBit(Name, "mem_glibc")
	// built are the sub-items this probe implements; the others (io,
	// which has no program in gala-gopher either) are refused (all of
	// them) or logged once (alongside built ones).
	built = bitOnCPU | bitOffCPU | bitMem | bitGlibc
)

// active are the kinds cfg asks for.
func active(cfg probe.Config) [nKinds]bool {
	return [nKinds]bool{cfg.Has(bitOnCPU), cfg.Has(bitOffCPU), cfg.Has(bitMem), cfg.Has(bitGlibc)}
}

// DefaultOutputDir is gala-gopher's SVG directory when output_dir is empty.
const DefaultOutputDir = "/var/log/gala-gopher/stacktrace"

// drainInterval is how often the counts maps are read and cleared: short
// enough that the stacks of a process are named while it still runs and
// the stack map stays sparse (fewer -EEXIST collisions).
const drainInterval = 2 * time.Second

// retention is how long output files are kept (gala-gopher: one week).
const retention = 7 * 24 * time.Hour

// Probe is the flamegraph feature. See the package documentation.
type Probe struct {
	stats     *bpfrt.Stats
	missing   *bpfrt.MissingHooks
	hub       *Hub
	ids       identity.Resolver
	procRoot  string
	drain     time.Duration // drainInterval unless set (tests)
	svgPeriod time.Duration // replaces svg_period when set (tests)
	maxAllocs uint32        // replaces glibc_allocs' size when set (tests)
	now       func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	coll     *ebpf.Collection
	filter   *bpfrt.FilterSync
	perf     *bpfrt.CPUClock      // oncpu: sampling on every online CPU
	offLink  link.Link            // offcpu: tp_btf/sched_switch
	memLinks []link.Link          // mem: tp_btf/page_fault_user, _kernel
	glibc    *glibcHooks          // mem_glibc: uprobes per libc file
	live     map[int]*procProfile // mem_glibc: live blocks at the last drain
	syms     *symtab.Resolver
	jit      *jitSyms // JVMs' JIT frames, from their perf maps
	windows  [nKinds]*window
	// hold and held: samples of processes the snoopers had not settled
	// about at a collect, offered again at the next (see collect).
	hold        snoop.Holdback
	held        []heldSample
	pushWin     [nKinds]*window // since the last Pyroscope push
	uuid        string          // system-uuid for Pyroscope names
	hostRoot    string
	pushEvery   time.Duration
	pushFailing bool      // run loop only
	drops       [6]uint64 // per enum flame_drop, reported so far
	kick        chan struct{}
	stopOnce    probe.StopOnce
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

// WithHostPath resolves symbols through <host>/proc (GOPHER_HOST_PATH).
func WithHostPath(host string) Option {
	return func(p *Probe) {
		p.hostRoot = filepath.Join("/", host)
		p.procRoot = filepath.Join(p.hostRoot, "proc")
	}
}

// withPeriods replaces the drain interval and svg_period (tests).
func withPeriods(drain, svg time.Duration) Option {
	return func(p *Probe) { p.drain, p.svgPeriod = drain, svg }
}

// WithIdentity names the container and pod of containerised processes in
// their stacks' bottom frames ([Pod]<pod>;[Con]<container>) and labels.
func WithIdentity(ids identity.Resolver) Option { return func(p *Probe) { p.ids = ids } }

// withMaxAllocs bounds the live blocks mem_glibc tracks (tests).
func withMaxAllocs(n uint32) Option { return func(p *Probe) { p.maxAllocs = n } }

// withPush replaces the Pyroscope push interval (tests).
func withPush(d time.Duration) Option { return func(p *Probe) { p.pushEvery = d } }

// New returns a stopped flamegraph probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, hostRoot: "/", procRoot: "/proc", drain: drainInterval, pushEvery: pushInterval}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Start loads the BPF object, opens the sampling events (oncpu) and
// attaches sched_switch (offcpu), and starts the drain and output loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("flamegraph: started twice")
	}
	p.log = rt.Logger()
	p.missing = p.missing.OrNew(p.log)
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	if err := p.load(rt); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.rt, p.cfg = rt, cfg
	p.syms = symtab.NewResolver(p.procRoot)
	p.jit = newJITSyms(p.hostRoot, rt, p.now)
	p.kick = make(chan struct{}, 1)
	now := p.now()
	for k := range p.windows {
		p.windows[k] = newWindow(now)
		p.pushWin[k] = newWindow(now)
	}
	p.uuid = systemUUID(p.hostRoot)
	if err := p.filter.Sync(cfg.Targets); err != nil {
		p.rt = nil
		return errors.Join(fmt.Errorf("flamegraph: %w", err), p.closeLocked())
	}
	if err := p.syncHooks(cfg); err != nil {
		p.rt = nil
		return errors.Join(err, p.closeLocked())
	}
	p.hub.setActive(active(cfg), time.Duration(samplePeriod(cfg)))
	p.stats.TryRegister(p.log, Name, p.coll.Programs)
	rt.Go(p.filter.Run)
	rt.Go(p.run)
	rt.Go(p.jit.run)
	return nil
}

// checkSubItems refuses a request for unbuilt sub-items only, and logs the
// unbuilt ones of a mixed request.
func (p *Probe) checkSubItems(sub uint32) error {
	return probe.CheckBuiltSubItems(Name, sub, built, p.log)
}

func (p *Probe) load(rt probe.Runtime) error {
	spec, err := loadFlame()
	if err != nil {
		return fmt.Errorf("flamegraph: %w", err)
	}
	if err := bpfrt.HaveTPBTF("sched_switch"); err != nil {
		_ = p.missing.Report(err, "offcpu")
		delete(spec.Programs, "off_cpu")
	}
	// The page fault tracepoints are x86's.
	for _, tp := range [...]string{"page_fault_user", "page_fault_kernel"} {
		if err := bpfrt.HaveTPBTF(tp); err != nil {
			_ = p.missing.Report(err, "mem")
			delete(spec.Programs, tp)
		}
	}
	if p.maxAllocs > 0 {
		spec.Maps["glibc_allocs"].MaxEntries = p.maxAllocs
	}
	if err := spec.Variables["page_size"].Set(uint64(os.Getpagesize())); err != nil {
		return fmt.Errorf("flamegraph: set page_size: %w", err)
	}
	p.coll, err = ebpf.NewCollection(spec)
	if err != nil {
		return fmt.Errorf("flamegraph: load: %w", err)
	}
	p.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjectsOf(p.coll), rt.Lost)
	if err != nil {
		return fmt.Errorf("flamegraph: %w", err)
	}
	return nil
}

// samplePeriod is perf_sample_period (ms) as ns.
func samplePeriod(cfg probe.Config) uint64 {
	ms := cfg.Params.PerfSamplePeriod
	if ms <= 0 {
		ms = probe.DefaultParams().PerfSamplePeriod
	}
	return uint64(ms) * uint64(time.Millisecond)
}

// syncHooks opens or closes the sampling events and the sched_switch link
// to match cfg's sub-items and sample period.
func (p *Probe) syncHooks(cfg probe.Config) error {
	wantOn := cfg.Has(bitOnCPU)
	period := samplePeriod(cfg)
	if p.perf != nil && (!wantOn || period != p.perf.PeriodNs) {
		p.perf.Close()
		p.perf = nil
	}
	if wantOn && p.perf == nil {
		c, err := bpfrt.OpenCPUClock(p.coll.Programs["on_cpu"], period)
		if err != nil {
			return fmt.Errorf("flamegraph: %w", err)
		}
		p.perf = c
	}
	wantOff := cfg.Has(bitOffCPU)
	prog := p.coll.Programs["off_cpu"]
	if wantOff && p.offLink == nil && prog != nil {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return fmt.Errorf("flamegraph: attach tp_btf/sched_switch: %w", err)
		}
		p.offLink = l
	}
	if err := p.setFlag("offcpu_on", wantOff); err != nil {
		return err
	}
	if !wantOff && p.offLink != nil {
		err := p.offLink.Close()
		p.offLink = nil
		if err != nil {
			return err
		}
	}
	if err := p.syncMem(cfg.Has(bitMem)); err != nil {
		return err
	}
	if err := p.syncGlibc(cfg); err != nil {
		return err
	}
	// Nothing asked for can be hooked on this kernel.
	if (!wantOff || prog == nil) && !wantOn && !cfg.Has(bitGlibc) && (!cfg.Has(bitMem) || len(p.memLinks) == 0) {
		return fmt.Errorf("flamegraph: offcpu needs tp_btf/sched_switch, mem tp_btf/page_fault_user: %w", probe.ErrNotSupported)
	}
	return nil
}

// syncMem attaches or detaches the page fault programs (mem).
func (p *Probe) syncMem(want bool) error {
	if want && len(p.memLinks) == 0 {
		for _, name := range [...]string{"page_fault_user", "page_fault_kernel"} {
			prog := p.coll.Programs[name]
			if prog == nil {
				continue // reported at load
			}
			l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				_ = bpfrt.CloseLinks(p.memLinks)
				p.memLinks = nil
				return fmt.Errorf("flamegraph: attach tp_btf/%s: %w", name, err)
			}
			p.memLinks = append(p.memLinks, l)
		}
	}
	if err := p.setFlag("mem_on", want); err != nil {
		return err
	}
	if !want && len(p.memLinks) > 0 {
		_ = bpfrt.CloseLinks(p.memLinks)
		p.memLinks = nil
	}
	return nil
}

// syncGlibc probes the host's libc and the observed processes' libc files
// (mem_glibc), or removes the probes and forgets the live blocks.
func (p *Probe) syncGlibc(cfg probe.Config) error {
	want := cfg.Has(bitGlibc)
	if want && p.glibc == nil {
		p.glibc = newGlibcHooks(p.hostRoot, p.coll.Programs, p.log)
		if err := p.setFlag("glibc_on", true); err != nil {
			return err
		}
		p.glibc.attachHost()
		p.log.Info("flamegraph: mem_glibc counts libc's malloc, calloc, realloc, memalign, aligned_alloc, valloc, pvalloc and posix_memalign and follows free; processes without a shared libc (static, other allocators) are not seen")
	}
	if want {
		p.glibc.scan(observer(cfg.Targets))
		return nil
	}
	if p.glibc == nil {
		return nil
	}
	err := p.setFlag("glibc_on", false)
	p.glibc.close()
	p.glibc = nil
	p.live = nil
	p.hub.setLive(nil)
	return errors.Join(err, clearMap[uint64, flameFlamePending](p.coll.Maps["glibc_pending"]),
		clearMap[flameFlameAllocKey, flameFlameAlloc](p.coll.Maps["glibc_allocs"]))
}

// observer is the snooper check, everything without snoopers.
func observer(t snoop.Targets) func(int) bool {
	if t == nil {
		return func(int) bool { return true }
	}
	return t.Observed
}

func (p *Probe) setFlag(name string, on bool) error {
	v := uint32(0)
	if on {
		v = 1
	}
	if err := p.coll.Variables[name].Set(v); err != nil {
		return fmt.Errorf("flamegraph: set %s: %w", name, err)
	}
	return nil
}

// clearMap deletes every row of a hash map of K to V.
func clearMap[K, V any](m *ebpf.Map) error {
	keys, err := mapKeys[K, V](m)
	for _, k := range keys {
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return err
}

// mapKeys lists the keys of a hash map of K to V.
func mapKeys[K, V any](m *ebpf.Map) ([]K, error) {
	var keys []K
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	return keys, it.Err()
}

// Reconfigure applies new sub-items, sample period, snoopers and output
// parameters without reloading.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("flamegraph: not running")
	}
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	if err := p.filter.Sync(cfg.Targets); err != nil {
		return fmt.Errorf("flamegraph: %w", err)
	}
	if err := p.syncHooks(cfg); err != nil {
		return err
	}
	p.hub.setActive(active(cfg), time.Duration(samplePeriod(cfg)))
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

// Stop detaches every hook and unloads the object. The Manager has already
// cancelled the loop (which wrote the last window) and waited for it.
// Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	var errs []error
	p.hub.setActive([nKinds]bool{}, 0)
	p.stats.Unregister(Name)
	p.perf.Close()
	p.perf = nil
	_ = bpfrt.CloseLinks(p.memLinks)
	p.memLinks = nil
	if p.glibc != nil {
		p.glibc.close()
		p.glibc = nil
	}
	if p.offLink != nil {
		errs = append(errs, p.offLink.Close())
		p.offLink = nil
	}
	if p.filter != nil {
		errs = append(errs, p.filter.Close())
		p.filter = nil
	}
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	return errors.Join(errs...)
}
