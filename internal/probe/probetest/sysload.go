package probetest

import (
	_ "embed"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/childtest"
)

//go:embed testdata/sysload.c
var sysloadSrc []byte

// SysloadArgs is the workload of the sysload program (testdata/sysload.c):
// exact numbers of syscalls, for ground truth in privileged tests.
type SysloadArgs struct {
	Reads, Writes, Failures, Yields int
	FutexMs, EpollMs                int
	// Files get one open, three writes, two preads and one fsync each.
	Files []string
}

// Sysload is a running sysload process, stopped at the gate before its
// workload.
type Sysload struct {
	Cmd   *exec.Cmd
	stdin io.WriteCloser
	done  *os.File
}

// StartSysload builds sysload with gcc (t fails without it) and starts it;
// it returns once the process has finished starting up (everything it does
// from then on is the documented workload).
func StartSysload(t *testing.T, a SysloadArgs) *Sysload {
	t.Helper()
	bin := BuildC(t, "sysload", sysloadSrc)
	dir := filepath.Dir(bin)
	doneR, doneW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{strconv.Itoa(a.Reads), strconv.Itoa(a.Writes), strconv.Itoa(a.Failures),
		strconv.Itoa(a.Yields), strconv.Itoa(a.FutexMs), strconv.Itoa(a.EpollMs), filepath.Join(dir, "fsync")}, a.Files...)
	cmd := exec.Command(bin, args...)
	stdin := StartReady(t, cmd, doneW) // fd 4: closed when done
	doneW.Close()
	s := &Sysload{Cmd: cmd, stdin: stdin, done: doneR}
	t.Cleanup(func() { doneR.Close() })
	return s
}

// StartReady starts cmd with a pipe's write end as fd 3 (then extra as fds
// 4, ...) and its stdin a pipe, and returns once the program has closed fd
// 3 to say it is ready, with the write end of its stdin. The process is
// waited for when the test ends.
func StartReady(t *testing.T, cmd *exec.Cmd, extra ...*os.File) io.WriteCloser {
	t.Helper()
	cmd.ExtraFiles = extra
	return childtest.Start(t, cmd, childtest.ReadyFD()).Stdin
}

// FsyncDir is the directory of the file the workload writes and fsyncs
// (on the file system of t.TempDir).
func (s *Sysload) FsyncDir() string { return filepath.Dir(s.Cmd.Args[7]) }

// BuildC compiles the C program src with gcc (t fails without it) into a
// temporary directory and returns the executable's path.
func BuildC(t *testing.T, name string, src []byte, flags ...string) string {
	t.Helper()
	RequireTools(t, "gcc")
	dir := t.TempDir()
	path := filepath.Join(dir, name+".c")
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", append(append([]string{"-O2", "-Wall", "-Werror"}, flags...), "-o", bin, path)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, out)
	}
	return bin
}

// Pid is the process id.
func (s *Sysload) Pid() int { return s.Cmd.Process.Pid }

// Run lets the workload run and waits until it is done; the process then
// waits in one more read(0) for Exit.
func (s *Sysload) Run(t *testing.T) {
	t.Helper()
	if _, err := s.stdin.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, s.done)
}

// Exit closes stdin and waits for the process to exit; it fails t if the
// workload failed.
func (s *Sysload) Exit(t *testing.T) {
	t.Helper()
	s.stdin.Close()
	if err := s.Cmd.Wait(); err != nil {
		t.Fatalf("sysload: %v", err)
	}
}

// SysloadHasFork reports whether sysload makes a fork(2) (the syscall
// exists on x86_64, not on arm64).
func SysloadHasFork() bool { return runtime.GOARCH == "amd64" }

// Overlay mounts an overlay file system (lower and upper directories in
// t.TempDir) and returns its mount point; it is unmounted when the test
// ends.
func Overlay(t *testing.T) string {
	t.Helper()
	RequirePrivileged(t)
	base := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		dirs[d] = filepath.Join(base, d)
		if err := os.Mkdir(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + dirs["lower"] + ",upperdir=" + dirs["upper"] + ",workdir=" + dirs["work"]
	if err := unix.Mount("overlay", dirs["merged"], "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dirs["merged"], unix.MNT_DETACH) })
	return dirs["merged"]
}
