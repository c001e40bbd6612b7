package container

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

const allocChildEnv = "GALAGO_CONTAINER_ALLOC_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(allocChildEnv) != "" {
		os.Exit(allocChild())
	}
	os.Exit(m.Run())
}

// allocChild runs in a re-executed test binary: after a line on stdin it
// touches 8 MiB chunks until the OOM killer kills it.
func allocChild() int {
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	var keep [][]byte
	for len(keep) < 1<<16 {
		b := make([]byte, 8<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	return len(keep) // never reached: 512 GiB
}

// memoryCgroup makes a memory cgroup limited to limit bytes: cgroup v2's
// memory.max where the memory controller is on the v2 hierarchy, else
// v1's memory.limit_in_bytes (this CI host is hybrid). It returns the
// directory and the file whose oom_kill line counts the cgroup's kills.
func memoryCgroup(t *testing.T, limit int) (dir, events string) {
	t.Helper()
	name := fmt.Sprintf("galago-oom-test-%d", os.Getpid())
	if b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil && strings.Contains(string(b), "memory") {
		dir = filepath.Join("/sys/fs/cgroup/unified", name)
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "memory") {
		dir = filepath.Join("/sys/fs/cgroup", name)
	}
	if dir != "" {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		write(t, filepath.Join(dir, "memory.max"), strconv.Itoa(limit))
		write(t, filepath.Join(dir, "memory.swap.max"), "0")
		return dir, filepath.Join(dir, "memory.events")
	}
	dir = filepath.Join("/sys/fs/cgroup/memory", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	write(t, filepath.Join(dir, "memory.limit_in_bytes"), strconv.Itoa(limit))
	return dir, filepath.Join(dir, "memory.oom_control")
}

func write(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrivilegedProcOOM: an observed process outside any container
// allocates past its memory cgroup's limit. proc_oom must count exactly
// one kill for its tgid, with its comm, and exactly one proc event must
// name its pid and comm, as the cgroup's own oom_kill count says.
func TestPrivilegedProcOOM(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("mark_victim"))
	dir, events := memoryCgroup(t, 48<<20)

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), allocChildEnv+"=1")
	child := childtest.Start(t, cmd, childtest.Kill())
	child.Expect(t, "ready")
	pid := child.Pid()
	write(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	wantComm := strings.TrimSpace(string(comm))

	p := New(procfs.FS{}, identity.NewResolver("/"), withInterval(300*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	params := probe.DefaultParams()
	params.ReportEvent = 1
	cfg := probe.Config{Params: params, Targets: probetest.NewTargets(snoop.Whitelist, pid)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)

	child.Send(t, "go")
	err = child.Wait(t)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL", err)
	}
	if got := readKV(t, events)["oom_kill"]; got != 1 {
		t.Fatalf("the cgroup counted %d OOM kills, want 1", got)
	}
	key := strconv.Itoa(pid)
	rt.WaitTable(t, ProcOom, 1, func(r *table.Record) bool { return r.Str("tgid") == key })
	time.Sleep(700 * time.Millisecond) // two more periods: no second count
	recs, evs := rt.Take()
	kills := 0.0
	for _, r := range recs {
		if r.Table != ProcOom {
			continue
		}
		if r.Str("tgid") != key || r.Str("comm") != wantComm || r.Str("container_id") != "" {
			t.Errorf("proc_oom row %v, want tgid %s comm %s", r.Labels(), key, wantComm)
		}
		kills += r.Values[oomKills].Num
	}
	if kills != 1 {
		t.Errorf("proc_oom counted %v kills, want 1", kills)
	}
	var ours []event.Event
	for _, e := range evs {
		if e.Entity == "proc" && e.Metric == "oom_kills" {
			ours = append(ours, e)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d OOM events, want 1: %+v", len(ours), ours)
	}
	e := ours[0]
	if e.PID != pid || e.Comm != wantComm || e.EntityID != key || e.Severity != event.SeverityWarn ||
		!strings.HasPrefix(e.Message, fmt.Sprintf("Process(PID:%d, COMM:%s) killed by the OOM killer", pid, wantComm)) {
		t.Errorf("event %+v", e)
	}
}
