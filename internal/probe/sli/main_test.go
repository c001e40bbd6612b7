package sli

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// writerEnv makes the test binary the O_DIRECT writer of the bio test:
// GALAGO_SLI_DIRECT_WRITER=<file>:<blocks>.
const writerEnv = "GALAGO_SLI_DIRECT_WRITER"

// blockerEnv makes the test binary the uninterruptible sleeper of the
// cpu_block test: GALAGO_SLI_VFORK=<ns>.
const blockerEnv = "GALAGO_SLI_VFORK"

func TestMain(m *testing.M) {
	if ns := os.Getenv(blockerEnv); ns != "" {
		if err := vforkBlocker(ns); err != nil {
			fmt.Fprintln(os.Stderr, "blocker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(writerEnv); spec != "" {
		if err := directWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// directWriter writes one warm-up block (its code and libraries are in
// memory afterwards: no read bio of its own later), says "ready", and on
// a line from stdin writes <blocks> blocks of 4 KiB with O_DIRECT, says
// "done" and waits for stdin to close.
func directWriter(spec string) error {
	var file string
	var blocks int
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == ':' {
			file = spec[:i]
			n, err := strconv.Atoi(spec[i+1:])
			if err != nil {
				return err
			}
			blocks = n
			break
		}
	}
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	write := func(i int) error {
		n, err := unix.Pwrite(fd, buf, int64(i)*4096)
		if err == nil && n != len(buf) {
			err = fmt.Errorf("short write %d", n)
		}
		return err
	}
	if err := write(0); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() {
		return in.Err()
	}
	for i := range blocks {
		if err := write(i); err != nil {
			return err
		}
	}
	fmt.Println("done")
	for in.Scan() {
	}
	return nil
}

// vforkNap is the child's sleep in vforkBlocker: a global, so that the
// child, a copy of the process running Go code without its runtime's
// other threads, allocates nothing.
var vforkNap unix.Timespec

// vforkBlocker says "ready" and, on a line from stdin, makes a vfork
// child (clone with CLONE_VFORK, without CLONE_VM: the child has its own
// copy of memory) that sleeps <ns> and exits: until then this thread
// waits in uninterruptible sleep (wait_for_vfork_done, TASK_KILLABLE),
// not for I/O. It prints the span of the clone call (ns) and waits for
// stdin to close.
func vforkBlocker(spec string) error {
	ns, err := strconv.ParseInt(spec, 10, 64)
	if err != nil {
		return err
	}
	vforkNap = unix.NsecToTimespec(ns)
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() {
		return in.Err()
	}
	runtime.LockOSThread()
	var t0, t1 unix.Timespec
	nap := uintptr(unsafe.Pointer(&vforkNap))
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &t0); err != nil {
		return err
	}
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_VFORK|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno == 0 && pid == 0 { // the child: raw system calls only
		unix.RawSyscall(unix.SYS_NANOSLEEP, nap, 0, 0)
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &t1); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		return err
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("vfork child: %v", ws)
	}
	fmt.Println(t1.Nano() - t0.Nano())
	for in.Scan() {
	}
	return nil
}
