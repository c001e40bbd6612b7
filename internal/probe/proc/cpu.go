package proc

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
)

// cpuStats is the probe's own object (proc.bpf.c): off-CPU and I/O-wait
// time per process from sched_switch (proc_offcpu), and block I/O by
// issuing process from the bio tracepoints (proc_io). Not safe for
// concurrent use: the probe holds its lock around it.
type cpuStats struct {
	objs    procObjects
	link    link.Link
	ioLinks []link.Link
	noBio   error // the bio tracepoints are missing
	filter  *bpfrt.FilterSync
	lost    bpfrt.LostCounter
}

func openCPU(t snoop.Targets, onLost func(uint64)) (*cpuStats, error) {
	if err := bpfrt.HaveTPBTF("sched_switch"); err != nil {
		return nil, err
	}
	c := &cpuStats{}
	c.noBio = errors.Join(bpfrt.HaveTPBTF("block_bio_queue"), bpfrt.HaveTPBTF("block_bio_complete"),
		bpfrt.HaveTPBTF("block_rq_complete"))
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

// setIO attaches the bio programs while proc_io is on.
func (c *cpuStats) setIO(on bool) error {
	if on && c.noBio != nil {
		return nil // reported once at start
	}
	v := uint32(0)
	if on {
		v = 1
	}
	if err := c.objs.IoOn.Set(v); err != nil {
		return fmt.Errorf("proc: set io_on: %w", err)
	}
	switch {
	case on && c.ioLinks == nil:
		for _, p := range []*ebpf.Program{c.objs.ProcBioQueue, c.objs.ProcBioComplete, c.objs.ProcRqComplete} {
			l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				return errors.Join(fmt.Errorf("proc: attach %s: %w", p, err), c.closeIO())
			}
			c.ioLinks = append(c.ioLinks, l)
		}
	case !on && c.ioLinks != nil:
		return c.closeIO()
	}
	return nil
}

func (c *cpuStats) closeIO() error {
	var errs []error
	for _, l := range c.ioLinks {
		errs = append(errs, l.Close())
	}
	c.ioLinks = nil
	return errors.Join(errs...)
}

func (c *cpuStats) programs() map[string]*ebpf.Program {
	progs := c.filter.Programs()
	progs["proc_sched_switch"] = c.objs.ProcSchedSwitch
	progs["proc_bio_queue"] = c.objs.ProcBioQueue
	progs["proc_bio_complete"] = c.objs.ProcBioComplete
	progs["proc_rq_complete"] = c.objs.ProcRqComplete
	return progs
}

// drainIO returns the bio rows counted since the last drain, and removes
// them.
func (c *cpuStats) drainIO() (map[uint32]procProcIoVal, error) {
	out := map[uint32]procProcIoVal{}
	if err := bpfrt.TakeAll(c.objs.IoStats, func(tgid uint32, v procProcIoVal) { out[tgid] = v }); err != nil {
		return out, fmt.Errorf("proc: %w", err)
	}
	return out, nil
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
	errs := []error{c.closeIO()}
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
