package proc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "proc"

var (
	// syscallItems are the sub-items counted by the syscall statistics.
	syscallItems = probe.MustSubItemBit(Name, "proc_syscall") | probe.MustSubItemBit(Name, "proc_io") |
		probe.MustSubItemBit(Name, "proc_net") | probe.MustSubItemBit(Name, "proc_fs") | probe.MustSubItemBit(Name, "proc_ioctl")
	bitOffCPU = probe.MustSubItemBit(Name, "proc_offcpu")
	bitIO     = probe.MustSubItemBit(Name, "proc_io")
	bitPages  = probe.MustSubItemBit(Name, "proc_pagecache")
	bitDNS    = probe.MustSubItemBit(Name, "proc_dns")
	// built are the sub-items this probe implements; the others are
	// refused (all of them) or named in one warning (alongside built ones).
	built = syscallItems | bitOffCPU | bitPages | bitDNS
)

// Probe is the proc feature. See the package documentation.
type Probe struct {
	procRoot string // <host>/proc
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	period   time.Duration // replaces report_period when set (tests)
	now      func() time.Time

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	sc       *syscap.Stats // nil when the syscall tracepoints are missing
	cpu      *cpuStats     // nil when sched_switch is missing
	last     time.Time     // end of the last report period
	kick     chan struct{}
	stopOnce probe.StopOnce
	// omitLogged: the fields proc_io and proc_pagecache never report were
	// logged (once per probe instance).
	omitLogged bool
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Tables implements probe.Tables: the tables this probe can publish (not
// proc_pygc, whose sub-item is not built).
func (p *Probe) Tables() []*table.Table {
	out := []*table.Table{table.ProcSyscall, table.ProcSyscallIoctl, table.ProcCpu, table.ProcIo, table.ProcPage, table.ProcDns}
	for _, lt := range latencyTables {
		out = append(out, lt.t)
	}
	return out
}

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the probe's programs with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// WithHostPath reads processes' C libraries through <host>/proc
// (GOPHER_HOST_PATH), for proc_dns.
func WithHostPath(host string) Option {
	return func(p *Probe) { p.procRoot = filepath.Join("/", host, "proc") }
}

// withPeriod replaces report_period (tests).
func withPeriod(d time.Duration) Option { return func(p *Probe) { p.period = d } }

// New returns a stopped proc probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, procRoot: "/proc"}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Start loads the syscall statistics and the sched_switch object,
// attaches what the sub-items need and starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("proc: started twice")
	}
	p.log = rt.Logger()
	p.missing = p.missing.OrNew(p.log)
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	var err error
	if p.sc, err = syscap.OpenStats(cfg.Targets, rt.Lost); err != nil {
		if !errors.Is(err, bpfrt.ErrHookUnavailable) {
			return fmt.Errorf("proc: %w", err)
		}
		_ = p.missing.Report(err, "proc_syscall", "proc_io", "proc_net", "proc_fs", "proc_ioctl")
	}
	if p.cpu, err = openCPU(cfg.Targets, rt.Lost); err != nil {
		if !errors.Is(err, bpfrt.ErrHookUnavailable) {
			return errors.Join(err, p.closeLocked())
		}
		_ = p.missing.Report(err, "proc_offcpu", "proc_io's table proc_io", "proc_pagecache", "proc_dns")
	} else {
		if p.cpu.bio.missing != nil {
			_ = p.missing.Report(p.cpu.bio.missing, "proc_io's table proc_io")
		}
		if p.cpu.pages.missing != nil {
			_ = p.missing.Report(p.cpu.pages.missing, "proc_pagecache")
		}
	}
	if err := p.applyLocked(cfg); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.rt, p.cfg = rt, cfg
	p.kick = make(chan struct{}, 1)
	p.last = p.now()
	progs := map[string]*ebpf.Program{}
	if p.sc != nil {
		maps.Copy(progs, p.sc.Programs())
		rt.Go(p.sc.Run)
	}
	if p.cpu != nil {
		maps.Copy(progs, p.cpu.programs())
		rt.Go(p.cpu.filter.Run)
	}
	p.stats.TryRegister(p.log, Name, progs)
	rt.Go(p.run)
	return nil
}

// applyLocked enables the hooks of cfg's sub-items and disables the others.
func (p *Probe) applyLocked(cfg probe.Config) error {
	if cfg.SubItems&syscallItems != 0 && p.sc == nil {
		return fmt.Errorf("proc: %s need tp_btf/sys_enter and sys_exit: %w",
			strings.Join(probe.LookupBuiltin(Name).SubItemNames(cfg.SubItems&syscallItems), ","), probe.ErrNotSupported)
	}
	p.logOmittedLocked(cfg)
	if cfg.SubItems&(bitOffCPU|bitDNS) != 0 && p.cpu == nil {
		return fmt.Errorf("proc: proc_offcpu and proc_dns need tp_btf/sched_switch: %w", probe.ErrNotSupported)
	}
	if p.sc != nil {
		if err := p.sc.SetTargets(cfg.Targets); err != nil {
			return fmt.Errorf("proc: %w", err)
		}
		fs, classes := classesFor(hasFunc(cfg))
		if err := p.sc.SetClasses(fs, classes...); err != nil {
			return err
		}
	}
	if p.cpu != nil {
		if err := p.cpu.filter.Sync(cfg.Targets); err != nil {
			return fmt.Errorf("proc: %w", err)
		}
		for _, g := range []struct {
			g  *hookGroup
			on bool
		}{{&p.cpu.offcpu, cfg.Has(bitOffCPU)}, {&p.cpu.bio, cfg.Has(bitIO)}, {&p.cpu.pages, cfg.Has(bitPages)}} {
			if err := g.g.set(g.on); err != nil {
				return err
			}
		}
		switch {
		case cfg.Has(bitDNS) && p.cpu.dns == nil:
			p.cpu.dns = newDNSHooks(&p.cpu.objs, p.procRoot)
		case !cfg.Has(bitDNS) && p.cpu.dns != nil:
			err := p.cpu.dns.close()
			p.cpu.dns = nil
			if err != nil {
				return err
			}
		}
		p.scanDNSLocked(cfg)
	}
	return nil
}

// logOmittedLocked says once, when proc_io or proc_pagecache is first
// enabled, which of their reference fields are never reported and why
// (see the package documentation).
func (p *Probe) logOmittedLocked(cfg probe.Config) {
	if p.omitLogged || p.log == nil || !cfg.Has(bitIO) && !cfg.Has(bitPages) {
		return
	}
	p.omitLogged = true
	p.log.Info("proc: fields not measured on this kernel are omitted, not reported as 0",
		"proc_io.hang_count", "sched_process_hang fires only for a task blocked past kernel.hung_task_timeout_secs (120 s), a machine-wide setting no test can hold",
		"proc_page.access_pagecache", "mark_page_accessed has no tracepoint and kprobes are unavailable",
		"proc_page.reclaim_ns", "direct reclaim (mm_vmscan_direct_reclaim_begin/end) needs machine-wide memory pressure; no ground truth holds it exactly")
}

// hasFunc tells whether a sub-item of cfg is enabled.
func hasFunc(cfg probe.Config) func(string) bool {
	return func(item string) bool { return cfg.Has(probe.MustSubItemBit(Name, item)) }
}

// checkSubItems refuses a request for unbuilt sub-items only, and logs the
// unbuilt ones of a mixed request.
func (p *Probe) checkSubItems(sub uint32) error {
	return probe.CheckBuiltSubItems(Name, sub, built, p.log)
}

// scanDNSLocked attaches the resolver uprobes to the C libraries of the
// observed processes not seen yet (proc_dns). A library that cannot be
// probed is logged once.
func (p *Probe) scanDNSLocked(cfg probe.Config) {
	if p.cpu == nil || p.cpu.dns == nil || cfg.Targets == nil {
		return
	}
	ents, err := os.ReadDir(p.procRoot)
	if err != nil {
		return
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && cfg.Targets.Observed(pid) {
			pids = append(pids, pid)
		}
	}
	if err := p.cpu.dns.scan(pids); err != nil && p.log != nil {
		p.log.Warn("proc: proc_dns cannot probe a C library", "err", err)
	}
}

// Reconfigure applies new sub-items, snoopers and report period without
// reloading.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("proc: not running")
	}
	if err := p.checkSubItems(cfg.SubItems); err != nil {
		return err
	}
	if err := p.applyLocked(cfg); err != nil {
		return err
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

func (p *Probe) reportPeriod(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.period, cfg.Params)
}

// run ends a report period on every tick, and once more when stopped, so
// that what the last partial period counted is published.
func (p *Probe) run(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, func() time.Duration { return p.reportPeriod(p.cfg) }, func() {
		if err := p.report(); err != nil {
			probe.LogError(p.rt, "proc: report failed", err)
		}
	})
	if err := p.report(); err != nil {
		p.log.Warn("proc: last report failed", "err", err)
	}
	return nil
}

// report drains the kernel's rows and publishes them as one period.
func (p *Probe) report() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var (
		rows    []syscap.SyscallStat
		cpuRows map[uint32]procProcCpuVal
		errs    []error
		err     error
	)
	if p.sc != nil {
		rows, err = p.sc.Drain()
		errs = append(errs, err)
	}
	var (
		ioRows  map[uint32]procProcIoVal
		dnsRows map[procProcDnsKey]procProcDnsVal
	)
	if p.cpu != nil {
		cpuRows, ioRows, err = p.cpu.drain()
		errs = append(errs, err)
		dnsRows, err = drainDNS(p.cpu.objs.DnsStats)
		errs = append(errs, err)
	}
	now := p.now()
	period := now.Sub(p.last)
	p.last = now
	for _, r := range records(rows, hasFunc(p.cfg), now, period) {
		p.rt.Record(r)
	}
	if p.cfg.Has(bitOffCPU) {
		for _, r := range cpuRecords(cpuRows, now, period) {
			p.rt.Record(r)
		}
	}
	for _, r := range ioRecords(ioRows, p.cfg.Has(bitIO), p.cfg.Has(bitPages), now, period) {
		p.rt.Record(r)
	}
	if p.cfg.Has(bitDNS) {
		recs, evs := dnsRecords(dnsRows, p.cfg.Params.ReportEvent == 1, now, period)
		for _, r := range recs {
			p.rt.Record(r)
		}
		for _, e := range evs {
			p.rt.Event(e)
		}
		p.scanDNSLocked(p.cfg) // processes started since
	}
	return errors.Join(errs...)
}

// Stop detaches the programs and unloads the object. Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	p.stats.Unregister(Name)
	var errs []error
	if p.sc != nil {
		errs = append(errs, p.sc.Close())
		p.sc = nil
	}
	if p.cpu != nil {
		errs = append(errs, p.cpu.close())
		p.cpu = nil
	}
	return errors.Join(errs...)
}
