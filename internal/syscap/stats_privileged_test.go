package syscap

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

// procIO reads syscr and syscw of /proc/<pid>/io.
func procIO(t *testing.T, pid int) (syscr, syscw uint64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "syscr":
			syscr = n
		case "syscw":
			syscw = n
		}
	}
	return syscr, syscw
}

// TestPrivilegedSyscallStats runs sysload (known numbers of syscalls of each
// class) and compares the rows with its workload and with the read and
// write counts of /proc/<pid>/io taken around it.
func TestPrivilegedSyscallStats(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_enter"), bpfrt.HaveTPBTF("sys_exit"))
	const futexMs, epollMs = 30, 20
	load := probetest.StartSysload(t, probetest.SysloadArgs{Reads: 1000, Writes: 700, Failures: 333, Yields: 50,
		FutexMs: futexMs, EpollMs: epollMs})
	var lost uint64
	s, err := OpenStats(probetest.NewTargets(snoop.Whitelist, load.Pid()), func(n uint64) { lost += n })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := []SyscallClass{}
	for c := range NumClasses {
		all = append(all, SyscallClass(c))
	}
	if err := s.SetClasses(all...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drain(); err != nil { // nothing of the workload yet
		t.Fatal(err)
	}
	r0, w0 := procIO(t, load.Pid())
	start := time.Now()
	load.Run(t)
	wall := time.Since(start)
	r1, w1 := procIO(t, load.Pid())
	rows, err := s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	got := map[SyscallClass]SyscallStat{}
	for _, r := range rows {
		if r.TGID != uint32(load.Pid()) {
			t.Errorf("row of an unobserved process: %+v", r)
			continue
		}
		got[r.Class] = r
	}
	// read: the workload's reads; /proc/<pid>/io counts the gate read(0)
	// too, entered before the programs attached, so not timed. write: the
	// workload's and the fsync file's.
	if c := got[ClassRead].Calls; c != 1000 || c != r1-r0-1 {
		t.Errorf("read calls = %d, want 1000 = syscr delta %d - the gate read", c, r1-r0)
	}
	if c := got[ClassWrite].Calls; c != 701 || c != w1-w0 {
		t.Errorf("write calls = %d, want 701 = syscw delta %d", c, w1-w0)
	}
	if f := got[ClassAll].Failed; f != 334 {
		t.Errorf("failed syscalls = %d, want 333 close(-1) + 1 futex timeout", f)
	}
	want := map[SyscallClass]uint64{ClassSchedYield: 50, ClassFutex: 1, ClassFsync: 1, ClassVfork: 1, ClassClone: 1, ClassEpollPwait: 1}
	if probetest.SysloadHasFork() {
		want[ClassFork] = 1
		want[ClassEpollWait] = 1
	} else {
		want[ClassEpollPwait] = 2 // arm64 has no epoll_wait syscall
	}
	for c, n := range want {
		if got[c].Calls != n {
			t.Errorf("class %v: calls = %d, want %d", c, got[c].Calls, n)
		}
	}
	if got[ClassFutex].Failed != 1 || got[ClassRead].Failed != 0 || got[ClassWrite].Failed != 0 {
		t.Errorf("failures per class: futex %d read %d write %d, want 1 0 0", got[ClassFutex].Failed, got[ClassRead].Failed, got[ClassWrite].Failed)
	}
	// Latencies: the timeouts bound them from below, the workload's wall
	// time from above.
	for _, c := range []struct {
		class SyscallClass
		min   time.Duration
	}{{ClassFutex, futexMs * time.Millisecond}, {ClassEpollPwait, epollMs * time.Millisecond}} {
		r := got[c.class]
		if time.Duration(r.NsMax) < c.min || time.Duration(r.NsSum) > wall || r.NsMax > r.NsSum {
			t.Errorf("class %v: max %v sum %v, want max >= %v, sum <= wall %v", c.class, time.Duration(r.NsMax), time.Duration(r.NsSum), c.min, wall)
		}
	}
	if r := got[ClassRead]; r.NsMax == 0 || r.NsMax > r.NsSum || time.Duration(r.NsSum) > wall {
		t.Errorf("read latency: max %d sum %d (wall %v)", r.NsMax, r.NsSum, wall)
	}
	if lost != 0 {
		t.Errorf("lost %d", lost)
	}
	// Drained: the rows are gone; the exit's last read(0) is the next row.
	load.Exit(t)
	rows, err = s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Class != ClassRead || rows[0].Calls != 1 {
		t.Errorf("after exit: %+v, want the one last read", rows)
	}
}
