// Command worker does known work inside the privileged test's container:
// only raw system calls, so that the Go runtime opens no descriptor of its
// own (no netpoller) and every number is the test's.
//
//	worker hold MEM_MIB NFDS DST_IP DST_PORT NPKTS PAYLOAD DIRECT_BYTES CPU_MS
//	    touches MEM_MIB of anonymous memory, opens NFDS descriptors of
//	    /dev/null, sends NPKTS UDP datagrams of PAYLOAD bytes to DST (its
//	    socket stays open), writes DIRECT_BYTES to /data with O_DIRECT, burns
//	    CPU_MS of CPU time, writes /ready and sleeps.
//	worker oom
//	    touches anonymous memory 1 MiB at a time until it is killed.
package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"
)

const mib = 1 << 20

func die(err error) {
	fmt.Fprintln(os.Stderr, "worker:", err)
	os.Exit(1)
}

func num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		die(err)
	}
	return n
}

func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

func anon(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		die(err)
	}
	return b
}

func cpuTime() time.Duration {
	var ts syscall.Timespec
	// CLOCK_PROCESS_CPUTIME_ID = 2
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 2, uintptr(unsafePointer(&ts)), 0); e != 0 {
		die(e)
	}
	return time.Duration(ts.Nano())
}

func main() {
	if len(os.Args) < 2 {
		die(fmt.Errorf("usage: worker hold|oom ..."))
	}
	switch os.Args[1] {
	case "oom":
		var keep [][]byte
		for {
			b := anon(mib)
			touch(b)
			keep = append(keep, b)
		}
	case "hold":
		if len(os.Args) != 10 {
			die(fmt.Errorf("hold takes 8 arguments"))
		}
		a := os.Args[2:]
		mem := anon(num(a[0]) * mib)
		touch(mem)
		for i := 0; i < num(a[1]); i++ {
			if _, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
				die(err)
			}
		}
		dst := netip.AddrPortFrom(netip.MustParseAddr(a[2]), uint16(num(a[3])))
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			die(err)
		}
		payload := make([]byte, num(a[5]))
		sa := &syscall.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
		for i := 0; i < num(a[4]); i++ {
			if err := syscall.Sendto(fd, payload, 0, sa); err != nil {
				die(err)
			}
		}
		if n := num(a[6]); n > 0 {
			buf := anon(n) // page aligned, as O_DIRECT needs
			f, err := syscall.Open("/data", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_DIRECT|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				die(err)
			}
			if w, err := syscall.Write(f, buf); err != nil || w != n {
				die(fmt.Errorf("direct write: %d, %v", w, err))
			}
			syscall.Close(f)
			syscall.Munmap(buf)
		}
		want := time.Duration(num(a[7])) * time.Millisecond
		for cpuTime() < want {
		}
		r, err := syscall.Open("/ready", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			die(err)
		}
		syscall.Close(r)
		for {
			time.Sleep(time.Hour)
		}
	default:
		die(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
}
