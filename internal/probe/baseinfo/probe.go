package baseinfo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "baseinfo"

// Sub-item bits, in the order of probe.Builtin's baseinfo entry.
var (
	bitCPU  = probe.MustSubItemBit(Name, "cpu")
	bitMem  = probe.MustSubItemBit(Name, "mem")
	bitNIC  = probe.MustSubItemBit(Name, "nic")
	bitNet  = probe.MustSubItemBit(Name, "net")
	bitDisk = probe.MustSubItemBit(Name, "disk")
	bitFS   = probe.MustSubItemBit(Name, "fs")
	bitProc = probe.MustSubItemBit(Name, "proc")
	bitHost = probe.MustSubItemBit(Name, "host")
	bitCon  = probe.MustSubItemBit(Name, "con")
	// galago's own sub-items
	bitDelay = probe.MustSubItemBit(Name, "delay")
	bitApp   = probe.MustSubItemBit(Name, "app")
)

// collector gathers one sub-item's tables.
type collector interface {
	// sample reads the sub-item's sources at c.now. With c.emit set and a
	// previous sample to difference against, it publishes the records and
	// events of the period that ends now; either way the sample becomes the
	// baseline of the next period.
	sample(c *cycle)
	// forget drops the baseline (the sub-item was disabled).
	forget()
}

type subItem struct {
	bit uint32
	c   collector
}

// Probe is the baseinfo feature: host-wide CPU, memory, NIC, SNMP, disk and
// filesystem statistics, per-process statistics of the observed processes,
// host identity and container directory growth, all read from /proc, /sys
// and statfs (plus one netlink qdisc dump for the nic table).
type Probe struct {
	fs       procfs.FS
	resolver identity.Resolver
	// interval, when set, replaces report_period (tests use sub-second
	// periods; gala-gopher's API allows 5..600 s).
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	cfg     probe.Config
	rt      probe.Runtime
	subs    []subItem
	warned  map[string]bool
	stopped bool
	// periodChanged wakes the loop to re-arm its ticker.
	periodChanged chan struct{}
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithIdentity gives the con sub-item the resolver that maps a process to
// its container; without one, system_con_io is never reported.
func WithIdentity(r identity.Resolver) Option { return func(p *Probe) { p.resolver = r } }

// New returns a baseinfo probe reading the host files under fs.
func New(fs procfs.FS, opts ...Option) *Probe {
	p := &Probe{fs: fs, now: time.Now, periodChanged: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	p.subs = []subItem{
		{bitCPU, &cpuCollector{}},
		{bitMem, &memCollector{}},
		{bitNIC, &nicCollector{dump: hostQdiscs}},
		{bitNet, &netCollector{}},
		{bitDisk, &diskCollector{}},
		{bitFS, newFSCollector()},
		{bitProc, &procCollector{}},
		{bitHost, &hostCollector{}},
		{bitHost, &instanceCollector{}},
		{bitCon, &conCollector{resolver: p.resolver}},
		{bitDelay, newDelayCollector()},
		{bitApp, &appCollector{}},
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	return []*table.Table{
		table.SystemCpu, table.SystemCpuUtil, table.SystemMeminfo, table.SystemDentry,
		table.Nic, table.SystemTcp, table.SystemUdp, table.SystemIostat, table.SystemDf,
		table.SystemProc, table.SystemOs, table.SystemConIo,
		ProcDelay, ProcApp, HostInstance,
	}
}

// Start takes the baseline of every enabled sub-item, so that the first
// report, one period later, already covers a whole period, then starts the
// report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return fmt.Errorf("baseinfo: started twice")
	}
	p.cfg, p.rt, p.warned = cfg, rt, map[string]bool{}
	c := p.newCycle(p.now(), false)
	for _, s := range p.subs {
		if cfg.Has(s.bit) {
			s.c.sample(c)
		}
	}
	rt.Go(p.run)
	return nil
}

// Reconfigure applies new parameters, sub-items and targets without a
// restart: a newly enabled sub-item takes its baseline now, a disabled one
// forgets its own, and a new report_period re-arms the timer.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return fmt.Errorf("baseinfo: not started")
	}
	old := p.cfg
	p.cfg = cfg
	c := p.newCycle(p.now(), false)
	for _, s := range p.subs {
		switch {
		case cfg.Has(s.bit) && !old.Has(s.bit):
			s.c.sample(c)
		case !cfg.Has(s.bit) && old.Has(s.bit):
			s.c.forget()
		}
	}
	if p.period(cfg) != p.period(old) {
		probe.Kick(p.periodChanged)
	}
	return nil
}

// Stop implements probe.Probe. The Manager has already cancelled the loop
// and waited for it; Stop marks the instance finished and closes what
// sub-items hold open (the delay sub-item's netlink socket). Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for _, s := range p.subs {
		if c, ok := s.c.(interface{ close() }); ok {
			c.close()
		}
	}
	return nil
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.interval, cfg.Params)
}

func (p *Probe) run(ctx context.Context) error {
	probe.Every(ctx, p.periodChanged, &p.mu, func() time.Duration { return p.period(p.cfg) }, func() { p.collect(p.now()) })
	return nil
}

// collect ends the current period at now: every enabled sub-item reports.
func (p *Probe) collect(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	c := p.newCycle(now, true)
	for _, s := range p.subs {
		if p.cfg.Has(s.bit) {
			s.c.sample(c)
		}
	}
}

func (p *Probe) newCycle(now time.Time, emit bool) *cycle {
	return &cycle{now: now, period: p.period(p.cfg), fs: p.fs, cfg: p.cfg, rt: p.rt, emit: emit,
		log: p.rt.Logger(), warned: p.warned}
}

// cycle is one pass over the sub-items: a baseline (emit false) or the end
// of a report period.
type cycle struct {
	now    time.Time
	period time.Duration // the configured report period
	fs     procfs.FS
	cfg    probe.Config
	rt     probe.Runtime
	emit   bool
	log    *slog.Logger
	warned map[string]bool
}

// warnOnce logs msg once per probe instance and key.
func (c *cycle) warnOnce(key, msg string, attrs ...any) {
	if c.warned[key] {
		return
	}
	c.warned[key] = true
	c.log.Warn(msg, attrs...)
}

// unmeasured logs, once per probe instance and key, that fields are left
// unset and why.
func (c *cycle) unmeasured(key, fields string, err error) {
	c.warnOnce(key, "baseinfo: fields left unset", "fields", fields, "reason", err)
}

// failed reports a source that cannot be read this period: the table is
// skipped and the error counted (logged once per key).
func (c *cycle) failed(key, tables string, err error) {
	c.rt.Error()
	c.unmeasured(key, tables, err)
}

// event publishes a WARN event when report_event is on.
func (c *cycle) event(d *event.Desc, id, dev string, args ...any) {
	if c.cfg.Params.ReportEvent != 1 {
		return
	}
	e := event.New(c.now, d, id, args...)
	e.Device = dev
	c.rt.Event(e)
}

// upperThr is res_upper_thr when events are on and the threshold is set.
func (c *cycle) upperThr() (float64, bool) {
	thr := c.cfg.Params.ResUpperThr
	return float64(thr), c.cfg.Params.ReportEvent == 1 && thr > 0
}

// delta is cur-prev for a counter, 0 if it went backwards (a reset or the
// kernel's occasional idle/iowait step back).
func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}
