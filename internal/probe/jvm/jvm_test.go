package jvm

import (
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/table"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fixturePerfData(t testing.TB) *hotspot.PerfData {
	t.Helper()
	pd, err := hotspot.ParsePerfData([]byte(readFixture(t, "hsperfdata-g1-jdk17")))
	if err != nil {
		t.Fatal(err)
	}
	return pd
}

// TestPerfDataFixture: the hsperfdata of testdata/JvmLoad (5 workers, 3
// daemons, 2 deadlocked threads, 4 System.gc() calls, 32 MiB kept), read
// as jstat read it (testdata/jstat_gc.txt, taken at the same time).
func TestPerfDataFixture(t *testing.T) {
	pd := fixturePerfData(t)
	for name, want := range map[string]int64{
		"sun.gc.collector.0.invocations":   5,              // jstat YGC
		"sun.gc.collector.1.invocations":   4,              // FGC: the System.gc() calls
		"sun.gc.collector.2.invocations":   7,              // CGC
		"sun.gc.generation.1.space.0.used": 66714*1024 + 0, // OU, KiB in jstat
		"sun.os.hrt.frequency":             1e9,
	} {
		got := pd.Longs[name]
		if name == "sun.gc.generation.1.space.0.used" {
			got = got / 1024 * 1024 // jstat rounds to 0.1 KiB
		}
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	for name, want := range map[string]string{
		"sun.rt.javaCommand":         "JvmLoad 5 3 4 32",
		"sun.gc.policy.name":         "GarbageFirst",
		"sun.gc.collector.0.name":    "G1 young collection pauses",
		"java.property.java.version": "17.0.15",
	} {
		if got := pd.Strings[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestParsePerfDataErrors(t *testing.T) {
	good := []byte(readFixture(t, "hsperfdata-g1-jdk17"))
	for name, mutate := range map[string]func(b []byte) []byte{
		"short":          func(b []byte) []byte { return b[:20] },
		"magic":          func(b []byte) []byte { b[0] = 0; return b },
		"version":        func(b []byte) []byte { b[5] = 9; return b },
		"not accessible": func(b []byte) []byte { b[7] = 0; return b },
		"entry offset":   func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 1<<30); return b },
		"entry length": func(b []byte) []byte {
			off := binary.LittleEndian.Uint32(b[24:])
			binary.LittleEndian.PutUint32(b[off:], 3)
			return b
		},
	} {
		b := mutate(append([]byte(nil), good...))
		if _, err := hotspot.ParsePerfData(b); err == nil || !strings.Contains(err.Error(), "hsperfdata") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestJcmdParsers(t *testing.T) {
	h := parseHeapInfo(readFixture(t, "gc_heap_info.txt"))
	if !h.heapFound || h.heap.used != 67656<<10 || h.heap.committed != 114688<<10 {
		t.Errorf("heap %+v", h.heap)
	}
	if h.metaspace.used != 626<<10 || h.metaspace.committed != 768<<10 || h.classSpc.used != 57<<10 || h.classSpc.committed != 128<<10 {
		t.Errorf("metaspace %+v class %+v", h.metaspace, h.classSpc)
	}
	// Parallel GC: two top-level generations.
	ps := parseHeapInfo(" PSYoungGen      total 76288K, used 3932K [0x1, 0x2, 0x3)\n  eden space 65536K, 6% used [0x1,0x2,0x3)\n" +
		" ParOldGen       total 175104K, used 100K [0x1, 0x2, 0x3)\n  object space 175104K, 0% used [0x1,0x2,0x3)\n" +
		" Metaspace       used 1K, committed 2K, reserved 3K\n")
	if ps.heap.used != (3932+100)<<10 || ps.heap.committed != (76288+175104)<<10 {
		t.Errorf("parallel heap %+v", ps.heap)
	}
	code := parseCodeCache(readFixture(t, "compiler_codecache.txt"))
	if len(code) != 3 || code[0].name != "CodeHeap 'non-profiled nmethods'" || code[2].name != "CodeHeap 'non-nmethods'" {
		t.Fatalf("code heaps %+v", code)
	}
	for _, c := range code {
		if c.u.used <= 0 || c.u.committed < c.u.used || c.u.max < c.u.committed {
			t.Errorf("%s: %+v", c.name, c.u)
		}
	}
	flags := parseFlags(readFixture(t, "vm_flags.txt"))
	if flags["MaxHeapSize"] != 256<<20 || flags["InitialHeapSize"] != 64<<20 {
		t.Errorf("flags %v", flags)
	}
	props := parseProperties(readFixture(t, "vm_system_properties.txt"))
	if props["java.runtime.name"] != "OpenJDK Runtime Environment" || props["java.vm.vendor"] != "Debian" || props["java.home"] != "/usr/lib/jvm/java-17-openjdk-amd64" {
		t.Errorf("properties %v", props)
	}
	if n := deadlocked(readFixture(t, "thread_print.txt")); n != 2 {
		t.Errorf("deadlocked %d, want 2", n)
	}
	if n := deadlocked(`"main" #1 prio=5` + "\n"); n != 0 {
		t.Errorf("deadlocked %d without a deadlock report", n)
	}
}

// TestRecords: the fixtures' snapshot gives every table with the values
// of their sources; the MBean values (recorded from a JDK 17 in the jmx
// package's tests) go to jvm_buf_pool and the coll_* fields of the pools
// that have them, the others left absent.
func TestRecords(t *testing.T) {
	h := parseHeapInfo(readFixture(t, "gc_heap_info.txt"))
	s := snapshot{pd: fixturePerfData(t), props: parseProperties(readFixture(t, "vm_system_properties.txt")),
		flags: parseFlags(readFixture(t, "vm_flags.txt")), heapInfo: &h,
		code: parseCodeCache(readFixture(t, "compiler_codecache.txt")), deadlocked: 2, cpuSecs: 1.5,
		mbeans: &mbeanValues{bufPools: map[string]bufPool{"direct": {6, 63344, 63345}, "mapped": {1, 3145828, 3145829}},
			coll: map[string]usage{"G1 Old Gen": {used: 68532800, committed: 91226112, max: 268435456, init: -1}, "G1 Eden Space": {0, 26214400, -1, -1}}}}
	recs := s.records(42, time.Unix(100, 0), time.Minute)
	get := func(tbl *table.Table, key, val, field string) float64 {
		t.Helper()
		for _, r := range recs {
			if r.Table == tbl && (key == "" || r.Str(key) == val) {
				if r.Str("tgid") != "42" || r.Str("name") != "JvmLoad" {
					t.Errorf("%s keys %q %q", tbl.Name, r.Str("tgid"), r.Str("name"))
				}
				v := r.Values[tbl.MustIndex(field)]
				if !v.Set {
					t.Errorf("%s %s=%s: %s not set", tbl.Name, key, val, field)
				}
				return v.Num
			}
		}
		t.Errorf("%s %s=%s: no record", tbl.Name, key, val)
		return 0
	}
	for _, c := range []struct {
		tbl             *table.Table
		key, val, field string
		want            float64
	}{
		{table.JvmInfo, "", "", "info", 1},
		{table.JvmProc, "", "", "proc_cpu_secs_total", 1.5},
		{table.JvmThread, "", "", "threads_deadlocked", 2},
		{table.JvmGc, "gc", "G1 Young Generation", "gc_coll_secs_count", 5},
		{table.JvmGc, "gc", "G1 Old Generation", "gc_coll_secs_count", 4},
		{table.JvmGc, "gc", "G1 concurrent cycle pauses", "gc_coll_secs_count", 7},
		{table.JvmMem, "area", "heap", "mem_bytes_used", 67656 << 10},
		{table.JvmMem, "area", "heap", "mem_bytes_max", 256 << 20},
		{table.JvmMem, "area", "heap", "mem_bytes_init", 64 << 20},
		{table.JvmMemPool, "pool", "Metaspace", "mem_pool_bytes_used", 626 << 10},
		{table.JvmMemPool, "pool", "Compressed Class Space", "mem_pool_bytes_commit", 128 << 10},
		{table.JvmMemPool, "pool", "G1 Old Gen", "mem_pool_bytes_max", 256 << 20},
		{table.JvmMemPool, "pool", "G1 Old Gen", "mem_pool_coll_used_bytes", 68532800},
		{table.JvmMemPool, "pool", "G1 Old Gen", "mem_pool_coll_commit_bytes", 91226112},
		{table.JvmMemPool, "pool", "G1 Old Gen", "mem_pool_coll_max_bytes", 268435456},
		{table.JvmMemPool, "pool", "G1 Eden Space", "mem_pool_coll_commit_bytes", 26214400},
		{table.JvmBufPool, "pool", "direct", "buffer_pool_used_buffers", 6},
		{table.JvmBufPool, "pool", "direct", "buffer_pool_used_bytes", 63344},
		{table.JvmBufPool, "pool", "direct", "buffer_pool_capacity_bytes", 63345},
		{table.JvmBufPool, "pool", "mapped", "buffer_pool_used_buffers", 1},
		{table.JvmBufPool, "pool", "mapped", "buffer_pool_capacity_bytes", 3145829},
	} {
		if got := get(c.tbl, c.key, c.val, c.field); got != c.want {
			t.Errorf("%s %s=%s %s = %v, want %v", c.tbl.Name, c.key, c.val, c.field, got, c.want)
		}
	}
	for _, r := range recs {
		if r.Table != table.JvmMemPool {
			continue
		}
		for _, f := range []string{"mem_pool_coll_used_bytes", "mem_pool_coll_commit_bytes", "mem_pool_coll_max_bytes"} {
			set := r.Values[table.JvmMemPool.MustIndex(f)].Set
			want := r.Str("pool") == "G1 Old Gen" || (r.Str("pool") == "G1 Eden Space" && f != "mem_pool_coll_max_bytes")
			if set != want {
				t.Errorf("%s %s set %v, want %v", r.Str("pool"), f, set, want)
			}
		}
	}
	// Metaspace's max is JMX's: undefined (absent) unless MaxMetaspaceSize
	// is set.
	for _, r := range recs {
		if r.Table == table.JvmMemPool && r.Str("pool") == "Metaspace" && r.Values[table.JvmMemPool.MustIndex("mem_pool_bytes_max")].Set {
			t.Error("Metaspace max set without MaxMetaspaceSize")
		}
	}
	s.flags["MaxMetaspaceSize"] = 64 << 20
	recs = s.records(42, time.Unix(100, 0), time.Minute)
	if got := get(table.JvmMemPool, "pool", "Metaspace", "mem_pool_bytes_max"); got != 64<<20 {
		t.Errorf("Metaspace max %v, -XX:MaxMetaspaceSize=64m", got)
	}
	gcSum := get(table.JvmGc, "gc", "G1 Old Generation", "gc_coll_secs_sum")
	if gcSum < 0.0145 || gcSum > 0.0155 { // jstat FGCT 0.015
		t.Errorf("G1 Old Generation time %v s, jstat says 0.015", gcSum)
	}
	var nonHeap float64
	for _, r := range recs {
		if r.Table == table.JvmMemPool && !strings.HasPrefix(r.Str("pool"), "G1 ") {
			nonHeap += r.Values[table.JvmMemPool.MustIndex("mem_pool_bytes_used")].Num
		}
	}
	if got := get(table.JvmMem, "area", "nonheap", "mem_bytes_used"); got != nonHeap {
		t.Errorf("nonheap used %v, the non-heap pools sum to %v", got, nonHeap)
	}
	for _, r := range recs {
		if r.Table == table.JvmInfo && (r.Str("runtime") != "OpenJDK Runtime Environment" || r.Str("vendor") != "Debian" || r.Str("version") != "17.0.15+6-Debian-1deb12u1") {
			t.Errorf("jvm_info labels %q %q %q", r.Str("runtime"), r.Str("vendor"), r.Str("version"))
		}
	}
}

// TestSerialParallelPools: Serial's and Parallel's spaces, as a JDK 17
// JVM's hsperfdata had them (-Xms64m -Xmx256m, after System.gc()), give
// the pools its own MemoryPoolMXBeans gave at the same time (names,
// used, committed, max), the survivor pool from s0 or s1, whichever is
// "from".
func TestSerialParallelPools(t *testing.T) {
	perf := func(policy string, eden, s0, s1, old [4]int64) *hotspot.PerfData {
		pd := &hotspot.PerfData{Longs: map[string]int64{}, Strings: map[string]string{"sun.gc.policy.name": policy,
			"sun.gc.generation.0.name": "new", "sun.gc.generation.1.name": "old"}}
		for i, sp := range []struct {
			prefix, name string
			v            [4]int64 // used, capacity, maxCapacity, generation capacity
		}{{"sun.gc.generation.0.space.0.", "eden", eden}, {"sun.gc.generation.0.space.1.", "s0", s0},
			{"sun.gc.generation.0.space.2.", "s1", s1}, {"sun.gc.generation.1.space.0.", "old", old}} {
			pd.Strings[sp.prefix+"name"] = sp.name
			pd.Longs[sp.prefix+"used"], pd.Longs[sp.prefix+"capacity"], pd.Longs[sp.prefix+"maxCapacity"] = sp.v[0], sp.v[1], sp.v[2]
			pd.Longs[fmt.Sprintf("sun.gc.generation.%d.capacity", i/3)] += sp.v[1]
		}
		return pd
	}
	type want map[string]usage // pool: used, committed, max (-1: absent)
	for _, c := range []struct {
		name string
		pd   *hotspot.PerfData
		coll map[string]usage
		want want
	}{
		{"serial", perf("Copy:MSC", [4]int64{4733224, 17956864, 71630848}, [4]int64{0, 2228224, 8912896}, [4]int64{0, 2228224, 8912896},
			[4]int64{21431384, 44761088, 178978816}), nil,
			want{"Eden Space": {4733224, 17956864, 71630848, 0}, "Survivor Space": {0, 2228224, 8912896, 0},
				"Tenured Gen": {21431384, 44761088, 178978816, 0}}},
		// s1 is "from": it holds the survivors.
		{"serial s1", perf("Copy:MSC", [4]int64{1, 2, 3}, [4]int64{0, 2228224, 8912896}, [4]int64{1508032, 2228224, 8912896},
			[4]int64{4, 5, 6}), nil,
			want{"Eden Space": {1, 2, 3, 0}, "Survivor Space": {1508032, 2228224, 8912896, 0}, "Tenured Gen": {4, 5, 6, 0}}},
		// Parallel's eden and survivor max are JMX's own (from the
		// CollectionUsage), absent without it.
		{"parallel", perf("ParScav:MSC", [4]int64{4796632, 33554432, 88080384}, [4]int64{0, 2621440, 29360128}, [4]int64{0, 2621440, 29360128},
			[4]int64{21431384, 45088768, 179306496}),
			map[string]usage{"PS Eden Space": {0, 33554432, 83886080, -1}, "PS Survivor Space": {0, 2621440, 2621440, -1},
				"PS Old Gen": {21431384, 45088768, 179306496, -1}},
			want{"PS Eden Space": {4796632, 33554432, 83886080, 0}, "PS Survivor Space": {0, 2621440, 2621440, 0},
				"PS Old Gen": {21431384, 45088768, 179306496, 0}}},
		{"parallel without JMX", perf("ParScav:MSC", [4]int64{1, 2, 3}, [4]int64{0, 1 << 20, 9}, [4]int64{0, 2 << 20, 9}, [4]int64{4, 5, 6}), nil,
			want{"PS Eden Space": {1, 2, -1, 0}, "PS Survivor Space": {0, -1, -1, 0}, "PS Old Gen": {4, 5, 6, 0}}},
		// Both survivors empty, of different sizes: "from" is the one
		// of the CollectionUsage's committed size.
		{"parallel survivors resized", perf("ParScav:MSC", [4]int64{1, 2, 3}, [4]int64{0, 1 << 20, 9}, [4]int64{0, 2 << 20, 9}, [4]int64{4, 5, 6}),
			map[string]usage{"PS Survivor Space": {0, 2 << 20, 3 << 20, -1}},
			want{"PS Eden Space": {1, 2, -1, 0}, "PS Survivor Space": {0, 2 << 20, 3 << 20, 0}, "PS Old Gen": {4, 5, 6, 0}}},
		{"unknown collector", perf("Epsilon", [4]int64{1, 2, 3}, [4]int64{4, 5, 6}, [4]int64{7, 8, 9}, [4]int64{10, 11, 12}), nil,
			want{"new eden": {1, 2, 3, 0}, "new s0": {4, 5, 6, 0}, "new s1": {7, 8, 9, 0}, "old old": {10, 11, 12, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := snapshot{pd: c.pd, deadlocked: -1, cpuSecs: -1}
			if c.coll != nil {
				s.mbeans = &mbeanValues{coll: c.coll}
			}
			got := want{}
			field := func(r *table.Record, f string) int64 {
				if v := r.Values[table.JvmMemPool.MustIndex(f)]; v.Set {
					return int64(v.Num)
				}
				return -1
			}
			for _, r := range s.records(1, time.Unix(100, 0), time.Minute) {
				if r.Table != table.JvmMemPool || r.Str("pool") == "Metaspace" {
					continue
				}
				p := r.Str("pool")
				got[p] = usage{field(r, "mem_pool_bytes_used"), field(r, "mem_pool_bytes_commit"), field(r, "mem_pool_bytes_max"), 0}
				cu, ok := c.coll[p]
				if !ok {
					cu = usage{-1, -1, -1, -1}
				}
				if g := (usage{field(r, "mem_pool_coll_used_bytes"), field(r, "mem_pool_coll_commit_bytes"), field(r, "mem_pool_coll_max_bytes"), -1}); g != cu {
					t.Errorf("%s coll %v, want %v", p, g, cu)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("pools\n%v, want\n%v", got, c.want)
			}
		})
	}
}
