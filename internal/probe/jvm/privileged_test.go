package jvm

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/childtest"
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
	mappedBytes                             = 3<<20 + 100 // JvmLoad.MAPPED
)

// directBytes are the direct buffers JvmLoad allocates (JvmLoad.DIRECT).
var directBytes = []int{1000, 2000, 3000, 40960}

// TestJVMPrivileged runs testdata/JvmLoad on OpenJDK 17, on the host and
// in a container of its own (new pid and mount namespaces, a /tmp of its
// own: its hsperfdata and attach socket only reachable through
// /proc/<pid>/root, its pid 1 inside), and compares the probe's rows with
// the JVM's own ThreadMXBean (thread counts, deadlocked threads), jstat
// (GC counts) and jcmd GC.heap_info (heap used, between its values before
// and after the collection), and the buffer pools and after-collection
// usage (read over JMX) with the JVM's own BufferPoolMXBeans and
// MemoryPoolMXBeans. The container has a network namespace of its own:
// its JMX connector is reachable from inside only.
// Then, in parallel, one short run each under the Serial and the
// Parallel collector (testPools).
func TestJVMPrivileged(t *testing.T) {
	probetest.RequireTools(t, "javac", "java", "jcmd", "jstat", "unshare", "mount", "ip")
	dir := hotspottest.Javac(t, "testdata/JvmLoad.java")
	t.Run("host", func(t *testing.T) { testJVM(t, dir, false) })
	t.Run("container", func(t *testing.T) { testJVM(t, dir, true) })
	t.Run("pools", func(t *testing.T) {
		for _, gc := range []string{"Serial", "Parallel"} {
			t.Run(gc, func(t *testing.T) {
				t.Parallel()
				testPools(t, dir, gc)
			})
		}
	})
}

// testPools runs JvmLoad (no threads of its own, one System.gc(), 8 MiB
// kept) under the Serial or Parallel collector, on the host, and compares
// the probe's jvm_mem_pool and jvm_gc rows with the JVM's own
// MemoryPoolMXBeans and GarbageCollectorMXBeans, printed before and
// after the probe's collection: the same pool names, used between the
// two (within 5%), committed, max and the CollectionUsage exactly (no
// collection in between), collection counts exactly.
func testPools(t *testing.T, classDir, gc string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stdin, next, pid := startJvmLoad(ctx, t, classDir, "-XX:+Use"+gc+"GC -Xms64m -Xmx256m -cp /proc/self/cwd JvmLoad 0 0 1 8", false)
	p := New(procfs.FS{}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, pid)}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	startCollected(t, rt, p)
	type mx struct{ v [6]float64 } // used, committed, max, coll used, committed, max
	own := func() (map[string]mx, map[string]float64) {
		t.Helper()
		fmt.Fprintln(stdin, "mem")
		pools, gcs := map[string]mx{}, map[string]float64{}
		for l := next(); l != "end"; l = next() {
			f := strings.Split(l, "\t")
			switch {
			case f[0] == "mem" && len(f) == 8:
				var m mx
				for i := range m.v {
					m.v[i], _ = strconv.ParseFloat(f[i+2], 64)
				}
				pools[f[1]] = m
			case f[0] == "gc" && len(f) == 3:
				gcs[f[1]], _ = strconv.ParseFloat(f[2], 64)
			default:
				t.Fatalf("JvmLoad answered %q", l)
			}
		}
		return pools, gcs
	}
	before, _ := own()
	// hsperfdata's young-space used is a sample (PerfDataSamplingInterval,
	// 50 ms): wait for one taken after the reading above, so that the
	// probe's value is not older than it (CI saw a Parallel eden sampled
	// before the answer's own 1 MB of allocations).
	time.Sleep(120 * time.Millisecond)
	p.loop.Collect(time.Now())
	recs, _ := rt.Take()
	after, gcs := own()
	got := map[string]*table.Record{}
	for _, r := range recs {
		if r.Str("tgid") != strconv.Itoa(pid) {
			continue
		}
		switch r.Table {
		case table.JvmMemPool:
			got[r.Str("pool")] = r
		case table.JvmGc:
			if n, ok := gcs[r.Str("gc")]; !ok || r.Values[table.JvmGc.MustIndex("gc_coll_secs_count")].Num != n {
				t.Errorf("jvm_gc %q count %v, the JVM's GarbageCollectorMXBeans: %v", r.Str("gc"), r.Values[table.JvmGc.MustIndex("gc_coll_secs_count")].Num, gcs)
			}
			delete(gcs, r.Str("gc"))
		}
	}
	if len(gcs) != 0 {
		t.Errorf("collectors without a jvm_gc row: %v", gcs)
	}
	fields := []string{"mem_pool_bytes_used", "mem_pool_bytes_commit", "mem_pool_bytes_max", "mem_pool_coll_used_bytes", "mem_pool_coll_commit_bytes", "mem_pool_coll_max_bytes"}
	for name, a := range after {
		r := got[name]
		if r == nil {
			t.Errorf("no jvm_mem_pool row for the JVM's pool %q", name)
			continue
		}
		delete(got, name)
		t.Logf("%s: JVM before %v after %v", name, before[name].v, a.v)
		for i, f := range fields {
			v := r.Values[table.JvmMemPool.MustIndex(f)]
			b := before[name].v[i]
			switch {
			case i < 2 && a.v[3] == -2:
				// A non-heap pool's (no CollectionUsage) used and
				// committed: its own sources, checked in testJVM.
			case a.v[i] < 0:
				// JMX's undefined (-1: no max; -2: no CollectionUsage).
				if v.Set {
					t.Errorf("%s %s = %v, the JVM has %v", name, f, v.Num, a.v[i])
				}
			case !v.Set:
				t.Errorf("%s %s not set, the JVM has %v", name, f, a.v[i])
			case i == 0:
				// The JVM allocates while it answers (and the sample
				// may be up to 50 ms older than the collection): 5% of
				// the used or of the committed size, whichever is
				// larger (a small eden's 16 MiB moves by more than 5%
				// of its used).
				slack := 0.05 * max(min(b, a.v[i]), a.v[1])
				if v.Num < min(b, a.v[i])-slack || v.Num > max(b, a.v[i])+slack {
					t.Errorf("%s used %v, the JVM's %v before and %v after", name, v.Num, b, a.v[i])
				}
			case b != a.v[i]:
				t.Errorf("%s %s moved in the JVM: %v, then %v", name, f, b, a.v[i])
			case v.Num != a.v[i]:
				t.Errorf("%s %s = %v, the JVM's %v", name, f, v.Num, a.v[i])
			}
		}
	}
	for name := range got {
		t.Errorf("jvm_mem_pool row %q: no such pool in the JVM", name)
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %s", n, rt.Logs())
	}
}

func testJVM(t *testing.T, classDir string, container bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdin, next, pid := startJvmLoad(ctx, t, classDir, fmt.Sprintf("-XX:+UseG1GC -Xms64m -Xmx256m -cp /proc/self/cwd JvmLoad %d %d %d %d",
		workers, daemons, gcs, keptMiB), container)
	p := New(procfs.FS{}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	targets := probetest.NewTargets(snoop.Whitelist, pid)
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams(), Targets: targets}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	// The start's collection attaches: the JVM's Attach Listener thread
	// starts then, and is counted from the next.
	startCollected(t, rt, p)
	// The heap is read before the collection and again after it (below):
	// the JVM allocates in between (the attach commands, the counts the
	// program prints), in G1 a whole TLAB at a time.
	before := jcmdHeapInfo(ctx, t, pid)
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
	if got, want := mx["threads_started_total"]-mx["base_started"], float64(workers+daemons+lockers+1); got < want {
		// +1: the Attach Listener the probe's attach started; the
		// management agent it started runs RMI's and JMX's threads too.
		t.Errorf("threads started since the program's base: %v, want at least %v", got, want)
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

	// Heap used: between jcmd GC.heap_info's before the collection and
	// after it, give or take 5% (a young collection in between would lower
	// it); at least what is kept.
	h := jcmdHeapInfo(ctx, t, pid)
	heap := row(table.JvmMem, "area", "heap")
	used := num(heap, "mem_bytes_used")
	t.Logf("heap used %v, jcmd %v before and %v after; committed %v; max %v", used, before.heap.used, h.heap.used, num(heap, "mem_bytes_commit"), num(heap, "mem_bytes_max"))
	lo, hi := float64(min(before.heap.used, h.heap.used)), float64(max(before.heap.used, h.heap.used))
	if !h.heapFound || !before.heapFound || used < 0.95*lo || used > 1.05*hi || used < keptMiB<<20 {
		t.Errorf("heap used %v, jcmd GC.heap_info %v before and %v after (%d MiB kept)", used, before.heap.used, h.heap.used, keptMiB)
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
	checkMBeans(t, stdin, next, row, num)
	info := row(table.JvmInfo, "", "")
	if info.Str("runtime") != "OpenJDK Runtime Environment" || !strings.HasPrefix(info.Str("version"), "17.") {
		t.Errorf("jvm_info runtime %q version %q", info.Str("runtime"), info.Str("version"))
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %s", n, rt.Logs())
	}
}

// startJvmLoad starts "java <args>" (JvmLoad) in classDir, on the host or
// in a container, until ctx ends or the test does, and waits for its
// "ready". It returns its stdin, its next output line and its pid.
func startJvmLoad(ctx context.Context, t *testing.T, classDir, args string, container bool) (io.Writer, func() string, int) {
	t.Helper()
	// The class path is the working directory through /proc: in the
	// container the tmpfs hides its path.
	java := "exec java " + args
	cmd := exec.CommandContext(ctx, "sh", "-c", java)
	if container {
		cmd = hotspottest.NetContainerCommand(ctx, classDir, java)
	}
	cmd.Dir = classDir
	cmd.Stderr = os.Stderr
	c := childtest.Start(t, cmd, childtest.Kill(), childtest.Name("JvmLoad"))
	next := func() string {
		t.Helper()
		return c.Line(t)
	}
	c.Expect(t, "ready")
	return c.Stdin, next, javaPID(t, c.Pid(), container)
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

// jcmdHeapInfo runs jcmd GC.heap_info.
func jcmdHeapInfo(ctx context.Context, t *testing.T, pid int) heapInfo {
	t.Helper()
	out, err := exec.CommandContext(ctx, "jcmd", strconv.Itoa(pid), "GC.heap_info").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd: %v\n%s", err, out)
	}
	return parseHeapInfo(string(out))
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

// checkMBeans compares the jvm_buf_pool rows and jvm_mem_pool's coll_*
// fields with the JVM's own MXBeans, printed after the probe read them
// (the program is idle after its collections: they do not move).
func checkMBeans(t *testing.T, stdin io.Writer, next func() string, row func(*table.Table, string, string) *table.Record, num func(*table.Record, string) float64) {
	t.Helper()
	fmt.Fprintln(stdin, "pools")
	colls := 0
	for l := next(); l != "end"; l = next() {
		f := strings.Split(l, "\t")
		if len(f) != 5 {
			t.Fatalf("JvmLoad answered %q", l)
		}
		var v [3]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(f[i+2], 64)
		}
		t.Logf("JVM's own: %s", l)
		switch f[0] {
		case "buf":
			if f[1] != "direct" && f[1] != "mapped" {
				continue // "mapped - 'non-volatile memory'": not a gala-gopher pool
			}
			r := row(table.JvmBufPool, "pool", f[1])
			for i, k := range []string{"buffer_pool_used_buffers", "buffer_pool_used_bytes", "buffer_pool_capacity_bytes"} {
				if got := num(r, k); got != v[i] {
					t.Errorf("%s %s = %v, its BufferPoolMXBean says %v", f[1], k, got, v[i])
				}
			}
			// Ground truth of the program's own: its buffers are there.
			if f[1] == "mapped" && (v[0] != 1 || v[2] != mappedBytes) {
				t.Errorf("mapped pool: %v buffers of %v bytes, the program mapped 1 of %d", v[0], v[2], mappedBytes)
			}
			if f[1] == "direct" && (v[0] < float64(len(directBytes)) || v[2] < float64(sum(directBytes))) {
				t.Errorf("direct pool: %v buffers of %v bytes, the program allocated %d of %d", v[0], v[2], len(directBytes), sum(directBytes))
			}
		case "coll":
			colls++
			r := row(table.JvmMemPool, "pool", f[1])
			for i, k := range []string{"mem_pool_coll_used_bytes", "mem_pool_coll_commit_bytes", "mem_pool_coll_max_bytes"} {
				if v[i] < 0 { // JMX's "undefined" (G1 Eden's max): absent
					if r.Values[r.Table.MustIndex(k)].Set {
						t.Errorf("%s %s set, its CollectionUsage has %v", f[1], k, v[i])
					}
					continue
				}
				if got := num(r, k); got != v[i] {
					t.Errorf("%s %s = %v, its CollectionUsage says %v", f[1], k, got, v[i])
				}
			}
		}
	}
	if colls != 3 {
		t.Errorf("%d pools with a CollectionUsage, G1 has 3", colls)
	}
	// No collection usage: the fields are absent, not zero.
	meta := row(table.JvmMemPool, "pool", "Metaspace")
	if meta.Values[meta.Table.MustIndex("mem_pool_coll_used_bytes")].Set {
		t.Error("Metaspace has a coll_used_bytes: JMX has no CollectionUsage for it")
	}
}

func sum(n []int) int {
	s := 0
	for _, x := range n {
		s += x
	}
	return s
}
