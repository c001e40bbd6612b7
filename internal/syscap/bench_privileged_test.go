package syscap

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// countHandler counts records and bytes, doing nothing else: the capture's
// own cost.
type countHandler struct{ conns, data, closes, bytes int }

func (h *countHandler) Conn(*Conn)   { h.conns++ }
func (h *countHandler) Data(d *Data) { h.data++; h.bytes += len(d.Bytes) }
func (h *countHandler) Close(*Close) { h.closes++ }

// captureRuntime is the cumulative run time and count of c's data
// programs: the exit program and the sock hooks.
func captureRuntime(b *testing.B, c *Capture) (time.Duration, uint64) {
	var t time.Duration
	var n uint64
	for _, p := range []*ebpf.Program{c.exit.prog(), c.objs.SyscapSockSend, c.objs.SyscapSockRecv} {
		pt, pn := progRuntime(b, p)
		t += pt
		n += pn
	}
	return t, n
}

// progRuntime is a program's cumulative run time and count.
func progRuntime(b *testing.B, p *ebpf.Program) (time.Duration, uint64) {
	st, err := p.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return st.Runtime, st.RunCount
}

// BenchmarkCaptureRoundTrip: a Redis-like request/response (a 40-byte
// write answered by a 5-byte write) over a loopback connection of this
// process, both ends observed and traced (RESP enabled): the BPF time of
// the data programs (the sock hooks and the exit program) per round trip
// (four data syscalls, two per end) and per run, and the Go side's reading
// and decoding per record (a handler that only counts). The statistics
// time the programs alone; BenchmarkCaptureCharged has what the hooks
// cost the application.
//
// Sub-benchmarks per attach mode of the exit program: raw (tp_btf/
// sys_exit) and syscalls (the per-syscall tracepoints); ns/op is the round
// trip's wall time.
func BenchmarkCaptureRoundTrip(b *testing.B) {
	probetest.RequirePrivileged(b)
	enableStats(b)
	for _, m := range []AttachMode{AttachRaw, AttachSyscalls} {
		b.Run(m.String(), func(b *testing.B) { benchRoundTrip(b, m) })
	}
}

func benchRoundTrip(b *testing.B, mode AttachMode) {
	h := &countHandler{}
	c := benchCapture(b, Options{Handler: h, Attach: mode}, l7.Redis)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(s, buf[:40]); err != nil {
				return
			}
			if _, err := s.Write([]byte("+OK\r\n")); err != nil {
				return
			}
		}
	}()
	cl, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := []byte("*3\r\n$3\r\nSET\r\n$6\r\nkey:12\r\n$9\r\nvalue:123\r\n") // 40 bytes
	resp := make([]byte, 5)
	roundTrip := func() {
		if _, err := cl.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(cl, resp); err != nil {
			b.Fatal(err)
		}
	}
	roundTrip() // the connection's inference and Conn records
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	rt0, n0 := captureRuntime(b, c)
	cpu := cpuLoop(b, unix.RUSAGE_SELF, roundTrip, func() {
		rt1, n1 := captureRuntime(b, c)
		time.Sleep(200 * time.Millisecond) // let the reader drain
		bpf := rt1 - rt0
		b.ReportMetric(float64(bpf.Nanoseconds())/float64(b.N), "bpf-ns/roundtrip")
		if runs := n1 - n0; runs > 0 {
			b.ReportMetric(float64(bpf.Nanoseconds())/float64(runs), "bpf-ns/run")
			b.ReportMetric(float64(runs)/float64(b.N), "runs/roundtrip")
		}
	})
	cancel()
	<-done
	_ = os.Stdout.Sync()
	b.ReportMetric(float64(h.data)/float64(b.N), "records/roundtrip")
	b.ReportMetric(cpu, "cpu-ns/roundtrip")
}

// BenchmarkUnobservedSyscall: the cost of a syscall the capture does not
// handle (getpid) of an observed process, with no capture, the raw
// attachment and the per-syscall one: ns/op is getpid's wall time,
// bpf-runs/op the capture's program runs per call.
func BenchmarkUnobservedSyscall(b *testing.B) {
	probetest.RequirePrivileged(b)
	enableStats(b)
	b.Run("none", func(b *testing.B) { getpidLoop(b) })
	for _, m := range []AttachMode{AttachRaw, AttachSyscalls} {
		b.Run(m.String(), func(b *testing.B) {
			c := benchCapture(b, Options{Handler: &countHandler{}, Attach: m}, l7.Redis)
			rt0, n0 := captureRuntime(b, c)
			getpidLoop(b)
			rt1, n1 := captureRuntime(b, c)
			b.ReportMetric(float64(n1-n0)/float64(b.N), "bpf-runs/op")
			b.ReportMetric(float64((rt1-rt0).Nanoseconds())/float64(b.N), "bpf-ns/op")
		})
	}
}

// getpidLoop calls getpid b.N times on one thread and reports the
// thread's CPU time per call (wall time swings with the machine's load).
func getpidLoop(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportMetric(cpuLoop(b, unix.RUSAGE_THREAD, func() { unix.Getpid() }, nil), "cpu-ns/op")
}

func cpuNs(ru unix.Rusage) int64 { return ru.Utime.Nano() + ru.Stime.Nano() }

// cpuLoop runs f b.N times between b's timer reset and stop, then after
// (nil: nothing), and returns the CPU time of who (unix.RUSAGE_SELF or,
// on a locked OS thread, unix.RUSAGE_THREAD) in ns per call of f, after
// included.
func cpuLoop(b *testing.B, who int, f, after func()) float64 {
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(who, &ru0)
	b.ResetTimer()
	for b.Loop() {
		f()
	}
	b.StopTimer()
	if after != nil {
		after()
	}
	_ = unix.Getrusage(who, &ru1)
	return float64(cpuNs(ru1)-cpuNs(ru0)) / float64(b.N)
}

// BenchmarkObservedWrite: the cost of a traced data syscall, raw versus
// per-syscall attachment: one thread writes a DNS query on a connected
// UDP socket (DNS enabled, this process observed; the receiver never
// reads, so the kernel drops the datagram once its buffer is full and
// the sender's cost stays the same). cpu-ns/op is the writing thread's
// CPU time per write, records/op the DATA records made.
func BenchmarkObservedWrite(b *testing.B) {
	probetest.RequirePrivileged(b)
	enableStats(b)
	for _, m := range []AttachMode{AttachRaw, AttachSyscalls} {
		b.Run(m.String(), func(b *testing.B) {
			h := &countHandler{}
			c := benchCapture(b, Options{Handler: h, Attach: m}, l7.DNS)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			rx, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			tx, err := net.Dial("udp4", rx.LocalAddr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			fd, err := tx.(*net.UDPConn).File()
			if err != nil {
				b.Fatal(err)
			}
			defer fd.Close()
			// A query for example.com, type A.
			q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rt0, n0 := captureRuntime(b, c)
			cpu := cpuLoop(b, unix.RUSAGE_THREAD, func() {
				if _, err := unix.Write(int(fd.Fd()), q); err != nil {
					b.Fatal(err)
				}
			}, nil)
			rt1, n1 := captureRuntime(b, c)
			time.Sleep(200 * time.Millisecond)
			b.ReportMetric(cpu, "cpu-ns/op")
			b.ReportMetric(float64((rt1-rt0).Nanoseconds())/float64(b.N), "bpf-ns/op")
			b.ReportMetric(float64(n1-n0)/float64(b.N), "bpf-runs/op")
			b.ReportMetric(float64(h.data)/float64(b.N), "records/op")
		})
	}
}

// enableStats turns the kernel's BPF run-time statistics on for b.
func enableStats(b *testing.B) {
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stats.Close() })
}

// benchCapture opens a capture with opts, tracing protocol p for this
// process; it is closed with b.
func benchCapture(b *testing.B, opts Options, p l7.Protocol) *Capture {
	c, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.SetConfig(Config{Protocols: []l7.Protocol{p}}); err != nil {
		b.Fatal(err)
	}
	if err := c.SetTargets(selfTargets{}); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkCaptureCharged: what a Redis-like round trip (a 40-byte request
// answered by 5 bytes, both ends on one loopback connection of one
// thread: write, read, write, read) costs the application, as the CPU time
// of the thread that makes the syscalls (the kernel charges BPF time to
// it), with the kernel's BPF statistics off as the daemon runs them:
//   - none: no program attached;
//   - empty-sys-exit: an empty program on syscalls:sys_exit_read and
//     _write, the floor of a capture at syscall exit;
//   - empty-sock: an empty tp_btf program on sock_send_length and
//     sock_recv_length, the floor of the sock hooks;
//   - sock-hooks: the capture as the daemon runs it;
//   - sys-exit: the capture with every data syscall taken at its exit
//     (Options.NoSockHooks, kernels without the sock tracepoints);
//   - *-pipe: the same four syscalls on two pipes, which the capture does
//     not trace: what it costs the host's other reads and writes.
//
// Compare cpu-ns/rt with none's; records/rt says that every syscall was
// captured. Run with e.g. -benchtime=200000x -count=6: the machine's
// noise is several hundred ns a round trip.
func BenchmarkCaptureCharged(b *testing.B) {
	probetest.RequirePrivileged(b)
	if raw, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); err == nil && strings.TrimSpace(string(raw)) != "0" {
		b.Fatal("kernel.bpf_stats_enabled is on: every run would pay the statistics' clock reads; sysctl -w kernel.bpf_stats_enabled=0 first")
	}
	empty := func(b *testing.B, spec ebpf.ProgramSpec) *ebpf.Program {
		spec.License = "GPL"
		spec.Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
		p, err := ebpf.NewProgram(&spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		return p
	}
	b.Run("none", func(b *testing.B) { chargedLoop(b, loopbackPair(b)) })
	b.Run("empty-sys-exit", func(b *testing.B) {
		p := empty(b, ebpf.ProgramSpec{Type: ebpf.TracePoint})
		for _, tp := range []string{"sys_exit_read", "sys_exit_write"} {
			l, err := link.Tracepoint("syscalls", tp, p, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
		}
		chargedLoop(b, loopbackPair(b))
	})
	b.Run("empty-sock", func(b *testing.B) {
		for _, tp := range []string{"sock_send_length", "sock_recv_length"} {
			p := empty(b, ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: tp})
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
		}
		chargedLoop(b, loopbackPair(b))
	})
	for _, noSock := range []bool{false, true} {
		name := "sock-hooks"
		if noSock {
			name = "sys-exit"
		}
		b.Run(name, func(b *testing.B) {
			h := &countHandler{}
			capture(b, h, noSock)
			chargedLoop(b, loopbackPair(b))
			time.Sleep(200 * time.Millisecond) // let the reader drain
			b.ReportMetric(float64(h.data)/float64(b.N), "records/rt")
		})
		// The same four syscalls on a pipe, which the capture does not
		// trace: what the hooks cost a process's other reads and writes.
		b.Run(name+"-pipe", func(b *testing.B) {
			capture(b, &countHandler{}, noSock)
			chargedLoop(b, pipePair(b))
		})
	}
	b.Run("none-pipe", func(b *testing.B) { chargedLoop(b, pipePair(b)) })
}

// capture opens and runs a capture of Redis for this process until b ends.
func capture(b *testing.B, h Handler, noSock bool) {
	c := benchCapture(b, Options{Handler: h, NoSockHooks: noSock}, l7.Redis)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
}

// pipePair is two pipes, one each way, in the places of a connection's
// ends.
func pipePair(b *testing.B) rtFDs {
	var up, down [2]int
	for _, p := range []*[2]int{&up, &down} {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	}
	return rtFDs{clOut: up[1], srvIn: up[0], srvOut: down[1], clIn: down[0]}
}

// rtFDs are the fds of a round trip: the client writes clOut, the server
// reads srvIn, answers on srvOut, and the client reads clIn.
type rtFDs struct{ clOut, srvIn, srvOut, clIn int }

// loopbackPair is a connected TCP pair on loopback, both ends blocking
// sockets of this process, closed with b.
func loopbackPair(b testing.TB) rtFDs {
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		b.Fatal(err)
	}
	addr, err := unix.Getsockname(ln)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(cl) })
	if err := unix.Connect(cl, addr); err != nil {
		b.Fatal(err)
	}
	srv, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(srv) })
	return rtFDs{clOut: cl, srvIn: srv, srvOut: srv, clIn: cl}
}

// chargedLoop runs b.N round trips on one OS thread over fds and reports
// the thread's CPU time per round trip.
func chargedLoop(b *testing.B, fds rtFDs) {
	req := []byte("*3\r\n$3\r\nSET\r\n$6\r\nkey:12\r\n$9\r\nvalue:123\r\n") // 40 bytes
	resp := []byte("+OK\r\n")
	buf := make([]byte, 64)
	roundTrip := func() {
		if _, err := unix.Write(fds.clOut, req); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Read(fds.srvIn, buf[:len(req)]); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Write(fds.srvOut, resp); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Read(fds.clIn, buf[:len(resp)]); err != nil {
			b.Fatal(err)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	roundTrip() // a traced connection's inference and Conn records
	b.ReportMetric(cpuLoop(b, unix.RUSAGE_THREAD, roundTrip, nil), "cpu-ns/rt")
}
