package syscap

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
// write counts of /proc/<pid>/io taken around it, with the programs
// attached per syscall and on the raw tracepoints (EnvAttach).
func TestPrivilegedSyscallStats(t *testing.T) {
	for _, m := range []AttachMode{AttachSyscalls, AttachRaw} {
		t.Run(m.String(), func(t *testing.T) {
			t.Setenv(EnvAttach, m.String())
			testSyscallStats(t)
		})
	}
}

func testSyscallStats(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_enter"), bpfrt.HaveTPBTF("sys_exit"))
	const futexMs, epollMs = 30, 20
	files := map[FS]string{FSExt4: filepath.Join(t.TempDir(), "f"), FSTmpfs: filepath.Join(shmDir(t), "f"),
		FSOverlay: filepath.Join(probetest.Overlay(t), "f")}
	load := probetest.StartSysload(t, probetest.SysloadArgs{Reads: 1000, Writes: 700, Failures: 333, Yields: 50,
		FutexMs: futexMs, EpollMs: epollMs, Files: []string{files[FSExt4], files[FSTmpfs], files[FSOverlay]}})
	var lost uint64
	s, err := OpenStats(probetest.NewTargets(snoop.Whitelist, load.Pid()), func(n uint64) { lost += n })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := []SyscallClass{}
	for c := range FSClass(0, 0) {
		all = append(all, c)
	}
	all = append(all, ClassIoctl)
	if err := s.SetClasses(true, all...); err != nil {
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
	fsyncFD := fdOf(t, load.Pid(), filepath.Join(load.FsyncDir(), "fsync"))
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
	// too, entered before the programs attached, so not timed, and the 6
	// preads. write: the workload's, the fsync file's and 3 per file.
	if c := got[ClassRead].Calls; c != 1000 || c != r1-r0-1-6 {
		t.Errorf("read calls = %d, want 1000 = syscr delta %d - the gate read - 6 preads", c, r1-r0)
	}
	if c := got[ClassWrite].Calls; c != 710 || c != w1-w0 {
		t.Errorf("write calls = %d, want 710 = syscw delta %d", c, w1-w0)
	}
	// Per file system: each file's open, 3 writes, 2 preads, fsync; ext4
	// also has the fsync file's write and fsync. /dev/zero and /dev/null
	// (devtmpfs device nodes) are not file-system operations.
	for fs, path := range files {
		want := map[FSOp]uint64{OpOpen: 1, OpWrite: 3, OpRead: 2, OpFlush: 1}
		if fs == FSExt4 {
			want[OpWrite], want[OpFlush] = 4, 2
		}
		for op, n := range want {
			if r := got[FSClass(fs, op)]; r.Calls != n || r.NsMax == 0 || r.NsMax > r.NsSum {
				t.Errorf("%s: fs %d op %d: %+v, want %d calls", path, fs, op, r, n)
			}
		}
	}
	if r := got[ClassPread]; r.Calls != 6 {
		t.Errorf("pread calls = %d, want 6", r.Calls)
	}
	if r := got[ClassOpen]; r.Calls != 3 {
		t.Errorf("open calls = %d, want 3", r.Calls)
	}
	if f := got[ClassAll].Failed; f != 334 {
		t.Errorf("failed syscalls = %d, want 333 close(-1) + 1 futex timeout", f)
	}
	want := map[SyscallClass]uint64{ClassSchedYield: 50, ClassFutex: 1, ClassFsync: 4, ClassVfork: 1, ClassClone: 1, ClassEpollPwait: 1}
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
	// The ioctl: FS_IOC_GETFLAGS (_IOR('f', 1, long)) on the fsync file's
	// fd, found independently in /proc/<pid>/fd.
	if r := got[ClassIoctl]; r.Calls != 1 || !r.IoctlSet || r.IoctlCmd != unix.FS_IOC_GETFLAGS || int(r.IoctlFD) != fsyncFD {
		t.Errorf("ioctl: %+v, want 1 call of cmd %#x on fd %d", r, uint32(unix.FS_IOC_GETFLAGS), fsyncFD)
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

// shmDir is a directory on tmpfs (/dev/shm), removed when the test ends.
func shmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "galago-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fdOf is the fd of process pid open on path, from /proc/<pid>/fd.
func fdOf(t *testing.T, pid int, path string) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == path {
			fd, _ := strconv.Atoi(e.Name())
			return fd
		}
	}
	t.Fatalf("pid %d has no fd on %s", pid, path)
	return -1
}
