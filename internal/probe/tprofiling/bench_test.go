package tprofiling

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
)

// BenchmarkAggregate: one kernel event into the aggregator (the reader's
// per-event work), threads and names cycling, the window's output taken
// as it would be every second.
func BenchmarkAggregate(b *testing.B) {
	a := newAggregator(100*ms, maxPending, maxPerTick)
	k := syscap.TprofEvent{Comm: "w", Type: syscap.TprofFile, Call: 2, Dur: 1000}
	b.ReportAllocs()
	for i := range b.N {
		k.PID, k.Start = uint32(i%64), uint64(i)*1000
		a.add(fromKernel(k))
		if i%10000 == 0 {
			a.flush(k.Start, false)
			a.take()
		}
	}
}

// BenchmarkSyscallsPrivileged: write(2) of one byte to /dev/null by this
// (observed) process: "off" without the probe's hooks, "on" with them and
// the probe's reader and aggregator draining the ring, every call an event
// (min_exec_dur 0) or the default (1 µs: these calls are shorter, the
// kernel sends nothing). Reports the kernel's run time of the two
// syscall programs per call, the events read per second of the loop and
// what was lost (a sustained rate the ring and reader keep up with loses
// nothing).
func BenchmarkSyscallsPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	null, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	fd := int(null.Fd())
	buf := []byte{0}
	loop := func(n int) {
		for range n {
			if _, err := unix.Write(fd, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("off", func(b *testing.B) { loop(b.N) })
	for _, minUs := range []uint64{0, 1} {
		b.Run(fmt.Sprintf("on/min_exec_dur=%dus", minUs), func(b *testing.B) { benchOn(b, minUs, loop) })
	}
}

func benchOn(b *testing.B, minUs uint64, loop func(int)) {
	{
		stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			b.Fatal(err)
		}
		defer stats.Close()
		var (
			mu   sync.Mutex
			agg  = newAggregator(100*ms, maxPending, maxPerTick)
			read uint64
			lost uint64
		)
		tp, err := syscap.OpenTprof(syscap.TprofOptions{
			Targets: probetest.NewTargets(snoop.Whitelist, os.Getpid()),
			Handle: func(e syscap.TprofEvent) {
				mu.Lock()
				agg.add(fromKernel(e))
				read++
				mu.Unlock()
			},
			OnLost: func(n uint64) { lost += n },
		})
		if err != nil {
			b.Fatal(err)
		}
		defer tp.Close()
		if err := tp.SetTypes(minUs*uint64(time.Microsecond), syscap.TprofFile); err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer close(done)
			_ = tp.RunReader(ctx)
		}()
		go func() {
			for ctx.Err() == nil {
				time.Sleep(tick)
				mu.Lock()
				agg.flush(monoNow(), false)
				agg.take()
				mu.Unlock()
			}
		}()
		progs := tp.Programs()
		rt0, n0 := progStats(b, progs["syscap_tprof_sys_enter"], progs["syscap_tprof_sys_exit"])
		start := time.Now()
		b.ResetTimer()
		loop(b.N)
		b.StopTimer()
		elapsed := time.Since(start)
		rt1, n1 := progStats(b, progs["syscap_tprof_sys_enter"], progs["syscap_tprof_sys_exit"])
		cancel()
		<-done
		if n1 > n0 {
			b.ReportMetric(float64(rt1-rt0)/float64(b.N), "bpf-ns/call")
		}
		mu.Lock()
		b.ReportMetric(float64(read)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(lost), "lost")
		mu.Unlock()
	}
}

func progStats(b *testing.B, progs ...*ebpf.Program) (time.Duration, uint64) {
	var rt time.Duration
	var n uint64
	for _, p := range progs {
		st, err := p.Stats()
		if err != nil {
			b.Fatal(err)
		}
		rt += st.Runtime
		n += st.RunCount
	}
	return rt, n
}
