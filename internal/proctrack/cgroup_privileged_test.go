package proctrack_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/identity/identitytest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/proctrack"
	"github.com/galago-project/galago/internal/snoop"
)

// In proctrack's test binary, not snoop's: TestTrackerPrivileged counts
// the proctrack programs loaded on the machine, so no other test of the
// same run may load them at the same time.

// TestPrivilegedRuncCgroupLifecycle follows a runc container from the
// kernel's cgroup_mkdir and cgroup_rmdir (through proctrack, wired as the
// daemon wires it): once `runc create` returns (its cgroups made, its
// program not started), identity lists it live with exactly its cgroup2 id
// and pod, names it from its state file, and container-name and pod
// selectors hold exactly its cgroup; once `runc delete` returns, it is no
// longer live and the sets hold no cgroup. Each within a second.
func TestPrivilegedRuncCgroupLifecycle(t *testing.T) {
	probetest.RequirePrivileged(t)
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not installed (apt-get install runc):", err)
	}
	cg2, err := identity.FindCgroup2Mount("/")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := proctrack.Open(proctrack.Options{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Cgroups() {
		t.Fatal("cgroup_mkdir/cgroup_rmdir not attached")
	}
	ids := identity.NewResolver("/")
	r := snoop.NewResolver("/", ids, os.Getpid(), nil)
	defer r.Close()
	tr.Subscribe(func(e proctrack.Event) {
		switch e.Type {
		case proctrack.Exec, proctrack.Fork:
			r.Notify(e.Process())
		case proctrack.Exit:
			r.NotifyExit(int(e.TGID))
		case proctrack.CgroupMkdir, proctrack.CgroupRmdir:
			r.NotifyCgroup(e.Cgroup())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		tr.Close()
	}()

	cid, uid, cgPath, bundle := identitytest.RuncBundle(t, runc, "/bin/busybox", "/bin/sleep", "60")
	t.Cleanup(func() {
		_ = exec.Command(runc, "delete", "--force", cid).Run()
		identitytest.RemoveCgroupDirs(t, cgPath)
	})
	byName := r.Watch(snoop.Selectors{ContainerName: []string{"galago-test"}}, snoop.Whitelist)
	defer byName.Close()
	byPod := r.Watch(snoop.Selectors{PodID: []string{uid}}, snoop.Whitelist)
	defer byPod.Close()

	before := time.Now()
	// The container inherits runc's stdio: a file, not a pipe that would
	// keep runc's caller waiting for the container's end.
	logPath := filepath.Join(t.TempDir(), "runc.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	create := exec.Command(runc, "create", "--bundle", bundle, cid)
	create.Stdout, create.Stderr = logf, logf
	err = create.Run()
	logf.Close()
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("runc create: %v\n%s", err, out)
	}
	created := time.Now()
	fi, err := os.Stat(filepath.Join(cg2, cgPath))
	if err != nil {
		t.Fatal(err)
	}
	wantCg := fi.Sys().(*syscall.Stat_t).Ino
	eventually(t, "container live, named and selected", func() bool {
		c, _ := ids.Container(cid)
		live := ids.LiveContainers()
		return slices.Equal(byName.CgroupIDs(), []uint64{wantCg}) && slices.Equal(byPod.CgroupIDs(), []uint64{wantCg}) &&
			c.Name == "galago-test" && len(live) > 0 && len(live[0].CgroupIDs) > 0
	})
	t.Logf("added %v after runc create returned", time.Since(created).Round(time.Millisecond))
	live := ids.LiveContainers()
	if len(live) != 1 || live[0].ID != cid || live[0].PodID != uid || !slices.Equal(live[0].CgroupIDs, []uint64{wantCg}) ||
		live[0].Since.Before(before) || live[0].Since.After(created) {
		t.Errorf("live %+v\nwant only %s of pod %s, cgroup %d, made during runc create", live, cid, uid, wantCg)
	}
	if c, ok := ids.Container(cid); !ok || c.PodName != "galago-pod" || c.CgroupID != wantCg {
		t.Errorf("Container = %+v %v", c, ok)
	}

	// A galago started after the container (identity and snoop resolvers
	// that never saw its cgroup_mkdir events), wired as the daemon is: the
	// scan at start makes it live as the events did, with a directory in
	// every hierarchy, and the hierarchies' rmdir events remove it.
	ids2 := identity.NewResolver("/")
	r2 := snoop.NewResolver("/", ids2, os.Getpid(), nil)
	defer r2.Close()
	defer tr.Subscribe(func(e proctrack.Event) {
		if e.Type == proctrack.CgroupMkdir || e.Type == proctrack.CgroupRmdir {
			r2.NotifyCgroup(e.Cgroup())
		}
	})()
	byName2 := r2.Watch(snoop.Selectors{ContainerName: []string{"galago-test"}}, snoop.Whitelist)
	defer byName2.Close()
	scanned := time.Now()
	evs, err := identity.ScanCgroups("/")
	if err != nil {
		t.Fatal(err)
	}
	hiers := map[uint32]bool{}
	for _, ev := range evs {
		if identity.ContainerIDFromPath(ev.Path) == cid && ev.Path == cgPath {
			hiers[ev.Hierarchy] = true
		}
		r2.NotifyCgroup(ev)
	}
	if want := v1Hierarchies(t) + 1; len(hiers) != want || !hiers[0] {
		t.Errorf("scan found the container's directory in hierarchies %v, want cgroup2 (0) and the %d v1 ones", hiers, want-1)
	}
	eventually(t, "container found by the scan live, named and selected", func() bool {
		c, _ := ids2.Container(cid)
		return slices.Equal(byName2.CgroupIDs(), []uint64{wantCg}) && c.Name == "galago-test"
	})
	// Other containers of the machine may be live too: only this one is
	// checked.
	if c := liveOf(ids2, cid); c == nil || c.PodID != uid || !slices.Equal(c.CgroupIDs, []uint64{wantCg}) || c.Since.Before(scanned) {
		t.Errorf("scanned live %+v\nwant %s of pod %s, cgroup %d, since the scan", ids2.LiveContainers(), cid, uid, wantCg)
	}

	if out, err := exec.Command(runc, "delete", "--force", cid).CombinedOutput(); err != nil {
		t.Fatalf("runc delete: %v\n%s", err, out)
	}
	deleted := time.Now()
	eventually(t, "container forgotten", func() bool {
		return len(ids.LiveContainers()) == 0 && len(byName.CgroupIDs()) == 0 && len(byPod.CgroupIDs()) == 0 &&
			liveOf(ids2, cid) == nil && len(byName2.CgroupIDs()) == 0
	})
	t.Logf("removed %v after runc delete returned", time.Since(deleted).Round(time.Millisecond))
}

// liveOf is container cid among ids' live containers, nil if not live.
func liveOf(ids *identity.CachingResolver, cid string) *identity.LiveContainer {
	for _, c := range ids.LiveContainers() {
		if c.ID == cid {
			return &c
		}
	}
	return nil
}

// v1Hierarchies counts the cgroup v1 hierarchies of this host (the
// non-zero ids of /proc/self/cgroup).
func v1Hierarchies(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, "0:") {
			n++
		}
	}
	return n
}

// eventually fails t unless cond holds within a second.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 1s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
