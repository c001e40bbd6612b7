package flamegraph

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

// target is a running test program: it printed "ready" and waits for its
// command line.
type target struct{ *childtest.Child }

func startTarget(t *testing.T, bin string) *target {
	t.Helper()
	return startTargetCmd(t, exec.Command(bin))
}

func startTargetCmd(t testing.TB, cmd *exec.Cmd) *target {
	t.Helper()
	cmd.Stderr = os.Stderr
	tg := &target{childtest.Start(t, cmd)}
	tg.Expect(t, "ready")
	return tg
}

// run sends a command and returns the number after "done" (0 if none).
func (tg *target) run(t *testing.T, cmd string) int64 {
	t.Helper()
	tg.Send(t, cmd)
	line := tg.Line(t)
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "done" {
		t.Fatalf("target said %q, want done", line)
	}
	if len(f) == 1 {
		return 0
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func buildC(t *testing.T) string {
	t.Helper()
	probetest.RequireTools(t, "cc")
	bin := filepath.Join(t.TempDir(), "burn")
	out, err := exec.Command("cc", "-O0", "-fno-omit-frame-pointer", "-o", bin, "testdata/burn.c", "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return bin
}

func buildGo(t *testing.T, ldflags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gohot")
	args := []string{"build", "-o", bin}
	if ldflags != "" {
		args = append(args, "-ldflags="+ldflags)
	}
	// go test puts its own GOROOT/bin first on PATH.
	cmd := exec.Command("go", append(args, "./testdata/gohot")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// profiled runs fn with the probe observing only pid, then stops the probe
// (which writes the window) and returns the output directories.
func profiled(t *testing.T, sub []string, pid int, periodMs int, fn func()) (outDir, flameDir string) {
	t.Helper()
	outDir, flameDir, _ = profiledWith(t, sub, pid, periodMs, fn)
	return outDir, flameDir
}

// profiledWith is profiled with probe options; it also returns the lost
// events the probe reported.
func profiledWith(t *testing.T, sub []string, pid int, periodMs int, fn func(), opts ...Option) (outDir, flameDir string, lost uint64) {
	t.Helper()
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sched_switch"))
	outDir, flameDir = t.TempDir(), t.TempDir()
	f := probe.LookupBuiltin(Name)
	var bits uint32
	for _, s := range sub {
		b, _ := f.SubItemBit(s)
		bits |= b
	}
	params := probe.DefaultParams()
	params.OutputDir, params.FlameDir = outDir, flameDir
	params.PerfSamplePeriod = periodMs
	cfg := probe.Config{SubItems: bits, Params: params, Targets: probetest.NewTargets(snoop.Whitelist, pid)}
	p := New(append([]Option{withPeriods(300*time.Millisecond, time.Hour)}, opts...)...)
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	fn()
	rt.Shutdown(t, p)
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %s", n, rt.Logs())
	}
	t.Logf("lost: %d (kernel drops by reason: %v)", rt.LostCount(), p.drops)
	return outDir, flameDir, rt.LostCount()
}

func readFoldedFile(t *testing.T, flameDir string, k kind, pid int) []foldedLine {
	t.Helper()
	return readFolded(t, filepath.Join(flameDir, k.String(), "tmp_"+strconv.Itoa(pid)))
}

// weight sums the counts of stacks holding frame; total sums all.
func weight(lines []foldedLine, frame string) (n, total uint64) {
	for _, l := range lines {
		total += l.count
		for _, f := range l.frames {
			if f == frame {
				n += l.count
				break
			}
		}
	}
	return n, total
}

// checkOutputs: the SVG parses as XML and names frame; the pprof file
// parses and its sample total equals the folded total.
func checkOutputs(t *testing.T, outDir string, k kind, pid int, lines []foldedLine, frame string) {
	t.Helper()
	checkSVG(t, outDir, k, pid, ".svg", frame)
	prof := readPprof(t, outDir, k, pid)
	var sum int64
	for _, s := range prof.Sample {
		sum += s.Value[0]
	}
	_, total := weight(lines, "")
	if uint64(sum) != total || total == 0 {
		t.Errorf("pprof samples total %d, folded total %d", sum, total)
	}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got/want-1) > tol {
		t.Errorf("%s = %.3f, want %.3f within %.0f%%", what, got, want, tol*100)
	} else {
		t.Logf("%s = %.3f (want %.3f)", what, got, want)
	}
}

// cpuRatio runs a target's "cpu" command under the oncpu profile and checks
// the 3:1 split between its two hot functions, and the sample count
// against the CPU time the target measured.
//
// The sample period is 1 ms, below gala-gopher's 10 ms floor for
// perf_sample_period (which the REST API enforces, not the probe): on a
// loaded machine a process runs in slices shorter than the period, each
// sampled once or not at all, so the split's relative error goes as
// 1/sqrt(samples), and 15% needs thousands of them.
func cpuRatio(t *testing.T, bin, fa, fb, cmd string) {
	cpuRatioOf(t, startTarget(t, bin), filepath.Base(bin), fa, fb, cmd)
}

func cpuRatioOf(t *testing.T, tg *target, comm, fa, fb, cmd string) {
	const periodMs = 1
	pid := tg.Pid()
	var cpuNs int64
	outDir, flameDir := profiled(t, []string{"oncpu"}, pid, periodMs, func() { cpuNs = tg.run(t, cmd) })
	lines := readFoldedFile(t, flameDir, onCPU, pid)
	a, total := weight(lines, fa)
	b, _ := weight(lines, fb)
	if a == 0 || b == 0 {
		t.Fatalf("%s %d samples, %s %d, of %d:\n%v", fa, a, fb, b, total, lines)
	}
	within(t, fa+"/"+fb, float64(a)/float64(b), 3, 0.15)
	if t.Failed() {
		t.Logf("folded:\n%v", lines)
	}
	if cpuNs > 0 {
		within(t, "samples x period / CPU time", float64(total)*float64(periodMs*time.Millisecond)/float64(cpuNs), 1, 0.15)
	}
	// The snooper filter: only the target's profile was written.
	ents, err := os.ReadDir(filepath.Join(flameDir, onCPU.String()))
	if err != nil || len(ents) != 1 || ents[0].Name() != "tmp_"+strconv.Itoa(pid) {
		t.Errorf("folded files %v (%v), want tmp_%d only", ents, err, pid)
	}
	for _, l := range lines {
		if l.frames[0] != "["+strconv.Itoa(pid)+"]"+comm {
			t.Errorf("stack %v does not start with the process frame", l.frames)
			break
		}
	}
	checkOutputs(t, outDir, onCPU, pid, lines, fa)
}

func TestOnCPUCPrivileged(t *testing.T) {
	cpuRatio(t, buildC(t), "burn_a", "burn_b", "cpu 800000000")
}

func TestOnCPUGoPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	for _, tc := range []struct{ name, ldflags string }{{"plain", ""}, {"stripped", "-s -w"}} {
		t.Run(tc.name, func(t *testing.T) {
			cpuRatio(t, buildGo(t, tc.ldflags), "main.hotA", "main.hotB", "cpu 1000000000")
		})
	}
}

// TestOnCPUElsewherePrivileged: binaries the host cannot open by the path
// in /proc/<pid>/maps are still named: one on a mount of its own mount
// namespace, as in a container (read through /proc/<pid>/root), and, read
// through /proc/<pid>/map_files, one in a chroot (maps gives the host path,
// which the process's root does not hold) and one deleted after it started.
func TestOnCPUElsewherePrivileged(t *testing.T) {
	probetest.RequireTools(t, "unshare", "sh", "mount", "cp")
	bin := buildGo(t, "-s -w")
	t.Run("mount namespace", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
			"mount -t tmpfs tmpfs "+dir+" && cp "+bin+" "+dir+"/gohot && exec "+dir+"/gohot")
		tg := startTargetCmd(t, cmd)
		pid := tg.Pid()
		maps, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "maps"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "gohot")
		if !strings.Contains(string(maps), " "+path+"\n") {
			t.Fatalf("maps does not name %s:\n%s", path, maps)
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s is visible on the host", path)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "root", path)); err != nil {
			t.Fatal(err)
		}
		cpuRatioOf(t, tg, "gohot", "main.hotA", "main.hotB", "cpu 1000000000")
	})
	t.Run("chroot", func(t *testing.T) {
		root := t.TempDir()
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "gohot"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/gohot")
		cmd.Path = "/gohot"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		if _, err := os.Stat("/gohot"); err == nil {
			t.Fatal("/gohot exists on the host: the test would not show anything")
		}
		cpuRatioOf(t, startTargetCmd(t, cmd), "gohot", "main.hotA", "main.hotB", "cpu 1000000000")
	})
	t.Run("deleted", func(t *testing.T) {
		dir := t.TempDir()
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		del := filepath.Join(dir, "gohot")
		if err := os.WriteFile(del, b, 0o755); err != nil {
			t.Fatal(err)
		}
		tg := startTarget(t, del)
		if err := os.Remove(del); err != nil {
			t.Fatal(err)
		}
		cpuRatioOf(t, tg, "gohot", "main.hotA", "main.hotB", "cpu 1000000000")
	})
}

func TestOffCPUPrivileged(t *testing.T) {
	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	var slept int64
	outDir, flameDir := profiled(t, []string{"offcpu"}, pid, 10, func() { slept = tg.run(t, "sleep 1000") })
	lines := readFoldedFile(t, flameDir, offCPU, pid)
	us, total := weight(lines, "sleepy")
	if us == 0 {
		t.Fatalf("no off-CPU time in sleepy, of %d µs:\n%v", total, lines)
	}
	// The thread's own measure of its life: ten nanosleeps of 100 ms
	// and the few µs of CPU between them.
	within(t, "off-CPU time in sleepy / time the thread measured", float64(us)*1e3/float64(slept), 1, 0.15)
	for _, l := range lines {
		for _, f := range l.frames {
			if isTracingFrame(strings.TrimSuffix(f, "_[k]")) {
				t.Errorf("the BPF program's own frames in %v", l.frames)
				break
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("folded:\n%v", lines)
	}
	checkOutputs(t, outDir, offCPU, pid, lines, "sleepy")
}

// TestKernelStacksPrivileged: time spent in write(2) shows kernel frames,
// named from kallsyms, above the user function that made the call.
func TestKernelStacksPrivileged(t *testing.T) {
	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	_, flameDir := profiled(t, []string{"oncpu"}, pid, 1, func() { tg.run(t, "sys 3000000") })
	lines := readFoldedFile(t, flameDir, onCPU, pid)
	// Most of a one-byte write's time is syscall entry and exit; the
	// write itself is a share of the rest: 8.9-9.6 % on the PVM guest CI
	// runs in, where the sampling timer's interrupt waits for interrupts
	// to be enabled again and ~40 % of the samples land in pvm_irq_enable
	// under do_syscall_64.
	inWrite, total := weight(lines, "vfs_write_[k]")
	var inKernel uint64
	for _, l := range lines {
		if strings.HasSuffix(l.frames[len(l.frames)-1], "_[k]") {
			inKernel += l.count
		}
	}
	if float64(inWrite) < 0.04*float64(total) || float64(inKernel) < 0.5*float64(total) {
		t.Fatalf("%d of %d samples in vfs_write, %d in the kernel:\n%v", inWrite, total, inKernel, lines)
	}
	t.Logf("%d of %d samples in vfs_write, %d in the kernel", inWrite, total, inKernel)
	// The target's own reply ("done ...") is written through stdio: a
	// sample may land in that one write, under libc's __write (which has
	// no frame pointer, so its caller is [unknown]); every other write is
	// sys_loop's.
	var replies uint64
	for _, l := range lines {
		user, kernel := -1, -1
		for i, f := range l.frames {
			if f == "sys_loop" {
				user = i
			}
			if f == "vfs_write_[k]" && kernel < 0 {
				kernel = i
			}
			if f == "[unknown]_[k]" {
				t.Errorf("unnamed kernel frame in %v", l.frames)
			}
		}
		switch {
		case kernel < 0 || (user >= 0 && user < kernel):
		case user < 0 && isLibcWrite(l.frames[firstKernel(l.frames)-1]):
			replies += l.count
		default:
			t.Errorf("vfs_write not under sys_loop: %v", l.frames)
		}
	}
	// a write of one line to a pipe takes a few µs: one sample at most
	// at 1 kHz, two if the timer is unlucky
	if replies > 2 {
		t.Errorf("%d samples in stdio writes, the target made one", replies)
	}
}

// isLibcWrite: glibc names its write(2) wrapper write, __write and
// __libc_write (one address; the symbolizer picks one).
func isLibcWrite(f string) bool {
	return f == "write" || f == "__write" || f == "__libc_write"
}

// firstKernel is the index of the first kernel frame of a folded stack
// (len(frames) when there is none).
func firstKernel(frames []string) int {
	for i, f := range frames {
		if strings.HasSuffix(f, "_[k]") {
			return i
		}
	}
	return len(frames)
}

// TestReconfigurePrivileged: sub-items, sample period and snoopers change
// while the probe runs: the perf events close when oncpu goes, the
// sched_switch hook comes with offcpu, and the new process is observed.
func TestReconfigurePrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sched_switch"))
	bin := buildC(t)
	first, second := startTarget(t, bin), startTarget(t, bin)
	outDir, flameDir := t.TempDir(), t.TempDir()
	params := probe.DefaultParams()
	params.OutputDir, params.FlameDir = outDir, flameDir
	targets := probetest.NewTargets(snoop.Whitelist, first.Pid())
	cfg := probe.Config{SubItems: bitOnCPU, Params: params, Targets: targets}
	p := New(withPeriods(300*time.Millisecond, time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	cpus, err := bpfrt.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	if p.perf.CPUs() != len(cpus) || p.perf.PeriodNs != 10e6 || p.offLink != nil {
		t.Errorf("oncpu: %d perf events for %d CPUs at %d ns, offcpu link %v", p.perf.CPUs(), len(cpus), p.perf.PeriodNs, p.offLink)
	}
	p.mu.Unlock()

	params.PerfSamplePeriod = 20
	cfg.Params = params
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	if p.perf.CPUs() != len(cpus) || p.perf.PeriodNs != 20e6 {
		t.Errorf("after the period change: %d perf events at %d ns", p.perf.CPUs(), p.perf.PeriodNs)
	}
	p.mu.Unlock()

	targets.Set(second.Pid())
	cfg.SubItems = bitOffCPU
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	if p.perf.CPUs() != 0 || p.offLink == nil {
		t.Errorf("offcpu only: %d perf events, offcpu link %v", p.perf.CPUs(), p.offLink)
	}
	p.mu.Unlock()
	first.run(t, "cpu 10000000")
	slept := second.run(t, "sleep 300")
	rt.Shutdown(t, p)

	lines := readFoldedFile(t, flameDir, offCPU, second.Pid())
	us, _ := weight(lines, "sleepy")
	within(t, "off-CPU time in sleepy / measured", float64(us)*1e3/float64(slept), 1, 0.15)
	for _, k := range []kind{onCPU, offCPU} {
		if _, err := os.Stat(filepath.Join(flameDir, k.String(), "tmp_"+strconv.Itoa(first.Pid()))); err == nil {
			t.Errorf("%s: the process no longer observed was written", k)
		}
	}
}

// TestPyroscopePrivileged: with pyroscope_server set, the folded stacks go
// to <server>/ingest in gala-gopher's form; what arrives over all pushes
// equals the folded file of the same run.
func TestPyroscopePrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sched_switch"))
	type ingest struct {
		query url.Values
		body  string
	}
	got := make(chan ingest, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/ingest" {
			got <- ingest{r.URL.Query(), string(b)}
		}
	}))
	defer srv.Close()

	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	outDir, flameDir := t.TempDir(), t.TempDir()
	params := probe.DefaultParams()
	params.OutputDir, params.FlameDir = outDir, flameDir
	params.PyroscopeServer = strings.TrimPrefix(srv.URL, "http://")
	params.MultiInstance = 1
	cfg := probe.Config{SubItems: bitOnCPU, Params: params, Targets: probetest.NewTargets(snoop.Whitelist, pid)}
	p := New(withPeriods(200*time.Millisecond, time.Hour), withPush(500*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	tg.run(t, "cpu 300000000")
	rt.Shutdown(t, p)
	close(got)

	wantName := fmt.Sprintf("gala-gopher-oncpu-%s.%d", systemUUID("/"), pid)
	var pushed []foldedLine
	n := 0
	for in := range got {
		n++
		if in.query.Get("name") != wantName || in.query.Get("units") != "samples" || in.query.Get("sampleRate") != "100" {
			t.Errorf("ingest query %v, want name %s, units samples, sampleRate 100", in.query, wantName)
		}
		from, _ := strconv.ParseInt(in.query.Get("from"), 10, 64)
		until, _ := strconv.ParseInt(in.query.Get("until"), 10, 64)
		if from <= 0 || until < from {
			t.Errorf("from %d until %d", from, until)
		}
		lines, err := parseFolded(strings.NewReader(in.body))
		if err != nil {
			t.Fatal(err)
		}
		pushed = append(pushed, lines...)
	}
	file := readFoldedFile(t, flameDir, onCPU, pid)
	pa, pt := weight(pushed, "burn_a")
	fa, ft := weight(file, "burn_a")
	t.Logf("%d pushes: %d samples (%d in burn_a); folded file %d (%d)", n, pt, pa, ft, fa)
	if n < 2 || pt != ft || pa != fa || fa == 0 {
		t.Errorf("%d pushes: %d samples (%d in burn_a), folded file %d (%d)", n, pt, pa, ft, fa)
	}
}
