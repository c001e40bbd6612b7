package virt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "virt"

// Probe is the virt feature. See the package documentation.
type Probe struct {
	fs       procfs.FS
	interval time.Duration // replaces report_period when set (tests)
	now      func() time.Time
	cpuid    func() (string, bool)

	mu       sync.Mutex
	cfg      probe.Config
	rt       probe.Runtime
	log      *slog.Logger
	hv       Hypervisor
	lastTick time.Time
	warned   map[string]bool
}

var (
	_ probe.Probe  = (*Probe)(nil)
	_ probe.Tables = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

func withInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// New returns a stopped virt probe reading the host under fsys.
func New(fsys procfs.FS, opts ...Option) *Probe {
	p := &Probe{fs: fsys, now: time.Now, cpuid: cpuidHypervisor}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.VirtProc} }

// Hypervisor is what the host was found to run on at Start.
func (p *Probe) Hypervisor() Hypervisor {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hv
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	if p.interval > 0 {
		return p.interval
	}
	if d := cfg.Params.Period(); d > 0 {
		return d
	}
	return probe.DefaultParams().Period()
}

// Start identifies the host's own hypervisor (logged once) and starts the
// report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("virt: started twice")
	}
	p.cfg, p.rt, p.log, p.warned = cfg, rt, rt.Logger(), map[string]bool{}
	p.hv = detectHypervisor(p.fs, p.cpuid)
	if p.hv.VM() {
		p.log.Info("virt: this host is a virtual machine; virt_proc lists the QEMU/KVM guests it runs itself (nested), if any",
			"hypervisor", p.hv.Name, "source", p.hv.Source)
	} else {
		p.log.Info("virt: this host is bare metal (no hypervisor seen in DMI, CPUID, /sys/hypervisor, device tree or cpuinfo)")
	}
	p.lastTick = p.now()
	rt.Go(p.run)
	return nil
}

// Stop is a no-op: the probe holds nothing between periods. Idempotent.
func (p *Probe) Stop() error { return nil }

func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	t := time.NewTicker(p.period(p.cfg))
	p.mu.Unlock()
	defer t.Stop()
	p.collect(p.now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.collect(p.now())
		}
	}
}

// collect publishes one virt_proc row per QEMU process.
func (p *Probe) collect(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	period := now.Sub(p.lastTick)
	p.lastTick = now
	pids, err := p.fs.PIDs()
	if err != nil {
		p.rt.Error()
		p.warnOnce("pids", "virt: cannot list processes", "err", err)
		return
	}
	for _, pid := range pids {
		g, ok, err := p.inspect(pid)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // exited meanwhile
				p.rt.Error()
				p.warnOnce("read", "virt: cannot read a process (logged once)", "pid", pid, "err", err)
			}
			continue
		}
		if ok {
			p.rt.Record(guestRecord(pid, g, now, period))
		}
	}
}

// guestRecord is one virt_proc row; value is the constant 1 the table
// defines ("a fixed num as metric").
func guestRecord(pid int, g guest, now time.Time, period time.Duration) *table.Record {
	t := table.VirtProc
	r := t.NewRecord(now, period)
	r.SetStr(t.MustIndex("tgid"), strconv.Itoa(pid))
	if g.uuid != "" {
		r.SetStr(t.MustIndex("uuid"), g.uuid)
	}
	if g.name != "" {
		r.SetStr(t.MustIndex("vm_name"), g.name)
	}
	r.SetNum(t.MustIndex("value"), 1)
	return r
}

// inspect reads pid's command line and, for a QEMU process without -name,
// its cgroups for libvirt's machine name.
func (p *Probe) inspect(pid int) (guest, bool, error) {
	b, err := readLimited(p.fs.Path(fmt.Sprintf("/proc/%d/cmdline", pid)), maxCmdline)
	if err != nil {
		return guest{}, false, err
	}
	g, ok := parseQEMU(splitCmdline(b))
	if !ok || g.name != "" {
		return g, ok, nil
	}
	f, err := os.Open(p.fs.Path(fmt.Sprintf("/proc/%d/cgroup", pid)))
	if err != nil {
		return g, true, nil // the row stands without a name
	}
	defer f.Close()
	if n, err := cgroupVMName(f); err == nil {
		g.name = n
	}
	return g, true, nil
}

// readLimited reads at most max bytes of path; a longer file is an error.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w", path, errTooLong)
	}
	return b, nil
}

func (p *Probe) warnOnce(key, msg string, attrs ...any) {
	if p.warned[key] {
		return
	}
	p.warned[key] = true
	p.log.Warn(msg, attrs...)
}
