package jvm

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/hotspot/hotspottest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// The load testdata/JvmLoad runs: 5 non-daemon and 3 daemon threads, 2
// deadlocked daemon threads, 4 System.gc() calls, 32 MiB kept.
const (
	workers, daemons, lockers, gcs, keptMiB = 5, 3, 2, 4, 32
)

// TestJVMPrivileged runs testdata/JvmLoad on OpenJDK 17, on the host and
// in a container of its own (new pid and mount namespaces, a /tmp of its
// own: its hsperfdata and attach socket only reachable through
// /proc/<pid>/root, its pid 1 inside), and compares the probe's rows with
// the JVM's own ThreadMXBean (thread counts, deadlocked threads), jstat
// (GC counts) and jcmd GC.heap_info (heap used, within 5%).
func TestJVMPrivileged(t *testing.T) {
	probetest.RequireTools(t, "javac", "java", "jcmd", "jstat", "unshare", "mount")
	dir := hotspottest.Javac(t, "testdata/JvmLoad.java")
	t.Run("host", func(t *testing.T) { testJVM(t, dir, false) })
	t.Run("container", func(t *testing.T) { testJVM(t, dir, true) })
}

func testJVM(t *testing.T, classDir string, container bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The class path is the working directory through /proc: in the
	// container the tmpfs hides its path.
	java := fmt.Sprintf("exec java -XX:+UseG1GC -Xms64m -Xmx256m -cp /proc/self/cwd JvmLoad %d %d %d %d", workers, daemons, gcs, keptMiB)
	cmd := exec.CommandContext(ctx, "sh", "-c", java)
	if container {
		cmd = hotspottest.ContainerCommand(ctx, classDir, java)
	}
	cmd.Dir = classDir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("JvmLoad ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); l != "ready" {
		t.Fatalf("JvmLoad said %q", l)
	}
	pid := javaPID(t, cmd.Process.Pid, container)

	p := New(procfs.FS{}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	targets := probetest.NewTargets(snoop.Whitelist, pid)
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams(), Targets: targets}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	// The start's collection attaches: the JVM's Attach Listener thread
	// starts then, and is counted from the next.
	rt.WaitTable(t, table.JvmThread, 1, nil)
	rt.Take()
	p.loop.Collect(time.Now())
	recs, _ := rt.Take()
	fmt.Fprintln(stdin, "counts")
	f := strings.Fields(next())
	if len(f) != 8 || f[0] != "threads" {
		t.Fatalf("JvmLoad answered %q", f)
	}
	mx := map[string]float64{}
	for i, k := range []string{"threads_current", "threads_daemon", "threads_peak", "threads_started_total", "threads_deadlocked", "base", "base_started"} {
		mx[k], _ = strconv.ParseFloat(f[i+1], 64)
	}
	row := func(tbl *table.Table, key, val string) *table.Record {
		t.Helper()
		for _, r := range recs {
			if r.Table == tbl && r.Str("tgid") == strconv.Itoa(pid) && (key == "" || r.Str(key) == val) {
				if r.Str("name") != "JvmLoad" {
					t.Errorf("%s name %q", tbl.Name, r.Str("name"))
				}
				return r
			}
		}
		t.Fatalf("no %s row %s=%s for pid %d", tbl.Name, key, val, pid)
		return nil
	}
	num := func(r *table.Record, field string) float64 {
		t.Helper()
		v := r.Values[r.Table.MustIndex(field)]
		if !v.Set {
			t.Fatalf("%s.%s not set", r.Table.Name, field)
		}
		return v.Num
	}

	// Threads: exactly as the JVM's own ThreadMXBean counts them, and the
	// program's threads on top of what ran before them.
	th := row(table.JvmThread, "", "")
	for _, k := range []string{"threads_current", "threads_daemon", "threads_peak", "threads_started_total", "threads_deadlocked"} {
		if got := num(th, k); got != mx[k] {
			t.Errorf("%s = %v, ThreadMXBean says %v", k, got, mx[k])
		}
	}
	if got, want := mx["threads_started_total"]-mx["base_started"], float64(workers+daemons+lockers+1); got != want {
		// +1: the Attach Listener the probe's attach started.
		t.Errorf("threads started since the program's base: %v, want %v", got, want)
	}
	if got := num(th, "threads_deadlocked"); got != lockers {
		t.Errorf("threads_deadlocked = %v, want %d", got, lockers)
	}

	// GC counts: jstat's.
	js := jstat(t, pid)
	for gc, col := range map[string]string{"G1 Young Generation": "YGC", "G1 Old Generation": "FGC", "G1 concurrent cycle pauses": "CGC"} {
		if got := num(row(table.JvmGc, "gc", gc), "gc_coll_secs_count"); got != js[col] {
			t.Errorf("%s count %v, jstat %s %v", gc, got, col, js[col])
		}
	}
	if got := num(row(table.JvmGc, "gc", "G1 Old Generation"), "gc_coll_secs_count"); got != gcs {
		t.Errorf("full collections %v, the program called System.gc() %d times", got, gcs)
	}
	if got, want := num(row(table.JvmGc, "gc", "G1 Old Generation"), "gc_coll_secs_sum"), js["FGCT"]; math.Abs(got-want) > 0.0011 {
		t.Errorf("full collection time %v s, jstat FGCT %v", got, want)
	}

	// Heap used: jcmd GC.heap_info's, within 5%; at least what is kept.
	out, err := exec.CommandContext(ctx, "jcmd", strconv.Itoa(pid), "GC.heap_info").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd: %v\n%s", err, out)
	}
	h := parseHeapInfo(string(out))
	heap := row(table.JvmMem, "area", "heap")
	used := num(heap, "mem_bytes_used")
	t.Logf("heap used %v, jcmd %v; committed %v; max %v", used, h.heap.used, num(heap, "mem_bytes_commit"), num(heap, "mem_bytes_max"))
	if !h.heapFound || math.Abs(used-float64(h.heap.used)) > 0.05*float64(h.heap.used) || used < keptMiB<<20 {
		t.Errorf("heap used %v, jcmd GC.heap_info %v (%d MiB kept)", used, h.heap.used, keptMiB)
	}
	// Without attach, the heap is hsperfdata's: within 5% of jcmd too.
	pd, err := hotspot.ReadPerfData(p.jvms[pid].perfPath)
	if err != nil {
		t.Fatal(err)
	}
	fallback := &snapshot{pd: pd, deadlocked: -1, cpuSecs: -1}
	for _, r := range fallback.records(pid, time.Now(), time.Second) {
		if r.Table == table.JvmMem && r.Str("area") == "heap" {
			u := num(r, "mem_bytes_used")
			t.Logf("hsperfdata heap used %v", u)
			if math.Abs(u-float64(h.heap.used)) > 0.05*float64(h.heap.used) {
				t.Errorf("hsperfdata heap used %v, jcmd GC.heap_info %v", u, h.heap.used)
			}
		}
	}
	if got := num(heap, "mem_bytes_max"); got != 256<<20 {
		t.Errorf("heap max %v, -Xmx256m", got)
	}
	// Metaspace: the attach path reads GC.heap_info's own line. The test's
	// jcmd comes later and Metaspace only grows here (the attach commands
	// load classes: ~56 KiB seen), so the probe's value is at most jcmd's
	// and within 10% of it.
	if got, want := num(row(table.JvmMemPool, "pool", "Metaspace"), "mem_pool_bytes_used"), float64(h.metaspace.used); want <= 0 || got > want || got < 0.9*want {
		t.Errorf("Metaspace used %v, jcmd GC.heap_info %v", got, want)
	}
	row(table.JvmMemPool, "pool", "CodeHeap 'non-nmethods'")
	info := row(table.JvmInfo, "", "")
	if info.Str("runtime") != "OpenJDK Runtime Environment" || !strings.HasPrefix(info.Str("version"), "17.") {
		t.Errorf("jvm_info runtime %q version %q", info.Str("runtime"), info.Str("version"))
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %s", n, rt.Logs())
	}
}

// javaPID is the JVM's pid: the shell's (exec), or in a container the
// child of unshare's forked shell.
func javaPID(t *testing.T, pid int, container bool) int {
	t.Helper()
	if !container {
		return pid
	}
	return hotspottest.ContainerJVM(t, pid)
}

// jstat runs jstat -gc and returns its columns.
func jstat(t *testing.T, pid int) map[string]float64 {
	t.Helper()
	out, err := exec.Command("jstat", "-gc", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatalf("jstat: %v\n%s", err, out)
	}
	l := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(l) != 2 {
		t.Fatalf("jstat: %q", out)
	}
	names, vals := strings.Fields(l[0]), strings.Fields(l[1])
	m := map[string]float64{}
	for i := range min(len(names), len(vals)) {
		m[names[i]], _ = strconv.ParseFloat(vals[i], 64)
	}
	return m
}
