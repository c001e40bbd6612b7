package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// TestPrivilegedSyscalls runs sysload (known syscalls), observed by pid,
// and lets it exit in the middle of a report period: its failures are
// exact, each timed syscall it made has its field and the others have
// none, and the latencies are bounded by the workload's timeouts and wall
// time.
func TestPrivilegedSyscalls(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_enter"), bpfrt.HaveTPBTF("sys_exit"))
	const futexMs, epollMs, failures = 40, 25, 250
	shm, err := os.MkdirTemp("/dev/shm", "galago-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shm)
	load := probetest.StartSysload(t, probetest.SysloadArgs{Reads: 300, Writes: 200, Failures: failures, Yields: 10,
		FutexMs: futexMs, EpollMs: epollMs,
		Files: []string{filepath.Join(t.TempDir(), "f"), filepath.Join(shm, "f"), filepath.Join(probetest.Overlay(t), "f")}})
	pid := load.Pid()
	const period = 700 * time.Millisecond
	p, rt := startFor(t, period, []int{pid}, "proc_syscall", "proc_io", "proc_net", "proc_offcpu", "proc_fs", "proc_ioctl")
	run0 := runtimeNs(t, pid)
	start := time.Now()
	load.Run(t)
	run1 := runtimeNs(t, pid) // blocked in its last read(0) until Exit
	fsyncFD := -1
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		for _, e := range ents {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l == filepath.Join(load.FsyncDir(), "fsync") {
				fsyncFD, _ = strconv.Atoi(e.Name())
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	exitAt := time.Now()
	load.Exit(t)
	wall := time.Since(start)
	key := func(r *table.Record) bool { return r.Str("tgid") == strconv.Itoa(pid) }
	// The last read(0) returns at exit: every failure is in by then, and
	// the process is gone before the period ends.
	rt.WaitRecords(t, "all failures reported", func(recs []*table.Record) bool {
		return sum(recs, table.ProcSyscall, "syscall_failed", key) >= failures+1
	})
	recs, _ := finish(t, p, rt, period)
	if got := sum(recs, table.ProcSyscall, "syscall_failed", key); got != failures+1 {
		t.Errorf("syscall_failed = %v, want %d close(-1) + 1 futex timeout", got, failures+1)
	}
	maxOf := func(tbl *table.Table, field string) (float64, bool) {
		var m float64
		set := false
		i := tbl.MustIndex(field)
		for _, r := range recs {
			if r.Table == tbl && key(r) && r.Values[i].Set {
				m, set = max(m, r.Values[i].Num), true
			}
		}
		return m, set
	}
	type want struct {
		tbl   *table.Table
		field string
		min   time.Duration // 0: only set
	}
	wants := []want{
		{table.ProcSyscallSched, "ns_futex", futexMs * time.Millisecond},
		{table.ProcSyscallSched, "ns_epoll_pwait", epollMs * time.Millisecond},
		{table.ProcSyscallSched, "ns_sched_yield", 0},
		{table.ProcSyscallIo, "ns_read", 0}, {table.ProcSyscallIo, "ns_write", 0}, {table.ProcSyscallIo, "ns_fsync", 0},
		{table.ProcSyscallFork, "ns_vfork", 0}, {table.ProcSyscallFork, "ns_clone", 0},
	}
	for _, fs := range []string{"ext4", "overlay", "tmpfs"} {
		tbl := table.Lookup("proc_" + fs)
		for _, op := range []string{"read", "write", "open", "flush"} {
			if tbl.HasField("ns_" + fs + "_" + op) {
				wants = append(wants, want{tbl: tbl, field: "ns_" + fs + "_" + op})
			}
		}
	}
	unset := []want{{tbl: table.ProcSyscallIo, field: "ns_mount"}, {tbl: table.ProcSyscallIo, field: "ns_umount"}}
	if probetest.SysloadHasFork() {
		wants = append(wants, want{table.ProcSyscallSched, "ns_epoll_wait", epollMs * time.Millisecond}, want{table.ProcSyscallFork, "ns_fork", 0})
	} else {
		unset = append(unset, want{tbl: table.ProcSyscallSched, field: "ns_epoll_wait"}, want{tbl: table.ProcSyscallFork, field: "ns_fork"})
	}
	for _, w := range wants {
		v, ok := maxOf(w.tbl, w.field)
		if !ok || v <= 0 || time.Duration(v) < w.min || time.Duration(v) > wall {
			t.Errorf("%s.%s = %v (set %v), want in [%v, wall %v]", w.tbl.Name, w.field, time.Duration(v), ok, w.min, wall)
		}
	}
	for _, w := range unset {
		if v, ok := maxOf(w.tbl, w.field); ok {
			t.Errorf("%s.%s = %v, want unset (never called)", w.tbl.Name, w.field, v)
		}
	}
	for _, r := range recs {
		if r.Table == table.ProcSyscallNet && key(r) {
			t.Errorf("proc_syscall_net row for a process that never called sendmsg/recvmsg: %+v", r.Values)
		}
		if !key(r) {
			t.Errorf("row of an unobserved process: %s %+v", r.Table.Name, r.Values)
		}
	}
	// The one ioctl: FS_IOC_GETFLAGS on the fsync file's fd (from
	// /proc/<pid>/fd), decoded: _IOR('f', 1, long).
	var ioctls []*table.Record
	for _, r := range recs {
		if r.Table == table.ProcSyscallIoctl && key(r) {
			ioctls = append(ioctls, r)
		}
	}
	if len(ioctls) != 1 || ioctls[0].Str("ioctl_fd") != strconv.Itoa(fsyncFD) || ioctls[0].Str("ioctl_dir") != "2" ||
		ioctls[0].Str("ioctl_type") != strconv.Itoa('f') || ioctls[0].Str("ioctl_nr") != "1" ||
		ioctls[0].Values[table.ProcSyscallIoctl.MustIndex("ioctl_size")].Num != 8 ||
		ioctls[0].Values[table.ProcSyscallIoctl.MustIndex("ns_ioctl")].Num <= 0 {
		for _, r := range ioctls {
			t.Logf("ioctl row %+v", r.Values)
		}
		t.Errorf("%d ioctl rows, want one of fd %d, dir 2, type %d, nr 1, size 8", len(ioctls), fsyncFD, 'f')
	}
	// Off-CPU time: from the wake-up at the gate to the wake-up at exit,
	// all of it but what the kernel's own run-time counter (schedstat)
	// says the process ran; waits of at least the futex and epoll
	// timeouts; I/O wait only in the 4 fsyncs (the calls that wait for a
	// disk), so at most 4 times the longest.
	off := time.Duration(sum(recs, table.ProcCpu, "offcpu_ns", key))
	iowait := time.Duration(sum(recs, table.ProcCpu, "iowait_ns", key))
	expect := exitAt.Sub(start) - time.Duration(run1-run0)
	if d := off - expect; d < -30*time.Millisecond || d > 30*time.Millisecond {
		t.Errorf("offcpu_ns = %v, want %v ± 30ms (gate to exit %v - ran %v)", off, expect, exitAt.Sub(start), time.Duration(run1-run0))
	}
	if min := (futexMs + 2*epollMs) * time.Millisecond; off < min {
		t.Errorf("offcpu_ns = %v, want >= the timeouts %v", off, min)
	}
	if fsync, _ := maxOf(table.ProcSyscallIo, "ns_fsync"); iowait > 4*time.Duration(fsync) {
		t.Errorf("iowait_ns = %v, want <= 4 fsyncs of at most %v", iowait, time.Duration(fsync))
	}
	t.Logf("offcpu %v (expected %v), iowait %v", off, expect, iowait)
}

// runtimeNs is the time the process ran on a CPU, from
// /proc/<pid>/schedstat (its first field, ns).
func runtimeNs(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		t.Fatalf("schedstat %q", b)
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
