package syscap

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe/probetest"
)

func TestParseAttachMode(t *testing.T) {
	for _, m := range []AttachMode{AttachAuto, AttachRaw, AttachSyscalls} {
		if got, err := ParseAttachMode(m.String()); err != nil || got != m {
			t.Errorf("ParseAttachMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseAttachMode("perf"); err == nil {
		t.Error("ParseAttachMode(perf): no error")
	}
	t.Setenv(EnvAttach, "kprobe")
	if _, err := resolveMode(nil, AttachAuto); err == nil {
		t.Errorf("%s=kprobe: no error", EnvAttach)
	}
}

// TestSyscallLists: the syscalls of each consumer's classes, and every
// name is a syscall event of this kernel (the names are SYSCALL_DEFINE's,
// not the syscall table's: a wrong one would leave its calls unseen).
func TestSyscallLists(t *testing.T) {
	if got := statsSyscalls(1<<ClassAll, false); len(got) != 0 {
		t.Errorf("failures only: %q, want none per syscall", got)
	}
	if got := statsSyscalls(1<<ClassRead|1<<ClassEpollPwait, false); !slices.Equal(got, []string{"read", "epoll_pwait", "epoll_pwait2"}) {
		t.Errorf("read and epoll_pwait: %q", got)
	}
	fs := statsSyscalls(0, true)
	for _, n := range []string{"read", "pread64", "write", "pwritev2", "openat", "fsync", "fdatasync"} {
		if !slices.Contains(fs, n) {
			t.Errorf("file-system rows: %q lacks %s", fs, n)
		}
	}
	if got := tprofNames(1 << TprofLock); !slices.Equal(got, []string{"futex"}) {
		t.Errorf("lock: %q", got)
	}
	if got := tprofNames(1 << TprofNet); !slices.Contains(got, "read") || !slices.Contains(got, "recvmmsg") {
		t.Errorf("net (file calls on sockets too): %q", got)
	}
	probetest.RequirePrivileged(t)
	all := slices.Clone(captureSyscalls)
	for c := SyscallClass(1); int(c) < NumClasses; c++ {
		all = append(all, classSyscalls[c]...)
	}
	all = append(all, tprofNames(1<<TprofFile|1<<TprofNet|1<<TprofSched|1<<TprofLock)...)
	for _, n := range all {
		if notOnArch(n) {
			continue
		}
		for _, dir := range []string{"enter", "exit"} {
			if _, err := os.Stat(syscallsRoot + "/events/syscalls/sys_" + dir + "_" + n); err != nil {
				t.Errorf("syscall %s: %v", n, err)
			}
		}
	}
}

// TestPrivilegedMountTracefs: with tracefs unmounted (in a private mount
// namespace of a child process), the per-syscall mode mounts it itself.
func TestPrivilegedMountTracefs(t *testing.T) {
	probetest.RequirePrivileged(t)
	if os.Getenv("SYSCAP_TRACEFS_CHILD") == "1" {
		runtime.LockOSThread() // the namespace is the thread's
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/sys/kernel/debug/tracing", syscallsRoot} {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
		if _, err := os.Stat(syscallsRoot + "/events"); err == nil {
			t.Fatal("tracefs still mounted")
		}
		if ok, err := perSyscall(); !ok {
			t.Fatalf("per-syscall tracepoints: %v", err)
		}
		if _, err := os.Stat(syscallsRoot + "/events/syscalls/sys_exit_read"); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrivilegedMountTracefs$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SYSCAP_TRACEFS_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestExitSyscalls: beside the sock hooks the exit program takes close
// and the *mmsg calls, and recvfrom/recvmsg only with a datagram protocol;
// without them every data syscall.
func TestExitSyscalls(t *testing.T) {
	if got := exitSyscalls(false, false); !slices.Equal(got, captureSyscalls) {
		t.Errorf("without the sock hooks: %v, want %v", got, captureSyscalls)
	}
	if got := exitSyscalls(false, true); !slices.Equal(got, captureSyscalls) {
		t.Errorf("without the sock hooks, DNS on: %v, want %v", got, captureSyscalls)
	}
	for _, c := range []struct {
		datagrams bool
		want      []string
	}{
		{false, []string{"close", "recvmmsg", "sendmmsg"}},
		{true, []string{"close", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg"}},
	} {
		got := slices.Sorted(slices.Values(exitSyscalls(true, c.datagrams)))
		if !slices.Equal(got, c.want) {
			t.Errorf("sock hooks, datagrams %v: %v, want %v", c.datagrams, got, c.want)
		}
		for _, n := range got {
			if !slices.Contains(captureSyscalls, n) {
				t.Errorf("%s is not a syscall the exit program handles", n)
			}
		}
	}
}
