package snoop

// Privileged tier: real processes and a real runc container on this host.
// Runs when GALAGO_PRIVILEGED_TESTS=1 (CI always sets it), as root, with
//
//	apt-get install -y runc busybox-static
//
// (`make test-deps` installs both). With the variable set, missing root,
// runc or busybox is a failure, not a skip.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/identity/identitytest"
)

func privileged(t *testing.T) {
	t.Helper()
	if os.Getenv("GALAGO_PRIVILEGED_TESTS") != "1" {
		t.Skip("set GALAGO_PRIVILEGED_TESTS=1 to run (needs root, runc, busybox-static)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GALAGO_PRIVILEGED_TESTS=1 but not root")
	}
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// TestPrivilegedCommWatch runs a copy of sleep under a unique name and
// checks that a comm selector picks it up within a second of its start and
// sees it exit within a second (keeping it as an exited member, with its
// label), while galago's own child of the same name is never selected.
func TestPrivilegedCommWatch(t *testing.T) {
	privileged(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	name := "gsnp" + randHex(t, 8) // 12 chars: the whole name fits in comm
	bin := filepath.Join(t.TempDir(), name)
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}

	r := NewResolver("/", identity.NewResolver("/"), os.Getpid(), nil)
	defer r.Close()
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^" + name + "$", Label: map[string]string{"test": "comm"}}}}, Whitelist)
	defer s.Close()
	if len(s.PIDs()) != 0 {
		t.Fatalf("matched %v before the process started", s.PIDs())
	}

	// Our own child: galago's descendants are never selected.
	child := exec.Command(bin, "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	// An unrelated process: started through a shell that exits at once,
	// so it is reparented away from the test.
	start := time.Now()
	out, err := exec.Command("sh", "-c", bin+" 30 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()

	for !s.Observed(pid) {
		if time.Since(start) > time.Second {
			t.Fatalf("pid %d (%s) not observed within 1s; set %v", pid, name, s.PIDs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("observed %d after %v", pid, time.Since(start).Round(time.Millisecond))
	if got := s.PIDs(); !slices.Equal(got, []int{pid}) {
		t.Errorf("PIDs = %v, want only [%d] (not our child %d)", got, pid, child.Process.Pid)
	}
	if s.Labels(pid)["test"] != "comm" {
		t.Errorf("Labels = %v", s.Labels(pid))
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exited := time.Now()
	for r.DecidedAt(pid) != math.MaxUint64 {
		if time.Since(exited) > time.Second {
			t.Fatalf("pid %d not seen exiting 1s after it was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !s.Observed(pid) || s.Labels(pid)["test"] != "comm" || !slices.Equal(s.PIDs(), []int{pid}) {
		t.Errorf("exited member: observed %v, labels %v, PIDs %v", s.Observed(pid), s.Labels(pid), s.PIDs())
	}
}

// TestPrivilegedRuncContainer runs a busybox container with runc in a
// Kubernetes cgroup layout with CRI annotations, and checks identity and
// container and pod selectors against it.
func TestPrivilegedRuncContainer(t *testing.T) {
	privileged(t)
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not installed (apt-get install runc):", err)
	}
	busybox := "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Fatal("busybox not installed (apt-get install busybox-static):", err)
	}
	cg2, err := identity.FindCgroup2Mount("/")
	if err != nil {
		t.Fatal(err)
	}

	cid, uid, cgPath, bundle := identitytest.RuncBundle(t, runc, busybox, "/bin/sleep", "60")
	t.Cleanup(func() {
		_ = exec.Command(runc, "kill", cid, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", cid).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		identitytest.RemoveCgroupDirs(t, cgPath)
	})
	// The container inherits runc's stdio: a file, not a pipe that would
	// keep runc's caller waiting for the container's end.
	logPath := filepath.Join(t.TempDir(), "runc.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command(runc, "run", "--detach", "--bundle", bundle, cid)
	run.Stdout, run.Stderr = logf, logf
	err = run.Run()
	logf.Close()
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("runc run: %v\n%s", err, out)
	}
	out, err := exec.Command(runc, "state", cid).Output()
	if err != nil {
		t.Fatal("runc state:", err)
	}
	var state struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &state); err != nil || state.Pid <= 0 {
		t.Fatalf("runc state %s: %v", out, err)
	}
	pid := state.Pid
	fi, err := os.Stat(filepath.Join(cg2, cgPath))
	if err != nil {
		t.Fatal(err)
	}
	wantCg := fi.Sys().(*syscall.Stat_t).Ino

	ids := identity.NewResolver("/")
	// runc returns once the container is started; its init may not have
	// exec'd the container's program yet.
	var p identity.Process
	waitFor(t, "container init exec'd sleep", func() bool {
		var ok bool
		p, ok = ids.Process(pid)
		return ok && p.Comm == "sleep"
	})
	if p.Comm != "sleep" || p.Cmdline != "/bin/sleep 60" || p.ContainerID != cid || p.PodID != uid || p.CgroupID != wantCg {
		t.Errorf("Process(%d) = %+v\nwant comm sleep, container %s, pod %s, cgroup id %d", pid, p, cid, uid, wantCg)
	}
	c, ok := ids.Container(cid)
	want := identity.Container{ID: cid, Name: "galago-test", Image: "docker.io/library/busybox:test",
		PodID: uid, PodName: "galago-pod", PodNamespace: "galago-ns", CgroupID: wantCg}
	if !ok || c.ID != want.ID || c.Name != want.Name || c.Image != want.Image || c.PodID != want.PodID ||
		c.PodName != want.PodName || c.PodNamespace != want.PodNamespace || c.CgroupID != want.CgroupID {
		t.Errorf("Container = %+v, %v\nwant %+v", c, ok, want)
	}

	r := NewResolver("/", ids, os.Getpid(), nil)
	defer r.Close()
	for _, sel := range []Selectors{
		{ContainerID: []string{cid}},
		{ContainerID: []string{cid[:12]}},
		{PodID: []string{uid}},
		{ContainerName: []string{"galago-test"}},
	} {
		s := r.Watch(sel, Whitelist)
		if got := s.PIDs(); !slices.Equal(got, []int{pid}) {
			t.Errorf("%+v: PIDs = %v, want [%d]", sel, got, pid)
		}
		if got := s.CgroupIDs(); !slices.Equal(got, []uint64{wantCg}) {
			t.Errorf("%+v: CgroupIDs = %v, want [%d]", sel, got, wantCg)
		}
		s.Close()
	}

	// A process exec'd into the running container joins the set.
	s := r.Watch(Selectors{ContainerID: []string{cid}}, Whitelist)
	defer s.Close()
	if err := exec.Command(runc, "exec", "--detach", cid, "/bin/sleep", "61").Run(); err != nil {
		t.Fatalf("runc exec: %v", err)
	}
	waitFor(t, "exec'd container process observed", func() bool { return len(s.PIDs()) == 2 })
}
