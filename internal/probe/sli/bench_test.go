package sli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
)

// benchWindow is one measured window of the scheduler benchmark.
const benchWindow = time.Second

// BenchmarkSchedPrivileged is sli's cost on a scheduler-bound load: on
// every CPU, two threads of this (observed) process pinned to it
// ping-pong one byte over a pair of pipes, so that each message is a
// wakeup and a context switch and the CPUs do nothing else. Each
// iteration measures three windows of benchWindow, in alternating order
// so that drift cancels out: the probe off (not loaded), on (cpu, node,
// container and histogram: every switch and wakeup of the load is
// accounted in the node row and in the process's cgroup row), and on with
// the kernel's BPF run-time statistics enabled, as the daemon keeps them
// with GALAGO_BPF_STATS=1 (galago_bpf_run_seconds_total): they add two
// clock reads around every program run. The "on" window is the daemon's
// default; it needs kernel.bpf_stats_enabled at 0 (the kernel's default),
// else the statistics run in every window: the benchmark fails when it
// finds it at 1. The context switches are the kernel's
// counts of the load's threads (/proc/self/task/<tid>/status). Reported:
// the medians of switches per second off and on, of the per-iteration
// on/off ratios with and without statistics, per second of wall time and
// per second the load's threads ran (on a shared machine the second is
// the stable one: other work takes CPU time from both arms unevenly, but
// not the cost of a switch), of the BPF run time of sli's
// sched_switch and sched_wakeup programs per context switch of the
// machine (sched_switch's run count) and the 1-minute load average at the
// end. A fourth window per iteration, "floor", attaches a program
// that returns at once to sched_switch (built here, no map, no helper):
// the cost of the tracepoint's BPF dispatch alone, which no program body
// can go below; floor/off-per-cpu-s is the ratio any sched_switch
// program can reach on the machine. Run with e.g. -benchtime=10x.
func BenchmarkSchedPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	if raw, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); err == nil && strings.TrimSpace(string(raw)) != "0" {
		b.Fatal("kernel.bpf_stats_enabled is on: every window would run with BPF statistics; sysctl -w kernel.bpf_stats_enabled=0 first")
	}
	load := startPingPong(b, runtime.NumCPU())
	defer load.stop()
	var off, on, ratio, ratioStats, cpuRatio, cpuRatioStats, floorRatio, nsSwitch, nsWakeup []float64
	empty := emptySwitchProgram(b)
	measureFloor := func() rates {
		l, err := link.AttachTracing(link.TracingOptions{Program: empty, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		return load.rate(benchWindow)
	}
	measureOn := func() (plain, withStats rates) {
		p := New(procfs.FS{Root: "/"}, identity.NewResolver("/"), withInterval(time.Hour))
		rt := probetest.NewRuntime(b)
		cfg := probe.Config{SubItems: subItems(b, "cpu", "node", "container", "histogram"), Params: probe.DefaultParams(),
			Targets: probetest.NewTargets(snoop.Whitelist, os.Getpid())}
		if err := p.Start(rt.Context(), cfg, rt); err != nil {
			b.Fatal(err)
		}
		defer rt.Shutdown(b, p)
		time.Sleep(100 * time.Millisecond) // first rows created, filter synced
		plain = load.rate(benchWindow)
		stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatal(err)
		}
		defer stats.Close()
		sw0, wk0 := progStat(b, p.objs.SliSchedSwitch), progStat(b, p.objs.SliSchedWakeup)
		withStats = load.rate(benchWindow)
		sw1, wk1 := progStat(b, p.objs.SliSchedSwitch), progStat(b, p.objs.SliSchedWakeup)
		if n := sw1.RunCount - sw0.RunCount; n > 0 {
			nsSwitch = append(nsSwitch, float64(sw1.Runtime-sw0.Runtime)/float64(n))
			nsWakeup = append(nsWakeup, float64(wk1.Runtime-wk0.Runtime)/float64(n))
		}
		// one period, so the rows do not only grow
		if err := p.report(time.Now()); err != nil {
			b.Fatal(err)
		}
		return plain, withStats
	}
	for i := 0; b.Loop(); i++ {
		var o, n, ns, f rates
		if i%2 == 0 {
			o = load.rate(benchWindow)
			f = measureFloor()
			n, ns = measureOn()
		} else {
			n, ns = measureOn()
			f = measureFloor()
			o = load.rate(benchWindow)
		}
		floorRatio = append(floorRatio, f.cpu/o.cpu)
		off, on = append(off, o.wall), append(on, n.wall)
		ratio, ratioStats = append(ratio, n.wall/o.wall), append(ratioStats, ns.wall/o.wall)
		cpuRatio, cpuRatioStats = append(cpuRatio, n.cpu/o.cpu), append(cpuRatioStats, ns.cpu/o.cpu)
	}
	b.ReportMetric(median(off), "ctxsw/s-off")
	b.ReportMetric(median(on), "ctxsw/s-on")
	b.ReportMetric(median(ratio), "on/off")
	b.ReportMetric(median(ratioStats), "on+stats/off")
	b.ReportMetric(median(cpuRatio), "on/off-per-cpu-s")
	b.ReportMetric(median(cpuRatioStats), "on+stats/off-per-cpu-s")
	b.ReportMetric(median(floorRatio), "floor/off-per-cpu-s")
	b.ReportMetric(median(nsSwitch), "switch-bpf-ns/ctxsw")
	b.ReportMetric(median(nsWakeup), "wakeup-bpf-ns/ctxsw")
	b.ReportMetric(loadAvg1(b), "load1")
}

// emptySwitchProgram is a tp_btf program on sched_switch that returns 0
// at once: the floor window's.
func emptySwitchProgram(b *testing.B) *ebpf.Program {
	b.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "sli_floor",
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     "sched_switch",
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = prog.Close() })
	return prog
}

func progStat(b *testing.B, p *ebpf.Program) *ebpf.ProgramStats {
	b.Helper()
	st, err := p.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadAvg1(b *testing.B) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		b.Fatalf("/proc/loadavg: %q", raw)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// pingPong is the scheduler load: per CPU, two OS threads pinned to it
// passing one byte back and forth over two pipes.
type pingPong struct {
	tb    testing.TB
	mu    sync.Mutex
	tids  []int
	rfds  []int
	wfds  []int
	stopF atomic.Bool
	wg    sync.WaitGroup
}

func startPingPong(tb testing.TB, cpus int) *pingPong {
	tb.Helper()
	l := &pingPong{tb: tb}
	ready := make(chan error, 2*cpus)
	for cpu := range cpus {
		var ab, ba [2]int
		if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
			tb.Fatal(err)
		}
		if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
			tb.Fatal(err)
		}
		l.rfds, l.wfds = append(l.rfds, ab[0], ba[0]), append(l.wfds, ab[1], ba[1])
		// a: writes to ab, reads ba; b: reads ab, writes ba.
		l.wg.Add(2)
		go l.thread(cpu, ba[0], ab[1], true, ready)
		go l.thread(cpu, ab[0], ba[1], false, ready)
	}
	for range 2 * cpus {
		if err := <-ready; err != nil {
			l.stop()
			tb.Fatal(err)
		}
	}
	return l
}

func (l *pingPong) thread(cpu, in, out int, first bool, ready chan<- error) {
	defer l.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		ready <- fmt.Errorf("pin to CPU %d: %w", cpu, err)
		return
	}
	l.mu.Lock()
	l.tids = append(l.tids, unix.Gettid())
	l.mu.Unlock()
	ready <- nil
	buf := []byte{0}
	if first {
		if _, err := unix.Write(out, buf); err != nil {
			return
		}
	}
	for !l.stopF.Load() {
		if n, err := unix.Read(in, buf); err != nil || n == 0 {
			return
		}
		if _, err := unix.Write(out, buf); err != nil {
			return
		}
	}
}

// sumThreads sums, over the load's threads, what parse finds in their
// /proc/self/task/<tid>/<file>.
func (l *pingPong) sumThreads(file string, parse func([]byte) (uint64, error)) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for _, tid := range l.tids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/%s", tid, file))
		if err != nil {
			l.tb.Fatal(err)
		}
		x, err := parse(raw)
		if err != nil {
			l.tb.Fatalf("%s: %v", file, err)
		}
		n += x
	}
	return n
}

// switches is the sum of the load threads' context switches, voluntary
// and not, as the kernel counts them.
func (l *pingPong) switches() uint64 {
	return l.sumThreads("status", func(raw []byte) (uint64, error) {
		var n uint64
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, err
				}
				n += x
			}
		}
		return n, nil
	})
}

// rate is the load's context switches over d: per second of wall time,
// and per second its threads ran (what other work on the machine takes
// from them does not count, so the figure is the cost of a switch).
func (l *pingPong) rate(d time.Duration) rates {
	// The benchmark's own garbage (the object loaded before an "on"
	// window) is collected now, not by background workers taking the
	// CPUs during the window.
	runtime.GC()
	n0, c0, t0 := l.switches(), l.cpuTime(), time.Now()
	time.Sleep(d)
	n1, c1, t1 := l.switches(), l.cpuTime(), time.Now()
	return rates{wall: float64(n1-n0) / t1.Sub(t0).Seconds(), cpu: float64(n1-n0) / (c1 - c0).Seconds()}
}

type rates struct{ wall, cpu float64 }

// cpuTime is the time the load's threads ran (schedstat, first field).
func (l *pingPong) cpuTime() time.Duration {
	return time.Duration(l.sumThreads("schedstat", func(raw []byte) (uint64, error) {
		f := strings.Fields(string(raw))
		if len(f) < 1 {
			return 0, fmt.Errorf("no fields in %q", raw)
		}
		return strconv.ParseUint(f[0], 10, 64)
	}))
}

// stop ends the threads: closing the write ends ends their reads (end of
// file) and writes (a closed descriptor), before any write could meet a
// closed read end.
func (l *pingPong) stop() {
	l.stopF.Store(true)
	for _, fd := range l.wfds {
		_ = unix.Close(fd)
	}
	l.wg.Wait()
	for _, fd := range l.rfds {
		_ = unix.Close(fd)
	}
}

// BenchmarkWalkPrivileged is the cost of the walk that ends a period
// with many threads: benchWalkThreads OS threads of this (observed)
// process each wake every 50 ms, so every one has a record for the
// period; an iteration advances the period and walks every thread of the
// host (sli_take), decoding and adding the records. Reported: the wall
// time of the walk and the records it wrote per period.
func BenchmarkWalkPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	p := startPIDProbe(b, sleepers(b, 1000, 50*time.Millisecond))
	var recs int
	var walk time.Duration
	for b.Loop() {
		time.Sleep(120 * time.Millisecond) // every thread wakes in the period
		p.mu.Lock()
		if _, err := p.endPeriod(); err != nil {
			b.Fatal(err)
		}
		rows, alone := map[uint64]sliSliRow{}, sliSliRow{}
		t0 := time.Now()
		err := p.takeThreads(rows, &alone)
		walk += time.Since(t0)
		recs += p.walk.Len() / taskRecSize
		p.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "walk-ns/period")
	b.ReportMetric(float64(recs)/float64(b.N), "records/period")
}

// sleepers starts a Python process whose n threads each wake every d
// (a Go program's locked threads would queue for the scheduler's two Ps
// instead) and returns its pid; it is killed at cleanup.
func sleepers(tb testing.TB, n int, d time.Duration) int {
	tb.Helper()
	script := fmt.Sprintf(`import sys, threading, time
def sleeper():
    while True:
        time.sleep(%g)
for _ in range(%d):
    threading.Thread(target=sleeper, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
`, d.Seconds(), n)
	cmd := exec.Command("python3", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("python3: %v", err)
	}
	tb.Cleanup(func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		tb.Fatalf("python3 sleepers: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// startPIDProbe starts sli (cpu, node, container, histogram) observing
// process pid, with no report period of its own.
func startPIDProbe(tb testing.TB, pid int) *Probe {
	tb.Helper()
	p := New(procfs.FS{Root: "/"}, identity.NewResolver("/"), withInterval(time.Hour))
	rt := probetest.NewRuntime(tb)
	cfg := probe.Config{SubItems: subItems(tb, "cpu", "node", "container", "histogram"), Params: probe.DefaultParams(),
		Targets: probetest.NewTargets(snoop.Whitelist, pid)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Shutdown(tb, p) })
	return p
}
