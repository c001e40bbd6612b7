package syscap

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// BenchmarkWhole50K: a Kafka-like exchange on a loopback connection of this
// process, both ends traced: a 24-byte request answered by 50 KB, with the
// 4 KiB prefix capture and with the whole capture (Config.Whole): BPF time,
// records and bytes handed on per exchange.
func BenchmarkWhole50K(b *testing.B) {
	for _, whole := range []bool{false, true} {
		name := "prefix"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) { benchWhole(b, whole) })
	}
}

func benchWhole(b *testing.B, whole bool) {
	probetest.RequirePrivileged(b)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	h := &countHandler{}
	c, err := Open(Options{Handler: h})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cfg := Config{Protocols: []l7.Protocol{l7.Kafka}}
	if whole {
		cfg.Whole, cfg.WholeMax = []l7.Protocol{l7.Kafka}, WholeMaxLimit
	}
	if err := c.SetConfig(cfg); err != nil {
		b.Fatal(err)
	}
	if err := c.SetTargets(selfTargets{}); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	const size = 50000
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, 64)
		resp := make([]byte, size)
		for {
			if _, err := io.ReadFull(s, buf[:24]); err != nil {
				return
			}
			if _, err := s.Write(resp); err != nil {
				return
			}
		}
	}()
	cl, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := make([]byte, 24)
	binary.BigEndian.PutUint32(req[0:], 20)
	binary.BigEndian.PutUint16(req[4:], 3) // Metadata
	binary.BigEndian.PutUint16(req[6:], 1)
	binary.BigEndian.PutUint32(req[8:], 1)
	binary.BigEndian.PutUint16(req[12:], 4)
	copy(req[14:], "test")
	resp := make([]byte, size)
	rt := func() {
		if _, err := cl.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(cl, resp); err != nil {
			b.Fatal(err)
		}
	}
	rt()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	rt0, n0 := progRuntime(b, c.objs.SyscapSysExit)
	b.ResetTimer()
	for b.Loop() {
		rt()
	}
	b.StopTimer()
	rt1, n1 := progRuntime(b, c.objs.SyscapSysExit)
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-done
	bpf := rt1 - rt0
	b.ReportMetric(float64(bpf.Nanoseconds())/float64(b.N), "bpf-ns/roundtrip")
	b.ReportMetric(float64(n1-n0)/float64(b.N), "runs/roundtrip")
	b.ReportMetric(float64(h.data)/float64(b.N), "records/roundtrip")
	b.ReportMetric(float64(h.bytes)/float64(b.N), "bytes/roundtrip")
}
