package proc

import (
	"errors"
	"fmt"
	"maps"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
)

// hookGroup is the programs of one sub-item: attached while it is on,
// detached (no cost) while it is off.
type hookGroup struct {
	on      *ebpf.Variable // set to 1 while attached; nil: none
	progs   map[string]*ebpf.Program
	links   []link.Link
	missing error // a tracepoint the group needs is missing
}

func (g *hookGroup) set(on bool) error {
	if on && g.missing != nil {
		return nil // reported once at start
	}
	if g.on != nil {
		v := uint32(0)
		if on {
			v = 1
		}
		if err := g.on.Set(v); err != nil {
			return fmt.Errorf("proc: set run-time switch: %w", err)
		}
	}
	switch {
	case on && g.links == nil:
		for name, p := range g.progs {
			l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				return errors.Join(fmt.Errorf("proc: attach %s: %w", name, err), g.close())
			}
			g.links = append(g.links, l)
		}
	case !on && g.links != nil:
		return g.close()
	}
	return nil
}

func (g *hookGroup) close() error {
	err := bpfrt.CloseLinks(g.links)
	g.links = nil
	return err
}

// cpuStats is the probe's own object (proc.bpf.c): off-CPU and I/O-wait
// time per process from sched_switch (proc_offcpu), block I/O by issuing
// process from the bio tracepoints (proc_io) and page cache activity
// (proc_pagecache). Not safe for concurrent use: the probe holds its lock
// around it.
type cpuStats struct {
	objs               procObjects
	offcpu, bio, pages hookGroup
	dns                *dnsHooks // proc_dns: nil while off
	filter             *bpfrt.FilterSync
	lost               bpfrt.LostCounter
}

// missingHooks are the tracepoints of each group that this kernel lacks.
func missingHooks(tps ...string) error {
	var errs []error
	for _, tp := range tps {
		errs = append(errs, bpfrt.HaveTPBTF(tp))
	}
	return errors.Join(errs...)
}

func openCPU(t snoop.Targets, onLost func(uint64)) (*cpuStats, error) {
	if err := bpfrt.HaveTPBTF("sched_switch"); err != nil {
		return nil, err
	}
	spec, lerr := loadProc()
	if lerr != nil {
		return nil, fmt.Errorf("proc: load spec: %w", lerr)
	}
	if lerr := bpfrt.AllocOnInsert(spec, bpfrt.FilterMaps...); lerr != nil {
		return nil, fmt.Errorf("proc: %w", lerr)
	}
	c := &cpuStats{}
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("proc: load BPF object: %w", err)
	}
	o := &c.objs
	c.offcpu = hookGroup{progs: map[string]*ebpf.Program{"proc_sched_switch": o.ProcSchedSwitch}}
	c.bio = hookGroup{on: o.IoOn, missing: missingHooks("block_bio_queue", "block_bio_complete", "block_rq_complete"),
		progs: map[string]*ebpf.Program{"proc_bio_queue": o.ProcBioQueue, "proc_bio_complete": o.ProcBioComplete, "proc_rq_complete": o.ProcRqComplete}}
	c.pages = hookGroup{on: o.PageOn, missing: missingHooks("mm_filemap_add_to_page_cache", "writeback_dirty_folio", "block_dirty_buffer"),
		progs: map[string]*ebpf.Program{"proc_page_add": o.ProcPageAdd, "proc_page_dirty": o.ProcPageDirty, "proc_buffer_dirty": o.ProcBufferDirty}}
	c.lost = bpfrt.LostCounter{Map: o.CpuLost, Bios: o.BioStarts, OnLost: onLost}
	var err error
	if c.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: o.GalagoFilterCfg, TGIDs: o.FilterTgids, Cgroups: o.FilterCgroups,
		Pending: o.FilterPending, Decided: o.FilterDecided, Lost: o.FilterPendingLost,
		ForkProgram: o.GalagoFilterFork, ExecProgram: o.GalagoFilterExec,
	}, onLost); err != nil {
		return nil, errors.Join(fmt.Errorf("proc: %w", err), c.close())
	}
	if err := c.filter.Sync(t); err != nil {
		return nil, errors.Join(fmt.Errorf("proc: %w", err), c.close())
	}
	return c, nil
}

func (c *cpuStats) programs() map[string]*ebpf.Program {
	progs := c.filter.Programs()
	for _, g := range []*hookGroup{&c.offcpu, &c.bio, &c.pages} {
		maps.Copy(progs, g.progs)
	}
	progs["proc_gai_enter"] = c.objs.ProcGaiEnter
	progs["proc_ghbn_enter"] = c.objs.ProcGhbnEnter
	progs["proc_dns_return"] = c.objs.ProcDnsReturn
	return progs
}

// drain returns the rows counted since the last drain, and removes them.
func (c *cpuStats) drain() (cpu map[uint32]procProcCpuVal, io map[uint32]procProcIoVal, err error) {
	cpu, io = map[uint32]procProcCpuVal{}, map[uint32]procProcIoVal{}
	errs := []error{
		bpfrt.TakeAll(c.objs.CpuStats, func(tgid uint32, v procProcCpuVal) { cpu[tgid] = v }),
		bpfrt.TakeAll(c.objs.IoStats, func(tgid uint32, v procProcIoVal) { io[tgid] = v }),
		c.lost.Poll(),
	}
	if err := errors.Join(errs...); err != nil {
		return cpu, io, fmt.Errorf("proc: %w", err)
	}
	return cpu, io, nil
}

func (c *cpuStats) close() error {
	var errs []error
	for _, g := range []*hookGroup{&c.offcpu, &c.bio, &c.pages} {
		errs = append(errs, g.close())
	}
	if c.dns != nil {
		errs = append(errs, c.dns.close())
		c.dns = nil
	}
	if c.filter != nil {
		errs = append(errs, c.filter.Close())
		c.filter = nil
	}
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}
