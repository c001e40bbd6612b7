package proc

import (
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// column is one ns_* field: the largest latency of its class in the period.
type column struct {
	class syscap.SyscallClass
	field string
}

// latencyTable is one table of per-class syscall latencies and the
// sub-item that enables it.
type latencyTable struct {
	t    *table.Table
	item string
	cols []column
}

// latencyTables are gala-gopher's syscall tables. fork and epoll_wait do
// not exist on arm64 (glibc calls clone and epoll_pwait there): those
// fields stay unset.
var latencyTables = []latencyTable{
	{table.ProcSyscallIo, "proc_io", []column{
		{syscap.ClassMount, "ns_mount"}, {syscap.ClassUmount, "ns_umount"}, {syscap.ClassRead, "ns_read"},
		{syscap.ClassWrite, "ns_write"}, {syscap.ClassFsync, "ns_fsync"}}},
	{table.ProcSyscallNet, "proc_net", []column{{syscap.ClassSendmsg, "ns_sendmsg"}, {syscap.ClassRecvmsg, "ns_recvmsg"}}},
	{table.ProcSyscallSched, "proc_syscall", []column{
		{syscap.ClassSchedYield, "ns_sched_yield"}, {syscap.ClassFutex, "ns_futex"},
		{syscap.ClassEpollWait, "ns_epoll_wait"}, {syscap.ClassEpollPwait, "ns_epoll_pwait"}}},
	{table.ProcSyscallFork, "proc_syscall", []column{
		{syscap.ClassFork, "ns_fork"}, {syscap.ClassVfork, "ns_vfork"}, {syscap.ClassClone, "ns_clone"}}},
	{table.ProcExt4, "proc_fs", fsColumns(syscap.FSExt4, "ext4", true)},
	{table.ProcOverlay, "proc_fs", fsColumns(syscap.FSOverlay, "overlay", true)},
	{table.ProcTmpfs, "proc_fs", fsColumns(syscap.FSTmpfs, "tmpfs", false)}, // gala-gopher has no ns_tmpfs_open
}

func fsColumns(fs syscap.FS, name string, open bool) []column {
	cols := []column{{syscap.FSClass(fs, syscap.OpRead), "ns_" + name + "_read"}, {syscap.FSClass(fs, syscap.OpWrite), "ns_" + name + "_write"}}
	if open {
		cols = append(cols, column{syscap.FSClass(fs, syscap.OpOpen), "ns_" + name + "_open"})
	}
	return append(cols, column{syscap.FSClass(fs, syscap.OpFlush), "ns_" + name + "_flush"})
}

// classesFor are the syscall classes the kernel counts for the enabled
// sub-items (syscap.ClassAll: the failures of proc_syscall), and whether
// it counts the per-file-system rows (proc_fs).
func classesFor(has func(item string) bool) (fs bool, out []syscap.SyscallClass) {
	if has("proc_syscall") {
		out = append(out, syscap.ClassAll)
	}
	for _, lt := range latencyTables {
		if !has(lt.item) || lt.item == "proc_fs" {
			continue
		}
		for _, c := range lt.cols {
			out = append(out, c.class)
		}
	}
	if has("proc_ioctl") {
		out = append(out, syscap.ClassIoctl)
	}
	return has("proc_fs"), out
}

// ioctlRecord is the proc_syscall_ioctl row of a process's ioctl calls:
// ns_ioctl, the longest call, and that call's fd and command, decoded as
// the kernel's _IOC macros do (dir: 0 none, 1 write, 2 read, 3 both).
func ioctlRecord(key string, s *syscap.SyscallStat, end time.Time, period time.Duration) *table.Record {
	t := table.ProcSyscallIoctl
	rec := t.NewRecord(end, period)
	rec.SetStr(0, key)
	rec.SetNum(t.MustIndex("ns_ioctl"), float64(s.NsMax))
	if s.IoctlSet {
		cmd := s.IoctlCmd
		rec.SetStr(t.MustIndex("ioctl_fd"), strconv.FormatUint(uint64(s.IoctlFD), 10))
		rec.SetStr(t.MustIndex("ioctl_dir"), strconv.FormatUint(uint64(cmd>>30), 10))
		rec.SetStr(t.MustIndex("ioctl_type"), strconv.FormatUint(uint64(cmd>>8&0xff), 10))
		rec.SetStr(t.MustIndex("ioctl_nr"), strconv.FormatUint(uint64(cmd&0xff), 10))
		rec.SetNum(t.MustIndex("ioctl_size"), float64(cmd>>16&0x3fff))
	}
	return rec
}

// records turns one period's rows into table records. A process has a
// proc_syscall row when it made any counted call in the period (a measured
// count, 0 included: every syscall exit of an observed process is
// checked); a latency table has a row for a process when it made a call of
// one of its classes, and a field is set only when its syscall was called.
func records(rows []syscap.SyscallStat, has func(item string) bool, end time.Time, period time.Duration) []*table.Record {
	type proc struct {
		byClass [syscap.NumClasses]*syscap.SyscallStat // syscap.NumClasses: every class, fs rows included
	}
	procs := map[uint32]*proc{}
	var order []uint32
	for i := range rows {
		r := &rows[i]
		if int(r.Class) >= syscap.NumClasses {
			continue
		}
		p := procs[r.TGID]
		if p == nil {
			p = &proc{}
			procs[r.TGID] = p
			order = append(order, r.TGID)
		}
		p.byClass[r.Class] = r
	}
	var out []*table.Record
	for _, tgid := range order {
		p := procs[tgid]
		key := strconv.FormatUint(uint64(tgid), 10)
		if has("proc_syscall") {
			rec := table.ProcSyscall.NewRecord(end, period)
			rec.SetStr(0, key)
			var failed uint64
			if a := p.byClass[syscap.ClassAll]; a != nil {
				failed = a.Failed
			}
			rec.SetNum(table.ProcSyscall.MustIndex("syscall_failed"), float64(failed))
			out = append(out, rec)
		}
		if s := p.byClass[syscap.ClassIoctl]; s != nil && s.Calls > 0 && has("proc_ioctl") {
			out = append(out, ioctlRecord(key, s, end, period))
		}
		for _, lt := range latencyTables {
			if !has(lt.item) {
				continue
			}
			var rec *table.Record
			for _, c := range lt.cols {
				s := p.byClass[c.class]
				if s == nil || s.Calls == 0 {
					continue
				}
				if rec == nil {
					rec = lt.t.NewRecord(end, period)
					rec.SetStr(0, key)
				}
				rec.SetNum(lt.t.MustIndex(c.field), float64(s.NsMax))
			}
			if rec != nil {
				out = append(out, rec)
			}
		}
	}
	return out
}

// cpuRecords are the proc_cpu rows of one period: a process has one when a
// thread of it came back on CPU after an off-CPU interval that began while
// it was observed.
func cpuRecords(rows map[uint32]procProcCpuVal, end time.Time, period time.Duration) []*table.Record {
	out := make([]*table.Record, 0, len(rows))
	for tgid, v := range rows {
		rec := table.ProcCpu.NewRecord(end, period)
		rec.SetStr(0, strconv.FormatUint(uint64(tgid), 10))
		rec.SetNum(table.ProcCpu.MustIndex("offcpu_ns"), float64(v.OffcpuNs))
		rec.SetNum(table.ProcCpu.MustIndex("iowait_ns"), float64(v.IowaitNs))
		out = append(out, rec)
	}
	return out
}

// ioRecords are the proc_io and proc_page rows of one period. A process
// has a proc_io row (with bios) when it submitted a bio, or one it
// submitted completed, in the period; bio_latency is the longest
// submission-to-completion time of the period's completed bios, set only
// when one completed without error; hang_count is not reported (see the
// package documentation). It has a proc_page row when it loaded or
// dirtied page cache pages or dirtied buffers; reclaim_ns and
// access_pagecache are not reported.
func ioRecords(rows map[uint32]procProcIoVal, bio, pages bool, end time.Time, period time.Duration) []*table.Record {
	var out []*table.Record
	for tgid, v := range rows {
		key := strconv.FormatUint(uint64(tgid), 10)
		if t := table.ProcIo; bio && v.Less4kRead+v.Less4kWrite+v.Greater4kRead+v.Greater4kWrite+v.BioErr+v.BioDone > 0 {
			rec := t.NewRecord(end, period)
			rec.SetStr(0, key)
			rec.SetNum(t.MustIndex("less_4k_io_read"), float64(v.Less4kRead))
			rec.SetNum(t.MustIndex("less_4k_io_write"), float64(v.Less4kWrite))
			rec.SetNum(t.MustIndex("greater_4k_io_read"), float64(v.Greater4kRead))
			rec.SetNum(t.MustIndex("greater_4k_io_write"), float64(v.Greater4kWrite))
			rec.SetNum(t.MustIndex("bio_err_count"), float64(v.BioErr))
			if v.BioDone > 0 {
				rec.SetNum(t.MustIndex("bio_latency"), float64(v.BioLatencyMax))
			}
			out = append(out, rec)
		}
		if t := table.ProcPage; pages && v.LoadPageCache+v.MarkPageDirty+v.MarkBufferDirty > 0 {
			rec := t.NewRecord(end, period)
			rec.SetStr(0, key)
			rec.SetNum(t.MustIndex("load_page_cache"), float64(v.LoadPageCache))
			rec.SetNum(t.MustIndex("mark_page_dirty"), float64(v.MarkPageDirty))
			rec.SetNum(t.MustIndex("mark_buffer_dirty"), float64(v.MarkBufferDirty))
			out = append(out, rec)
		}
	}
	return out
}
