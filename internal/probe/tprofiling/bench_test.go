package tprofiling

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
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
		rt0, n0 := progStats(b, progs["syscap_tprof_sys_enter"], progs["syscap_tprof_sys_exit"], progs["syscap_tprof_sc_enter"], progs["syscap_tprof_sc_exit"])
		start := time.Now()
		b.ResetTimer()
		loop(b.N)
		b.StopTimer()
		elapsed := time.Since(start)
		rt1, n1 := progStats(b, progs["syscap_tprof_sys_enter"], progs["syscap_tprof_sys_exit"], progs["syscap_tprof_sc_enter"], progs["syscap_tprof_sc_exit"])
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

// BenchmarkSustainedPrivileged: the events per second the whole probe
// (kernel programs, ring, reader, aggregator, local trace file) takes
// without loss. GALAGO_BENCH_WRITERS (default 2) writer threads of this
// (observed) process make one-byte write(2) calls to /dev/null paced
// together at each rate of GALAGO_BENCH_RATES
// (events/s, comma-separated; default 25000,50000,100000,150000,200000,300000)
// for 2 s, syscall_file on, min_exec_dur 0 (every call an event), a fresh
// probe per rate; the trace file's write events of that thread (their
// count fields) against the calls made, and the lost counter. Reports the
// highest rate delivered whole (and the writers' achieved rate there).
func BenchmarkSustainedPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	rates := []int{25000, 50000, 100000, 150000, 200000, 300000}
	if v := os.Getenv("GALAGO_BENCH_RATES"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.Atoi(f)
			if err != nil || r <= 0 {
				b.Fatalf("GALAGO_BENCH_RATES: %q is not a rate", f)
			}
			rates = append(rates, r)
		}
	}
	writers := 2
	if v, err := strconv.Atoi(os.Getenv("GALAGO_BENCH_WRITERS")); err == nil && v > 0 {
		writers = v
	}
	null, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	for range b.N {
		var best, bestAchieved float64
		for _, rate := range rates {
			made, delivered, lost, achieved := sustained(b, int(null.Fd()), rate, writers, 2*time.Second)
			b.Logf("rate %d/s: made %d (%.0f/s), delivered %d, lost %d", rate, made, achieved, delivered, lost)
			// delivered may exceed made by the Go runtime's own writes
			// on the writer threads (netpoll wake-ups on an eventfd).
			if delivered >= made && delivered-made < 10 && lost == 0 && achieved > bestAchieved {
				best, bestAchieved = float64(rate), achieved
			}
		}
		b.ReportMetric(best, "requested-events/s")
		b.ReportMetric(bestAchieved, "achieved-events/s")
	}
}

// sustained runs one rate through a fresh probe.
func sustained(b *testing.B, fd, rate, writers int, d time.Duration) (made, delivered, lost uint64, achieved float64) {
	dir := b.TempDir()
	params := probe.DefaultParams()
	params.OutputDir = dir
	params.MinExecDur = 0
	p := New(withPeriods(tick, time.Hour, pruneEvery))
	rt := probetest.NewRuntime(b)
	cfg := probe.Config{SubItems: probe.MustSubItemBit(Name, "syscall_file"), Params: params,
		Targets: probetest.NewTargets(snoop.Whitelist, os.Getpid())}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		b.Fatal(err)
	}
	type result struct {
		n  uint64
		el time.Duration
	}
	tidc := make(chan int, writers)
	done := make(chan result, writers)
	for range writers {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tidc <- unix.Gettid()
			buf := []byte{0}
			start := time.Now()
			var n uint64
			for el := time.Duration(0); el < d; el = time.Since(start) {
				// The calls due by now.
				due := uint64(el.Seconds() * float64(rate) / float64(writers))
				for ; n < due; n++ {
					if _, err := unix.Write(fd, buf); err != nil {
						panic(err)
					}
				}
			}
			done <- result{n, time.Since(start)}
		}()
	}
	tids := map[int]bool{}
	var el time.Duration
	for range writers {
		tids[<-tidc] = true
		r := <-done
		made += r.n
		el = max(el, r.el)
	}
	rt.Shutdown(b, p)
	files, _ := filepath.Glob(filepath.Join(dir, "timeline-trace-*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var doc struct {
			TraceEvents []traceEvent `json:"traceEvents"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			b.Fatal(err)
		}
		for _, e := range doc.TraceEvents {
			if tids[int(e.TID)] && e.Name == "write" && e.Ph == "X" {
				c, _ := e.Args["count"].(float64)
				delivered += uint64(c)
			}
		}
	}
	return made, delivered, rt.LostCount(), float64(made) / el.Seconds()
}
