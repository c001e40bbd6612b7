package syscap

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
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
// process, both ends observed and traced (RESP enabled): the BPF time per
// round trip (four data syscalls, two per end) and per syscall, and the Go
// side's reading and decoding per record (a handler that only counts).
//
// Sub-benchmarks per attach mode: raw (tp_btf/sys_exit) and syscalls (the
// per-syscall tracepoints); ns/op is the round trip's wall time.
func BenchmarkCaptureRoundTrip(b *testing.B) {
	probetest.RequirePrivileged(b)
	enableStats(b)
	for _, m := range []AttachMode{AttachRaw, AttachSyscalls} {
		b.Run(m.String(), func(b *testing.B) { benchRoundTrip(b, m) })
	}
}

func benchRoundTrip(b *testing.B, mode AttachMode) {
	h := &countHandler{}
	c := benchCapture(b, h, mode, l7.Redis)
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
	rt0, n0 := progRuntime(b, c.exit.prog())
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		roundTrip()
	}
	b.StopTimer()
	rt1, n1 := progRuntime(b, c.exit.prog())
	time.Sleep(200 * time.Millisecond) // let the reader drain
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cancel()
	<-done
	_ = os.Stdout.Sync()
	bpf := rt1 - rt0
	b.ReportMetric(float64(bpf.Nanoseconds())/float64(b.N), "bpf-ns/roundtrip")
	if runs := n1 - n0; runs > 0 {
		b.ReportMetric(float64(bpf.Nanoseconds())/float64(runs), "bpf-ns/run")
		b.ReportMetric(float64(runs)/float64(b.N), "runs/roundtrip")
	}
	b.ReportMetric(float64(h.data)/float64(b.N), "records/roundtrip")
	b.ReportMetric(float64(cpuNs(ru1)-cpuNs(ru0))/float64(b.N), "cpu-ns/roundtrip")
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
			c := benchCapture(b, &countHandler{}, m, l7.Redis)
			rt0, n0 := progRuntime(b, c.exit.prog())
			getpidLoop(b)
			rt1, n1 := progRuntime(b, c.exit.prog())
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
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
	b.ResetTimer()
	for b.Loop() {
		unix.Getpid()
	}
	b.StopTimer()
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
	b.ReportMetric(float64(cpuNs(ru1)-cpuNs(ru0))/float64(b.N), "cpu-ns/op")
}

func cpuNs(ru unix.Rusage) int64 { return ru.Utime.Nano() + ru.Stime.Nano() }

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
			c := benchCapture(b, h, m, l7.DNS)
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
			rt0, n0 := progRuntime(b, c.exit.prog())
			var ru0, ru1 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := unix.Write(int(fd.Fd()), q); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
			rt1, n1 := progRuntime(b, c.exit.prog())
			time.Sleep(200 * time.Millisecond)
			b.ReportMetric(float64(cpuNs(ru1)-cpuNs(ru0))/float64(b.N), "cpu-ns/op")
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

// benchCapture opens a capture attached in mode m, tracing protocol p
// for this process; it is closed with b.
func benchCapture(b *testing.B, h Handler, m AttachMode, p l7.Protocol) *Capture {
	c, err := Open(Options{Handler: h, Attach: m})
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
