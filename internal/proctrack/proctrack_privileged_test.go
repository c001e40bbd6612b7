package proctrack

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfrttest"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe/probetest"
)

var progNames = []string{"tp_btf_fork", "tp_btf_exec", "tp_btf_exit", "raw_tp_fork", "raw_tp_exec", "raw_tp_exit"}

// TestTrackerPrivileged forks and execs /bin/sleep and expects exactly its
// fork, exec and exit, with its pid, parent, comm, cgroup, start time (as
// /proc/<pid>/stat gives it) and cmdline (the parent's at fork, the new
// program's at exec), through both hook kinds; afterwards no program or
// link of ours is left in the kernel.
func TestTrackerPrivileged(t *testing.T) {
	// Both hook kinds are asserted, so both must exist.
	var hooks []error
	for _, tp := range []string{"sched_process_fork", "sched_process_exec", "sched_process_exit"} {
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
			if p, l, err := bpfrttest.Resident(progNames...); err != nil || p != progs0+3 || l != links0+3 {
				t.Errorf("while open: %d programs, %d links (%v), want %d and %d", p, l, err, progs0+3, links0+3)
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
			st, err := identity.ReadStat("/", cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			// Wait for the exit record (bounded), then stop reading.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				seen := false
				for _, e := range events {
					seen = seen || (e.Type == Exit && e.TGID == child)
				}
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

			var mine []Event
			for _, e := range events {
				if e.TGID == child {
					mine = append(mine, e)
				}
			}
			self := uint32(os.Getpid())
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
