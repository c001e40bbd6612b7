package virt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/instmeta"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/periodic"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "virt"

// Probe is the virt feature. See the package documentation.
type Probe struct {
	fs       procfs.FS
	cpuid    func() (string, bool)
	loopOpts []periodic.Option
	loop     *periodic.Loop

	mu sync.Mutex
	hv instmeta.Hypervisor
}

var (
	_ probe.Probe  = (*Probe)(nil)
	_ probe.Tables = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

func withInterval(d time.Duration) Option {
	return func(p *Probe) { p.loopOpts = append(p.loopOpts, periodic.Interval(d)) }
}

// New returns a stopped virt probe reading the host under fsys.
func New(fsys procfs.FS, opts ...Option) *Probe {
	p := &Probe{fs: fsys, cpuid: instmeta.CPUIDSignature}
	for _, o := range opts {
		o(p)
	}
	p.loop = periodic.New(p.collect, append(p.loopOpts, periodic.AtStart())...)
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.VirtProc} }

// Hypervisor is what the host was found to run on at Start.
func (p *Probe) Hypervisor() instmeta.Hypervisor {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hv
}

// Start identifies the host's own hypervisor (logged once) and starts the
// report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	hv := instmeta.DetectHypervisor(p.fs, p.cpuid)
	if err := p.loop.Start(cfg, rt); err != nil {
		return fmt.Errorf("virt: %w", err)
	}
	p.mu.Lock()
	p.hv = hv
	p.mu.Unlock()
	if hv.VM() {
		rt.Logger().Info("virt: this host is a virtual machine; virt_proc lists the QEMU/KVM guests it runs itself (nested), if any",
			"hypervisor", hv.Name, "source", hv.Source)
	} else {
		rt.Logger().Info("virt: this host is bare metal (no hypervisor seen in DMI, CPUID, /sys/hypervisor, device tree or cpuinfo)")
	}
	return nil
}

// Stop is a no-op: the probe holds nothing between periods. Idempotent.
func (p *Probe) Stop() error { return nil }

// collect publishes one virt_proc row per QEMU process.
func (p *Probe) collect(c periodic.Cycle) {
	pids, err := p.fs.PIDs()
	if err != nil {
		c.RT.Error()
		c.WarnOnce("pids", "virt: cannot list processes", "err", err)
		return
	}
	for _, pid := range pids {
		g, ok, err := p.inspect(pid)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // exited meanwhile
				c.RT.Error()
				c.WarnOnce("read", "virt: cannot read a process (logged once)", "pid", pid, "err", err)
			}
			continue
		}
		if ok {
			c.RT.Record(guestRecord(pid, g, c.Now, c.Period))
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
