package flamegraph

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

// The profiling benchmarks of BENCHMARKS.md ("Profiling"). Root only
// (GALAGO_PRIVILEGED_TESTS=1), one iteration each (-benchtime 1x): each
// reports its own figures.

func buildSpin(b *testing.B) string {
	b.Helper()
	probetest.RequireTools(b, "cc")
	bin := filepath.Join(b.TempDir(), "spin")
	if out, err := exec.Command("cc", "-O0", "-fno-omit-frame-pointer", "-o", bin, "testdata/spin.c").CombinedOutput(); err != nil {
		b.Fatalf("cc: %v\n%s", err, out)
	}
	return bin
}

// startSpin starts testdata/spin.c (built by buildSpin) with args.
func startSpin(b *testing.B, bin string, args ...string) *target {
	b.Helper()
	return startTargetCmd(b, exec.Command(bin, args...))
}

// round spins n iterations and returns the round's CPU time.
func round(b *testing.B, s *target, n uint64) time.Duration {
	b.Helper()
	s.Send(b, strconv.FormatUint(n, 10))
	l := s.Line(b)
	f := strings.Fields(l)
	if len(f) != 2 {
		b.Fatalf("spin said %q", l)
	}
	cpu, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		b.Fatalf("spin said %q", l)
	}
	return time.Duration(cpu)
}

// startOncpu starts the probe's oncpu sub-item at the default
// perf_sample_period on pids; stop stops it and returns the samples it
// wrote to the folded files and the kernel's statistics of the sampling
// program (BPF statistics must be on to have them).
func startOncpu(b *testing.B, pids ...int) (stop func() (uint64, ebpf.ProgramStats)) {
	b.Helper()
	probetest.RequirePrivileged(b)
	bit, _ := probe.LookupBuiltin(Name).SubItemBit("oncpu")
	params := probe.DefaultParams()
	params.OutputDir, params.FlameDir = b.TempDir(), b.TempDir()
	cfg := probe.Config{SubItems: bit, Params: params, Targets: probetest.NewTargets(snoop.Whitelist, pids...)}
	p := New(withPeriods(drainInterval, time.Hour))
	rt := probetest.NewRuntime(b, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		b.Fatal(err)
	}
	return func() (uint64, ebpf.ProgramStats) {
		st, err := p.coll.Programs["on_cpu"].Stats()
		if err != nil {
			b.Fatal(err)
		}
		rt.Shutdown(b, p)
		if n := rt.LostCount(); n != 0 {
			b.Logf("lost %d", n)
		}
		var n uint64
		for _, pid := range pids {
			raw, err := os.ReadFile(filepath.Join(params.FlameDir, onCPU.String(), "tmp_"+strconv.Itoa(pid)))
			if err != nil {
				continue // never sampled
			}
			for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				if i := strings.LastIndexByte(l, ' '); i > 0 {
					c, _ := strconv.ParseUint(l[i+1:], 10, 64)
					n += c
				}
			}
		}
		return n, *st
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkOncpuOverheadPrivileged: the throughput of a CPU-bound C
// program (iterations per second of its own CPU time, which includes the
// sampling interrupts and the BPF program run on its behalf) with oncpu
// on at the default perf_sample_period (10 ms) and off, A/B interleaved
// (on/off order alternating), GALAGO_BENCH_PAIRS pairs (default 7) of
// rounds of 2e8 iterations, each "on" round after a warm-up round and the
// probe's first drain. CPU time, not wall time: on a machine shared
// with other work the wall time measures the others. Reports the median
// on/off ratio, its spread, and the samples taken per second of
// the program's CPU.
func BenchmarkOncpuOverheadPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	s := startSpin(b, buildSpin(b))
	pairs := 7
	if v, err := strconv.Atoi(os.Getenv("GALAGO_BENCH_PAIRS")); err == nil && v >= 5 {
		pairs = v
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	const n = 200_000_000
	round(b, s, n) // warm-up
	var ratios []float64
	var samples uint64
	var onCPU, bpf time.Duration
	var runs uint64
	for range b.N {
		for i := range pairs {
			var on, off time.Duration
			measureOn := func() {
				stop := startOncpu(b, s.Pid())
				// Steady state: the probe's first drain (reading
				// kallsyms and the ELF files, ~0.2 s of CPU on the
				// other CPU) is done before the measured round.
				round(b, s, n/4)
				time.Sleep(drainInterval + 500*time.Millisecond)
				on = round(b, s, n)
				k, st := stop()
				samples += k
				bpf += st.Runtime
				runs += st.RunCount
				onCPU += on
			}
			if i%2 == 0 {
				measureOn()
				off = round(b, s, n)
			} else {
				off = round(b, s, n)
				measureOn()
			}
			// throughput on / off = (n/on) / (n/off)
			ratios = append(ratios, off.Seconds()/on.Seconds())
			b.Logf("pair %d: off %v on %v ratio %.4f", i, off, on, off.Seconds()/on.Seconds())
		}
	}
	b.ReportMetric(median(ratios), "throughput-on/off")
	b.ReportMetric(slices.Min(ratios), "min-ratio")
	b.ReportMetric(slices.Max(ratios), "max-ratio")
	b.ReportMetric(float64(samples)/onCPU.Seconds(), "samples/cpu-s")
	// Every run on every CPU (the other processes' samples stop at the
	// filter); the target's share of its CPU is samples/s × this.
	b.ReportMetric(float64(bpf.Nanoseconds())/float64(runs), "bpf-ns/run")
}

// cpuTime is this process's user+system CPU time (the agent's: the probe
// runs in the benchmark's process).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKB is VmRSS of this process.
func rssKB(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkOncpuProcsPrivileged: oncpu at the default period over
// GALAGO_BENCH_PROCS (default 100) copies of spin, each on the CPU 2 ms
// of every 200 ms (1 CPU in all at 100 copies), for GALAGO_BENCH_SECONDS
// (default 10) with the default drain interval and the outputs written
// at the stop: the agent's CPU (this process: the probe runs here) per
// 1000 samples from after the start to before the stop (the drains every
// 2 s: reading the maps, naming the stacks, the first time reading
// kallsyms and each ELF file), the CPU of the stop (the outputs: SVG,
// folded and pprof files per process), and its RSS (and growth over the
// start) before the stop, the window's profiles held.
func BenchmarkOncpuProcsPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	procs, secs := 100, 10
	if v, err := strconv.Atoi(os.Getenv("GALAGO_BENCH_PROCS")); err == nil && v > 0 {
		procs = v
	}
	if v, err := strconv.Atoi(os.Getenv("GALAGO_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	bin := buildSpin(b)
	pids := make([]int, procs)
	for i := range pids {
		pids[i] = startSpin(b, bin, "duty", "2", "200").Pid()
	}
	for range b.N {
		rss0 := rssKB(b)
		stop := startOncpu(b, pids...)
		cpu0 := cpuTime(b)
		time.Sleep(time.Duration(secs) * time.Second)
		rss1 := rssKB(b) // the profiles of the window held
		cpu1 := cpuTime(b)
		samples, _ := stop()
		cpuStop := cpuTime(b) - cpu1
		cpu := cpu1 - cpu0
		if samples == 0 {
			b.Fatal("no samples")
		}
		b.ReportMetric(float64(samples), "samples")
		b.ReportMetric(cpu.Seconds()*1e3/float64(samples)*1000, "agent-cpu-ms/1k-samples")
		b.ReportMetric(cpuStop.Seconds()*1e3, "stop-outputs-cpu-ms")
		b.ReportMetric(float64(rss1)/1024, "rss-MiB")
		b.ReportMetric(float64(rss1-rss0)/1024, "rss-growth-MiB")
	}
}
