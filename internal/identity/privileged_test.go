package identity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// TestLearnCgroupByIDPrivileged: a process known only from a lifecycle
// event (pid, comm, cgroup id) that exited at once gets its container and
// pod from the cgroup's path, found on the real cgroup2 mount by the
// cgroup id alone (its file handle), as for a 1 ms process in a pod.
func TestLearnCgroupByIDPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	mnt, err := bpfrt.HaveCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const pod = "5a1f0c7e-9b2d-4c3e-8f10-112233445566"
	base := filepath.Join(mnt, "galago-identity-test")
	dir := filepath.Join(base, "kubepods", "besteffort", "pod"+pod, cid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for d := dir; strings.HasPrefix(d, base); d = filepath.Dir(d) {
			_ = os.Remove(d)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	r := identity.NewResolver("/", identity.WithCgroup2Mount(mnt))
	// A pid no process has (pid_max is at most 2^22).
	const gone = 1 << 23
	r.Learn(identity.Process{PID: gone, Comm: "curl", StartTime: 5, CgroupID: st.Ino})
	p, ok := r.Process(gone)
	if !ok || !p.Exited || p.ContainerID != cid || p.PodID != pod || p.Comm != "curl" {
		t.Errorf("got %+v %v, want curl in container %s of pod %s, exited", p, ok, cid, pod)
	}
}
