package baseinfo

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

var procF = struct {
	tgid, pgid, ppid, fdCount, fdFreePer                         int
	rchar, wchar, syscr, syscw, readBytes, writeBytes, cancelled int
	sharedClean, sharedDirty, privateClean, privateDirty         int
	referenced, lazyfree, swap, swapPss                          int
	minflt, majflt, utime, stime, cutime, cstime                 int
	priority, nice, numThreads, vmSize, pmSize, pmUtil           int
	cpu, cpuUtil, cpuUserUtil, cpuSystemUtil                     int
}{
	tgid: table.SystemProc.MustIndex("tgid"), pgid: table.SystemProc.MustIndex("pgid"),
	ppid: table.SystemProc.MustIndex("ppid"), fdCount: table.SystemProc.MustIndex("fd_count"),
	fdFreePer: table.SystemProc.MustIndex("fd_free_per"),
	rchar:     table.SystemProc.MustIndex("rchar_bytes"), wchar: table.SystemProc.MustIndex("wchar_bytes"),
	syscr: table.SystemProc.MustIndex("syscr_count"), syscw: table.SystemProc.MustIndex("syscw_count"),
	readBytes: table.SystemProc.MustIndex("read_bytes"), writeBytes: table.SystemProc.MustIndex("write_bytes"),
	cancelled:   table.SystemProc.MustIndex("cancelled_write_bytes"),
	sharedClean: table.SystemProc.MustIndex("shared_clean_size"), sharedDirty: table.SystemProc.MustIndex("shared_dirty_size"),
	privateClean: table.SystemProc.MustIndex("private_clean_size"), privateDirty: table.SystemProc.MustIndex("private_dirty_size"),
	referenced: table.SystemProc.MustIndex("referenced_size"), lazyfree: table.SystemProc.MustIndex("lazyfree_size"),
	swap: table.SystemProc.MustIndex("swap_data_size"), swapPss: table.SystemProc.MustIndex("swap_data_pss_size"),
	minflt: table.SystemProc.MustIndex("minor_pagefault_count"), majflt: table.SystemProc.MustIndex("major_pagefault_count"),
	utime: table.SystemProc.MustIndex("utime_jiffies"), stime: table.SystemProc.MustIndex("stime_jiffies"),
	cutime: table.SystemProc.MustIndex("cutime_jiffies"), cstime: table.SystemProc.MustIndex("cstime_jiffies"),
	priority: table.SystemProc.MustIndex("priority"), nice: table.SystemProc.MustIndex("nice"),
	numThreads: table.SystemProc.MustIndex("num_threads"), vmSize: table.SystemProc.MustIndex("vm_size"),
	pmSize: table.SystemProc.MustIndex("pm_size"), pmUtil: table.SystemProc.MustIndex("pm_util"),
	cpu: table.SystemProc.MustIndex("cpu"), cpuUtil: table.SystemProc.MustIndex("cpu_util"),
	cpuUserUtil: table.SystemProc.MustIndex("cpu_user_util"), cpuSystemUtil: table.SystemProc.MustIndex("cpu_system_util"),
}

// procSample is one process at one instant; the optional parts are nil
// when their file could not be read.
type procSample struct {
	stat    procfs.PIDStat
	io      *procfs.PIDIO
	smaps   *procfs.SmapsRollup
	fds     int
	fdsOK   bool
	maxFD   uint64
	maxFDOK bool
}

// procCollector fills system_proc for the observed processes from
// /proc/<pid>/{stat,io,smaps_rollup,fd,limits}.
type procCollector struct {
	prev  map[int]procSample
	prevT time.Time
	// prevUptime is the uptime read just before the previous sample's
	// process list, or -1: a process that started after it was entirely
	// inside the period.
	prevUptime float64
}

func (pc *procCollector) forget() { pc.prev = nil }

// observedPIDs is the process set of the probe's snoopers: the resolved
// processes in whitelist mode, every process not excluded in blacklist mode.
func observedPIDs(c *cycle) ([]int, error) {
	t := c.cfg.Targets
	if t == nil {
		return nil, nil
	}
	if t.Mode() == snoop.Whitelist {
		return t.PIDs(), nil
	}
	all, err := c.fs.PIDs()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, pid := range all {
		if t.Observed(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// optional classifies the error of an optional per-process file: a missing
// file or process means the process exited; any other error leaves the
// fields unset, logged once.
func optional(c *cycle, err error, key, fields string) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
	case errors.Is(err, fs.ErrPermission):
		c.unmeasured("proc.perm."+key, fields, err)
	default:
		c.unmeasured("proc.err."+key, fields, err)
	}
}

func (pc *procCollector) sample(c *cycle) {
	uptime, err := c.fs.Uptime()
	if err != nil {
		uptime = -1
	}
	pids, err := observedPIDs(c)
	if err != nil {
		c.failed("proc.list", "system_proc", err)
		pc.prev = nil
		return
	}
	cur := make(map[int]procSample, len(pids))
	for _, pid := range pids {
		st, err := c.fs.PIDStat(pid)
		if err != nil {
			continue // exited
		}
		s := procSample{stat: st}
		if v, err := c.fs.PIDIO(pid); err == nil {
			s.io = &v
		} else {
			optional(c, err, "io", "system_proc.rchar_bytes .. cancelled_write_bytes of processes whose /proc/<pid>/io is unreadable")
		}
		if v, err := c.fs.SmapsRollup(pid); err == nil {
			s.smaps = &v
		} else if !errors.Is(err, procfs.ErrNoUserMemory) {
			optional(c, err, "smaps", "system_proc.shared_clean_size .. swap_data_pss_size of processes whose /proc/<pid>/smaps_rollup is unreadable")
		}
		if n, err := c.fs.PIDFDCount(pid); err == nil {
			s.fds, s.fdsOK = n, true
		} else {
			optional(c, err, "fd", "system_proc.fd_count, fd_free_per of processes whose /proc/<pid>/fd is unreadable")
		}
		if l, err := c.fs.PIDLimits(pid); err == nil {
			if of, ok := l["Max open files"]; ok {
				s.maxFD, s.maxFDOK = of.Soft, true
			}
		} else {
			optional(c, err, "limits", "system_proc.fd_free_per of processes whose /proc/<pid>/limits is unreadable")
		}
		cur[pid] = s
	}
	if c.emit && pc.prev != nil {
		var memTotalKB uint64
		if m, err := c.fs.Meminfo(); err == nil {
			memTotalKB, _ = m.Get("MemTotal")
		}
		elapsed := c.now.Sub(pc.prevT)
		for _, pid := range pids {
			s, ok := cur[pid]
			if !ok {
				continue
			}
			base, ok := pc.prev[pid]
			switch {
			case ok && base.stat.StartTime == s.stat.StartTime:
			case pc.prevUptime >= 0 && float64(s.stat.StartTime)/procfs.UserHZ > pc.prevUptime:
				// Born during the period: all its counters are the period's.
				base = procSample{io: &procfs.PIDIO{}}
			default:
				continue // first seen now: this sample is its baseline
			}
			reportProc(c, pid, s, base, elapsed, memTotalKB)
		}
	}
	pc.prev, pc.prevT, pc.prevUptime = cur, c.now, uptime
}

var pageSize = uint64(os.Getpagesize())

func reportProc(c *cycle, pid int, cur, base procSample, elapsed time.Duration, memTotalKB uint64) {
	r := table.SystemProc.NewRecord(c.now, elapsed)
	st, bst := cur.stat, base.stat
	r.SetStr(procF.tgid, strconv.Itoa(pid))
	r.SetStr(procF.pgid, strconv.Itoa(st.PGID))
	r.SetStr(procF.ppid, strconv.Itoa(st.PPID))
	if cur.fdsOK {
		r.SetNum(procF.fdCount, float64(cur.fds))
		switch {
		case !cur.maxFDOK || cur.maxFD == 0:
		case cur.maxFD == procfs.Unlimited:
			r.SetNum(procF.fdFreePer, 100)
		default:
			r.SetNum(procF.fdFreePer, float64(delta(cur.maxFD, uint64(cur.fds)))*100/float64(cur.maxFD))
		}
	}
	if cur.io != nil && base.io != nil {
		a, b := cur.io, base.io
		for _, f := range []struct {
			field     int
			cur, prev uint64
		}{
			{procF.rchar, a.RChar, b.RChar}, {procF.wchar, a.WChar, b.WChar},
			{procF.syscr, a.SyscR, b.SyscR}, {procF.syscw, a.SyscW, b.SyscW},
			{procF.readBytes, a.ReadBytes, b.ReadBytes}, {procF.writeBytes, a.WriteBytes, b.WriteBytes},
			{procF.cancelled, a.CancelledWriteBytes, b.CancelledWriteBytes},
		} {
			r.SetNum(f.field, float64(delta(f.cur, f.prev)))
		}
	}
	if m := cur.smaps; m != nil {
		for _, f := range []struct {
			field int
			v     uint64
		}{
			{procF.sharedClean, m.SharedClean}, {procF.sharedDirty, m.SharedDirty},
			{procF.privateClean, m.PrivateClean}, {procF.privateDirty, m.PrivateDirty},
			{procF.referenced, m.Referenced}, {procF.lazyfree, m.LazyFree},
			{procF.swap, m.Swap}, {procF.swapPss, m.SwapPss},
		} {
			r.SetNum(f.field, float64(f.v))
		}
	}
	for _, f := range []struct {
		field     int
		cur, prev uint64
	}{
		{procF.minflt, st.MinFlt, bst.MinFlt}, {procF.majflt, st.MajFlt, bst.MajFlt},
		{procF.utime, st.UTime, bst.UTime}, {procF.stime, st.STime, bst.STime},
		{procF.cutime, st.CUTime, bst.CUTime}, {procF.cstime, st.CSTime, bst.CSTime},
	} {
		r.SetNum(f.field, float64(delta(f.cur, f.prev)))
	}
	r.SetNum(procF.priority, float64(st.Priority))
	r.SetNum(procF.nice, float64(st.Nice))
	r.SetNum(procF.numThreads, float64(st.NumThreads))
	r.SetNum(procF.vmSize, float64(st.VSize))
	rss := uint64(max(st.RSS, 0)) * pageSize
	r.SetNum(procF.pmSize, float64(rss))
	if memTotalKB > 0 {
		r.SetNum(procF.pmUtil, float64(rss)*100/float64(memTotalKB*1024))
	}
	r.SetNum(procF.cpu, float64(st.Processor))
	if ticks := elapsed.Seconds() * procfs.UserHZ; ticks > 0 {
		user := delta(st.UTime-min(st.GuestTime, st.UTime), bst.UTime-min(bst.GuestTime, bst.UTime))
		sys := delta(st.STime, bst.STime)
		r.SetNum(procF.cpuUtil, float64(delta(st.UTime+st.STime, bst.UTime+bst.STime))*100/ticks)
		r.SetNum(procF.cpuUserUtil, float64(user)*100/ticks)
		r.SetNum(procF.cpuSystemUtil, float64(sys)*100/ticks)
	}
	c.rt.Record(r)
}
