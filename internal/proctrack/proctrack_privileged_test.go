package proctrack

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfrttest"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe/probetest"
)

var progNames = []string{"tp_btf_fork", "tp_btf_exec", "tp_btf_exit", "raw_tp_fork", "raw_tp_exec", "raw_tp_exit",
	"tp_btf_cgroup_mkdir", "tp_btf_cgroup_rmdir", "raw_tp_cgroup_mkdir", "raw_tp_cgroup_rmdir"}

// TestTrackerPrivileged forks and execs /bin/sleep and expects exactly its
// fork, exec and exit, with its pid, parent, comm, cgroup, start time (as
// /proc/<pid>/stat gives it) and cmdline (the parent's at fork, the new
// program's at exec), through both hook kinds; afterwards no program or
// link of ours is left in the kernel.
func TestTrackerPrivileged(t *testing.T) {
	// Both hook kinds are asserted, so both must exist.
	var hooks []error
	for _, tp := range []string{"sched_process_fork", "sched_process_exec", "sched_process_exit", "cgroup_mkdir", "cgroup_rmdir"} {
		hooks = append(hooks, bpfrt.HaveTPBTF(tp), bpfrt.HaveRawTracepoint(tp))
	}
	probetest.RequireHooks(t, hooks...)
	progs0, links0, err := bpfrttest.Resident(progNames...)
	if err != nil {
		t.Fatal(err)
	}
	selfComm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	cgroup, err := bpfrttest.SelfCgroupID()
	if err != nil {
		t.Fatal(err)
	}
	selfCmdline, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if len(selfCmdline) > CmdlineMax {
		selfCmdline = selfCmdline[:CmdlineMax]
	}

	for _, kind := range []string{"tp_btf", "raw_tp"} {
		t.Run(kind, func(t *testing.T) {
			var lost uint64
			tr, err := Open(Options{ForceRawTracepoint: kind == "raw_tp", OnLost: func(n uint64) { lost += n }, FlushInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if tr.HookKind() != kind {
				t.Fatalf("hook kind %s, want %s", tr.HookKind(), kind)
			}
			if p, l, err := bpfrttest.Resident(progNames...); err != nil || p != progs0+5 || l != links0+5 || !tr.Cgroups() {
				t.Errorf("while open: %d programs, %d links (%v), want %d and %d", p, l, err, progs0+5, links0+5)
			}

			var mu sync.Mutex
			var events []Event
			var child uint32
			tr.Subscribe(func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tr.Run(ctx) }()

			cmd := exec.Command("/bin/sleep", "0.2", "0.01")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			child = uint32(cmd.Process.Pid)
			checkHandledThrough(t, tr, child, &mu, &events)
			st, err := identity.ReadStat("/", cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			wantCg := makeCgroups(t)
			// Wait for the exit record and the last rmdir (bounded), then
			// stop reading.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				seen, rmdirs := false, 0
				for _, e := range events {
					seen = seen || (e.Type == Exit && e.TGID == child)
					if e.Type == CgroupRmdir && strings.HasPrefix(e.CgroupPath, cgTestPrefix) {
						rmdirs++
					}
				}
				seen = seen && rmdirs == len(wantCg)/2
				mu.Unlock()
				if seen {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}

			var mine, cgs []Event
			self := uint32(os.Getpid())
			for _, e := range events {
				if e.TGID == child {
					mine = append(mine, e)
				}
				if (e.Type == CgroupMkdir || e.Type == CgroupRmdir) && strings.HasPrefix(e.CgroupPath, cgTestPrefix) {
					cgs = append(cgs, e)
				}
			}
			checkCgroupEvents(t, cgs, wantCg, self)
			const args = "/bin/sleep\x000.2\x000.01\x00"
			want := []Event{
				{Type: Fork, PID: child, TGID: child, PPID: self, CgroupID: cgroup, Comm: strings.TrimSpace(string(selfComm)),
					Cmdline: string(selfCmdline), CmdlineSize: uint32(len(selfCmdline))},
				{Type: Exec, PID: child, TGID: child, PPID: self, CgroupID: cgroup, Comm: "sleep", Cmdline: args, CmdlineSize: uint32(len(args))},
				{Type: Exit, PID: child, TGID: child, PPID: self, CgroupID: cgroup, Comm: "sleep"},
			}
			if len(mine) != len(want) {
				t.Fatalf("events of pid %d: %+v, want %+v (lost %d)", child, mine, want, lost)
			}
			for i := range want {
				got := mine[i]
				if i > 0 && got.TimestampNs < mine[i-1].TimestampNs {
					t.Errorf("event %d goes back in time: %d < %d", i, got.TimestampNs, mine[i-1].TimestampNs)
				}
				got.TimestampNs = 0
				// /proc/<pid>/stat's starttime is start_boottime in clock
				// ticks (USER_HZ = 100).
				if got.StartBoottimeNs/10_000_000 != st.StartTime {
					t.Errorf("event %d: start %d ns, /proc says %d ticks", i, got.StartBoottimeNs, st.StartTime)
				}
				got.StartBoottimeNs = 0
				if i == 0 && got.CmdlineSize > uint32(len(selfCmdline)) {
					got.CmdlineSize = uint32(len(selfCmdline)) // the test binary's cmdline may exceed the capture
				}
				if got != want[i] {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, got, want[i])
				}
			}
			if lost != 0 {
				t.Errorf("lost %d records", lost)
			}
		})
	}
	if p, l, err := bpfrttest.WaitResident(5*time.Second, progs0, links0, progNames...); err != nil || p != progs0 || l != links0 {
		t.Errorf("after close: %d programs, %d links (%v), want %d and %d", p, l, err, progs0, links0)
	}
}

// cgTestPrefix starts the path of the cgroups makeCgroups makes.
const cgTestPrefix = "/galago-proctrack-test"

// makeCgroups makes and removes a cgroup and a child of it on the cgroup2
// mount and a cgroup in the v1 pids hierarchy (when the host is hybrid or
// v1), and returns the events that must report it, in order.
func makeCgroups(t *testing.T) []Event {
	t.Helper()
	mnt, err := bpfrt.HaveCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	type dir struct {
		path, rel string
		h         uint32
	}
	dirs := []dir{{mnt + cgTestPrefix, cgTestPrefix, 0}, {mnt + cgTestPrefix + "/c", cgTestPrefix + "/c", 0}}
	if h, ok := v1Hierarchy(t, "pids"); ok {
		dirs = append(dirs, dir{"/sys/fs/cgroup/pids" + cgTestPrefix, cgTestPrefix, h})
	}
	var mk, rm []Event
	for _, d := range dirs {
		if err := os.Mkdir(d.path, 0o755); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(d.path, &st); err != nil {
			t.Fatal(err)
		}
		mk = append(mk, Event{Type: CgroupMkdir, CgroupID: st.Ino, Hierarchy: d.h, CgroupPath: d.rel})
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i].path); err != nil {
			t.Fatal(err)
		}
		e := mk[i]
		e.Type = CgroupRmdir
		rm = append(rm, e)
	}
	return append(mk, rm...)
}

// v1Hierarchy is the hierarchy id of a v1 controller mounted at
// /sys/fs/cgroup/<controller>, from /proc/self/cgroup.
func v1Hierarchy(t *testing.T, controller string) (uint32, bool) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup/"+controller, &fs); err != nil || fs.Type != 0x27e0eb { // CGROUP_SUPER_MAGIC
		return 0, false
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && f[1] == controller {
			h, err := strconv.ParseUint(f[0], 10, 32)
			return uint32(h), err == nil
		}
	}
	return 0, false
}

// checkCgroupEvents compares the cgroup events of the test's paths with
// want: made and removed by this process, in order, nothing else.
func checkCgroupEvents(t *testing.T, got, want []Event, self uint32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("cgroup events %+v, want %+v", got, want)
	}
	for i, e := range got {
		if e.TGID != self || e.TimestampNs == 0 {
			t.Errorf("cgroup event %d by %d at %d, want by %d", i, e.TGID, e.TimestampNs, self)
		}
		e.PID, e.TGID, e.TimestampNs, e.Comm = 0, 0, 0, ""
		if e != want[i] {
			t.Errorf("cgroup event %d:\n got %+v\nwant %+v", i, e, want[i])
		}
	}
}

// checkHandledThrough: once HandledThrough passes a time taken after the
// child's exec (cmd.Start returns after it), the exec event has been
// handed to the subscribers.
func checkHandledThrough(t *testing.T, tr *Tracker, child uint32, mu *sync.Mutex, events *[]Event) {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	after := uint64(ts.Nano())
	deadline := time.Now().Add(5 * time.Second)
	for tr.HandledThrough() < after {
		if time.Now().After(deadline) {
			t.Fatalf("HandledThrough %d did not pass %d in 5 s", tr.HandledThrough(), after)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range *events {
		if e.Type == Exec && e.TGID == child {
			return
		}
	}
	t.Errorf("HandledThrough %d passed %d before the exec of %d was handled", tr.HandledThrough(), after, child)
}
