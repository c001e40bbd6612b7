package baseinfo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

const delayChildEnv = "GALAGO_BASEINFO_DELAY_CHILD"

// directIOs is how many O_DIRECT reads of directIOSize bytes the "io"
// child makes: large enough that the loop driver's copy, while the
// reader sleeps, outweighs the syscall's own CPU time.
const (
	directIOs    = 200
	directIOSize = 512 << 10
)

// delayChild runs in a re-executed test binary. "spin" pins every thread
// of the process to CPU 0 and spins until killed. "io:<file>" reads the
// file's first 4 KiB directIOs times with O_DIRECT after one byte on
// stdin, then writes the summed wall time of those read(2) calls in ns
// (decimal) on stdout and waits for stdin to close.
func delayChild(mode string) int {
	if mode == "spin" {
		if err := pinAllThreads(0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		os.Stdout.Write([]byte("ready\n"))
		for x := uint64(1); ; x = x*6364136223846793005 + 1 {
			if x == 0 {
				os.Stdout.Write([]byte{0}) // never: keeps x live
			}
		}
	}
	path, ok := strings.CutPrefix(mode, "io:")
	if !ok {
		return 2
	}
	runtime.LockOSThread() // the reads happen on the main thread, whose /proc/<pid>/stat the test reads
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	buf, err := unix.Mmap(-1, 0, directIOSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page aligned
	if err != nil {
		return 4
	}
	os.Stdout.Write([]byte("ready\n"))
	one := make([]byte, 1)
	if _, err := os.Stdin.Read(one); err != nil {
		return 5
	}
	var total time.Duration
	for range directIOs {
		t0 := time.Now()
		if _, err := unix.Pread(fd, buf, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 6
		}
		total += time.Since(t0)
	}
	fmt.Printf("%d\n", total.Nanoseconds())
	_, _ = os.Stdin.Read(one)
	return 0
}

func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

func pinAllThreads(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range tids {
		tid, _ := strconv.Atoi(e.Name())
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
	}
	return nil
}

// startDelayChild starts a child in mode and waits for its "ready" line.
func startDelayChild(t *testing.T, mode string) *childtest.Child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), delayChildEnv+"="+mode, "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	c := childtest.Start(t, cmd, childtest.Kill(), childtest.Name("child "+mode))
	c.Expect(t, "ready")
	return c
}

// runDelay sums the second field (run-queue wait, ns) of
// /proc/<pid>/task/*/schedstat: the ground truth of the CPU delay.
func runDelay(t *testing.T, pid int) uint64 {
	t.Helper()
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("schedstat of %d: %v", pid, err)
	}
	var sum uint64
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // thread exited
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			t.Fatalf("%s: %q", d, b)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

// setDelayAcct writes kernel.task_delayacct and restores it at cleanup.
func setDelayAcct(t *testing.T, on bool) {
	t.Helper()
	const path = "/proc/sys/kernel/task_delayacct"
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s=1 but %s is unreadable: %v", probetest.PrivilegedEnv, path, err)
	}
	v := []byte("0")
	if on {
		v = []byte("1")
	}
	if err := os.WriteFile(path, v, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(path, bytes.TrimSpace(old), 0o644) })
}

// delayRun drives a collector by hand: a baseline, then the end of a
// period, with a real probe configuration and runtime.
type delayRun struct {
	p  *Probe
	rt *probetest.Runtime
	dc *delayCollector
}

func newDelayRun(t *testing.T, pids ...int) *delayRun {
	t.Helper()
	p := New(procfs.FS{})
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	p.rt, p.warned = rt, map[string]bool{}
	p.cfg = probe.Config{SubItems: bitDelay, Params: probe.DefaultParams(),
		Targets: probetest.NewTargets(snoop.Whitelist, pids...)}
	dc := newDelayCollector()
	t.Cleanup(dc.close)
	return &delayRun{p: p, rt: rt, dc: dc}
}

func (d *delayRun) sample(emit bool) { d.dc.sample(d.p.newCycle(d.now(), emit)) }

func (d *delayRun) now() time.Time { return time.Now() }

func (d *delayRun) record(t *testing.T, pid int) *table.Record {
	t.Helper()
	recs, _ := d.rt.Take()
	var got *table.Record
	for _, r := range recs {
		if r.Table == ProcDelay && r.Str("tgid") == strconv.Itoa(pid) {
			if got != nil {
				t.Fatalf("two proc_delay records for %d", pid)
			}
			got = r
		}
	}
	if got == nil {
		t.Fatalf("no proc_delay record for %d in %d records", pid, len(recs))
	}
	return got
}

func num(t *testing.T, r *table.Record, field string) (float64, bool) {
	t.Helper()
	v := r.Values[r.Table.MustIndex(field)]
	return v.Num, v.Set
}

// Two spinning processes share CPU 0: each waits on the run queue while
// the other runs. proc_delay's cpu_delay_ns over a period must match the
// threads' schedstat run delay over the same period (read just before and
// after each sample, so the truth is bracketed).
func TestPrivilegedDelayCPU(t *testing.T) {
	probetest.RequirePrivileged(t)
	setDelayAcct(t, false)
	pa, pb := startDelayChild(t, "spin").Pid(), startDelayChild(t, "spin").Pid()
	d := newDelayRun(t, pa, pb)

	before0 := runDelay(t, pa)
	d.sample(false)
	after0 := runDelay(t, pa)
	time.Sleep(time.Second)
	before1 := runDelay(t, pa)
	d.sample(true)
	after1 := runDelay(t, pa)

	r := d.record(t, pa)
	got, ok := num(t, r, "cpu_delay_ns")
	if !ok {
		t.Fatal("cpu_delay_ns unset")
	}
	lo, hi := float64(before1-after0), float64(after1-before0)
	mid := (lo + hi) / 2
	t.Logf("cpu_delay_ns %.0f, schedstat run delay in [%.0f, %.0f]", got, lo, hi)
	if got < lo*0.9 || got > hi*1.1 {
		t.Errorf("cpu_delay_ns %.0f, schedstat says [%.0f, %.0f]", got, lo, hi)
	}
	// Sharing one CPU, each spinner waits about half the time.
	if mid < 0.3e9 {
		t.Fatalf("schedstat run delay %.0f ns over 1 s: the spinners did not share a CPU", mid)
	}
	if n, ok := num(t, r, "cpu_delay_count"); !ok || n < 1 {
		t.Errorf("cpu_delay_count %v (set %v)", n, ok)
	}
	// task_delayacct is 0: the other delays are omitted, not zeros, and
	// one log line says why.
	for _, f := range []string{"blkio_delay_ns", "swapin_delay_ns", "freepages_delay_ns", "compact_delay_ns"} {
		if _, ok := num(t, r, f); ok {
			t.Errorf("%s set while kernel.task_delayacct=0", f)
		}
	}
	if n := strings.Count(d.rt.Logs(), "kernel.task_delayacct is 0"); n != 1 {
		t.Errorf("%d log lines about kernel.task_delayacct, want 1:\n%s", n, d.rt.Logs())
	}
	_ = pb
}

// blkioTicks is field 42 of /proc/<pid>/stat, delayacct_blkio_ticks: the
// main thread's block I/O delay in clock ticks, read apart from taskstats.
func blkioTicks(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	v, err := strconv.ParseFloat(f[42-3], 64) // fields counted from 1; f[0] is field 3
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A process reads a loop device directIOs times with O_DIRECT (each read
// sleeps while the loop driver's worker serves it) with
// kernel.task_delayacct=1. Its blkio waits are counted at most once per
// read (at least half of them: see the skew below), and
// its blkio delay matches /proc/<pid>/stat's delayacct_blkio_ticks over
// the same period to the tick. The wall time the process measured around
// its reads is logged but not a bound: on this VM the kernel stamps a wait's
// start and end with local_clock() of two CPUs (the sleeper's and the loop
// worker's), which differ by up to about a millisecond, and the kernel's
// total carries that skew.
func TestPrivilegedDelayBlockIO(t *testing.T) {
	probetest.RequirePrivileged(t)
	setDelayAcct(t, true)
	// A loop device: each O_DIRECT read is served by the loop driver's
	// worker thread, so the reader always sleeps on it (a virtio disk may
	// complete a read before the reader gets to sleep).
	probetest.RequireTools(t, "losetup")
	img := filepath.Join(t.TempDir(), "img")
	page := make([]byte, 1<<20)
	binary.LittleEndian.PutUint64(page, 42)
	if err := os.WriteFile(img, page, 0o600); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(runOut(t, "losetup", "--find", "--show", img))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", path).Run() })

	c := startDelayChild(t, "io:"+path)
	pid := c.Pid()
	d := newDelayRun(t, pid)
	d.sample(false)
	ticks0 := blkioTicks(t, pid)
	c.Write(t, []byte{'g'})
	wall, err := strconv.ParseFloat(strings.TrimSpace(c.Line(t)), 64)
	if err != nil {
		t.Fatal(err)
	}
	ticks1 := blkioTicks(t, pid)
	d.sample(true)
	r := d.record(t, pid)
	got, ok := num(t, r, "blkio_delay_ns")
	tickNS := 1e9 / float64(procfs.UserHZ)
	if dt := (ticks1 - ticks0) * tickNS; dt > 1000e9 {
		// The kernel's own total jumped by more than the test's whole run
		// (a wait whose start stamp was lost): galago must drop it, say so
		// and count an error.
		t.Logf("the kernel's blkio delay grew %.0f s in a fraction of a second", dt/1e9)
		if ok {
			t.Fatalf("blkio_delay_ns %.0f reported; the kernel's total jumped %.0f ns", got, dt)
		}
		if !strings.Contains(d.rt.Logs(), "grew more than the period allows") {
			t.Fatalf("no log line about the dropped value:\n%s", d.rt.Logs())
		}
		return
	}
	if !ok {
		t.Fatal("blkio_delay_ns unset with kernel.task_delayacct=1")
	}
	n, _ := num(t, r, "blkio_delay_count")
	t.Logf("blkio_delay_ns %.0f over %.0f waits; the %d reads took %.0f ns", got, n, directIOs, wall)
	if dt := (ticks1 - ticks0) * tickNS; got < dt-tickNS || got > dt+tickNS {
		t.Errorf("blkio_delay_ns %.0f, /proc/%d/stat says %.0f ns (%v ticks)", got, pid, dt, ticks1-ticks0)
	}
	// A wait whose end stamp is not after its start is not counted by the
	// kernel (delayacct_end): the waker stamps the end with its own CPU's
	// clock, so with the skew above a share of the reads' waits is
	// skipped. CI saw 156 of 200 counted (the total 83 ms against 33 ms of
	// wall time: the counted waits carry the skew the others lost).
	if n < directIOs/2 || n > directIOs+5 {
		t.Errorf("blkio_delay_count %.0f for %d reads", n, directIOs)
	}
}
