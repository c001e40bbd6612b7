package baseinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
)

// TestContainerDirSize checks the du -sb equivalent against du itself, on
// a tree with nested directories, a hard link (counted once) and symlinks
// (not followed), reached through /proc/self/root as a container's
// directory is.
func TestContainerDirSize(t *testing.T) {
	du, err := exec.LookPath("du")
	if err != nil {
		t.Skip("du (coreutils) not installed")
	}
	dir := t.TempDir()
	write := func(name string, n int) { writeFile(t, filepath.Join(dir, name), string(make([]byte, n))) }
	write("a", 1000)
	write("sub/b", 123457)
	write("sub/deeper/c", 7)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "sub", "etc-link")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(du, "-sb", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseUint(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := containerDirSize("/proc/self/root", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("containerDirSize = %d, du -sb = %d", got, want)
	}
	if _, err := containerDirSize("/proc/self/root", filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory measured")
	}
}

// TestContainerDirSizeStaysInRoot: a symlink inside the container that
// points to an absolute path resolves inside the container's root, not
// on the host.
func TestContainerDirSizeStaysInRoot(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "data", "logs", "x"), string(make([]byte, 5000)))
	// /var -> /data inside the "container".
	if err := os.Symlink("/data", filepath.Join(root, "var")); err != nil {
		t.Fatal(err)
	}
	got, err := containerDirSize(root, "/var/logs")
	if err != nil {
		t.Fatal(err)
	}
	want, err := dirSize(filepath.Join(root, "data", "logs"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got < 5000 {
		t.Errorf("size through the in-root symlink = %d, want %d", got, want)
	}
}

// writeFile creates path, and its directories, holding s.
func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOSVersion(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) { writeFile(t, filepath.Join(root, p), s) }
	write("etc/os-release", "NAME=\"openEuler\"\nID=\"openEuler\"\nPRETTY_NAME=\"openEuler 22.03 (LTS-SP1)\"\n")
	write("etc/openEuler-latest", "openeulerversion=openEuler-22.03-LTS-SP1\ncompiletime=2022-12-30-01-32-34\n")
	v, err := osVersion(procfs.FS{Root: root})
	if err != nil || v != "openEuler-22.03-LTS-SP1" {
		t.Errorf("openEuler: %q %v", v, err)
	}
	write("etc/os-release", "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
	if v, err := osVersion(procfs.FS{Root: root}); err != nil || v != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("debian: %q %v", v, err)
	}
}

func TestHostType(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) { writeFile(t, filepath.Join(root, p), s) }
	fs := procfs.FS{Root: root}
	write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu sse2\n")
	write("sys/class/dmi/id/sys_vendor", "Dell Inc.\n")
	if got := hostType(fs); got != "pm" {
		t.Errorf("bare metal: %s", got)
	}
	write("sys/class/dmi/id/product_name", "VMware Virtual Platform\n")
	if got := hostType(fs); got != "vm" {
		t.Errorf("VMware DMI: %s", got)
	}
	os.Remove(filepath.Join(root, "sys/class/dmi/id/product_name"))
	write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor sse2\n")
	if got := hostType(fs); got != "vm" {
		t.Errorf("hypervisor flag: %s", got)
	}
}

func TestDFMounts(t *testing.T) {
	all, err := procfs.FS{Root: "testdata/t1"}.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range dfMounts(all) {
		got = append(got, m.MountPoint+"="+m.Source)
	}
	// proc, sysfs and devpts are pseudo filesystems; the first /dev/shm is
	// covered by the second; /mnt/bind is /dev/sda1 again. cgroup2 stays
	// here and is dropped later for having no blocks.
	want := "/=/dev/sda1,/dev/shm=shm,/ro=small,/sys/fs/cgroup/unified=cgroup2"
	if strings.Join(got, ",") != want {
		t.Errorf("df mounts %v, want %s", got, want)
	}
}

func TestSameNetns(t *testing.T) {
	if err := sameNetns(procfs.FS{}); err != nil {
		t.Errorf("host root: %v", err)
	}
	root := t.TempDir()
	if err := sameNetns(procfs.FS{Root: root}); err == nil {
		t.Error("a root without /proc/1/ns/net passed")
	}
	ns := filepath.Join(root, "proc", "1", "ns")
	if err := os.MkdirAll(ns, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/ns/net", filepath.Join(ns, "net")); err != nil {
		t.Fatal(err)
	}
	if err := sameNetns(procfs.FS{Root: root}); err != nil {
		t.Errorf("root whose init shares our namespace: %v", err)
	}
	if err := os.Remove(filepath.Join(ns, "net")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/ns/mnt", filepath.Join(ns, "net")); err != nil {
		t.Fatal(err)
	}
	if err := sameNetns(procfs.FS{Root: root}); err == nil {
		t.Error("a different namespace passed")
	}
}

// TestStatfsHung: a mount whose statfs blocks is skipped after the
// timeout, not asked again while the call is pending, and reported again
// once it returns; the other mounts are reported throughout.
func TestStatfsHung(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitFS
	h := newHarness(t, cfg)
	h.advance()
	fc := collectorOf[*fsCollector](h.p)
	release := make(chan struct{})
	var mu sync.Mutex
	roCalls := 0
	fc.timeout = 300 * time.Millisecond
	fc.statfs = func(_ procfs.FS, mp string) (procfs.FSUsage, error) {
		if mp == "/ro" {
			mu.Lock()
			roCalls++
			mu.Unlock()
			<-release
		}
		return statfs[mp], nil
	}
	mounts := func() string {
		recs, _ := h.rt.Take()
		return strings.Join(keysOf(byKey(recs)), ",")
	}
	h.p.collect(t1.Add(period))
	if got := mounts(); got != "system_df:/,system_df:/dev/shm" {
		t.Errorf("while /ro hangs: %s", got)
	}
	h.p.collect(t1.Add(2 * period))
	if got := mounts(); got != "system_df:/,system_df:/dev/shm" {
		t.Errorf("while /ro still hangs: %s", got)
	}
	mu.Lock()
	if roCalls != 1 {
		t.Errorf("statfs(/ro) called %d times while pending", roCalls)
	}
	mu.Unlock()
	close(release)
	probetest.WaitFor(t, "the hung call to return", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return !fc.hung["/ro"]
	})
	h.p.collect(t1.Add(3 * period))
	if got := mounts(); got != "system_df:/,system_df:/dev/shm,system_df:/ro" {
		t.Errorf("after /ro returned: %s", got)
	}
	if n := strings.Count(h.rt.Logs(), "system_df skips a mount\" mount=/ro"); n != 1 {
		t.Errorf("skip logged %d times, want once", n)
	}
}
