// Package hotspottest runs Java test programs for the privileged tests of
// the probes that read HotSpot JVMs (jvm, flamegraph).
package hotspottest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/procfs"
)

// Javac compiles the Java sources into a new temporary directory and
// returns it. The compiler runs with C1 only and the serial collector:
// it starts faster on a small machine.
func Javac(t *testing.T, sources ...string) string {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	args := append([]string{"-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-d", dir}, sources...)
	if out, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	t.Logf("javac %v", time.Since(start))
	return dir
}

// ContainerCommand runs (until ctx ends) the shell command java (which should exec the JVM
// with "-cp /proc/self/cwd") in a container of its own, new pid and mount
// namespaces and a tmpfs on /tmp: its hsperfdata, attach socket and perf
// map only reachable through /proc/<pid>/root, its pid 1 inside. The
// class path is classDir, the working directory, which stays on the real
// /tmp the tmpfs hides.
func ContainerCommand(ctx context.Context, classDir, java string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "unshare", "--pid", "--fork", "--mount", "--propagation", "private", "--kill-child",
		"sh", "-c", "mount -t tmpfs galago-jvm-test /tmp && "+java)
	cmd.Dir = classDir
	return cmd
}

// NetContainerCommand is ContainerCommand with a network namespace of its
// own too, its loopback up: what listens there is out of the host's
// reach.
func NetContainerCommand(ctx context.Context, classDir, java string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "unshare", "--pid", "--fork", "--mount", "--net", "--propagation", "private", "--kill-child",
		"sh", "-c", "ip link set lo up && mount -t tmpfs galago-jvm-test /tmp && "+java)
	cmd.Dir = classDir
	return cmd
}

// ContainerJVM is the pid of the JVM a ContainerCommand started (unshare
// being pid): the child of unshare, pid 1 in its namespace, with its
// hsperfdata in its own /tmp.
func ContainerJVM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("unshare's children: %q", f)
	}
	child, _ := strconv.Atoi(f[0])
	st, err := procfs.FS{}.PIDStatus(child)
	if err != nil || len(st.NStgid) != 2 || st.NStgid[1] != 1 {
		t.Fatalf("the container's JVM %d: nspids %v, %v", child, st.NStgid, err)
	}
	if _, err := os.Stat(filepath.Join("/proc", f[0], "root", "tmp", "hsperfdata_root", "1")); err != nil {
		t.Fatalf("the container's hsperfdata: %v", err)
	}
	return child
}
