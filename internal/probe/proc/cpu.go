package proc

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
)

// cpuStats is the proc_offcpu object (proc.bpf.c): off-CPU and I/O-wait
// time per process, from sched_switch. Not safe for concurrent use: the
// probe holds its lock around it.
type cpuStats struct {
	objs   procObjects
	link   link.Link
	filter *bpfrt.FilterSync
	lost   bpfrt.LostCounter
}

func openCPU(t snoop.Targets, onLost func(uint64)) (*cpuStats, error) {
	if err := bpfrt.HaveTPBTF("sched_switch"); err != nil {
		return nil, err
	}
	c := &cpuStats{}
	if err := loadProcObjects(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("proc: load BPF object: %w", err)
	}
	c.lost = bpfrt.LostCounter{Map: c.objs.CpuLost, OnLost: onLost}
	var err error
	if c.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: c.objs.GalagoFilterCfg, TGIDs: c.objs.FilterTgids, Cgroups: c.objs.FilterCgroups,
		Pending: c.objs.FilterPending, Decided: c.objs.FilterDecided, Lost: c.objs.FilterPendingLost,
		ForkProgram: c.objs.GalagoFilterFork, ExecProgram: c.objs.GalagoFilterExec,
	}, onLost); err != nil {
		return nil, errors.Join(fmt.Errorf("proc: %w", err), c.close())
	}
	if err := c.filter.Sync(t); err != nil {
		return nil, errors.Join(fmt.Errorf("proc: %w", err), c.close())
	}
	return c, nil
}

// setOn attaches sched_switch while proc_offcpu is on; off, it costs
// nothing per switch.
func (c *cpuStats) setOn(on bool) error {
	switch {
	case on && c.link == nil:
		l, err := link.AttachTracing(link.TracingOptions{Program: c.objs.ProcSchedSwitch, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return fmt.Errorf("proc: attach tp_btf/sched_switch: %w", err)
		}
		c.link = l
	case !on && c.link != nil:
		err := c.link.Close()
		c.link = nil
		return err
	}
	return nil
}

func (c *cpuStats) programs() map[string]*ebpf.Program {
	progs := c.filter.Programs()
	progs["proc_sched_switch"] = c.objs.ProcSchedSwitch
	return progs
}

// drain returns the rows counted since the last drain, and removes them.
func (c *cpuStats) drain() (map[uint32]procProcCpuVal, error) {
	out := map[uint32]procProcCpuVal{}
	if err := bpfrt.TakeAll(c.objs.CpuStats, func(tgid uint32, v procProcCpuVal) { out[tgid] = v }); err != nil {
		return out, fmt.Errorf("proc: %w", err)
	}
	if err := c.lost.Poll(); err != nil {
		return out, fmt.Errorf("proc: %w", err)
	}
	return out, nil
}

func (c *cpuStats) close() error {
	var errs []error
	if c.link != nil {
		errs = append(errs, c.link.Close())
		c.link = nil
	}
	if c.filter != nil {
		errs = append(errs, c.filter.Close())
		c.filter = nil
	}
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}
