package jvm

import (
	"fmt"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/table"
)

// snapshot is one period's reading of a JVM: hsperfdata and, when attach
// works, the diagnostic commands' answers.
type snapshot struct {
	pd         *hotspot.PerfData
	props      map[string]string // VM.system_properties; nil without attach
	flags      map[string]int64  // VM.flags; nil without attach
	heapInfo   *heapInfo         // GC.heap_info; nil without attach
	code       []codeHeap        // Compiler.codecache
	deadlocked int               // from Thread.print; -1 unknown
	cpuSecs    float64           // -1 unknown
	mbeans     *mbeanValues      // nil without JMX
}

// jmxPools are the JMX names of hsperfdata's heap spaces (generation
// name, space name) by collector (sun.gc.policy.name): G1's, Serial's
// and Parallel's. "survivor" stands for s0 and s1, the two survivor
// spaces, of which JMX reports the current "from" one (survivorPool);
// G1's s1 is a placeholder it keeps at zero.
var jmxPools = map[string]map[[2]string]string{
	"GarbageFirst": {{"young", "eden"}: "G1 Eden Space", {"young", "s0"}: "G1 Survivor Space", {"young", "s1"}: "",
		{"old", "space"}: "G1 Old Gen"},
	"Copy:MSC": {{"new", "eden"}: "Eden Space", {"new", "survivor"}: "Survivor Space", {"old", "old"}: "Tenured Gen"},
	"ParScav:MSC": {{"new", "eden"}: "PS Eden Space", {"new", "survivor"}: "PS Survivor Space",
		{"old", "old"}: "PS Old Gen"},
}

// gcNames are the JMX names of hsperfdata's collectors.
var gcNames = map[string]string{
	"G1 young collection pauses": "G1 Young Generation",
	"G1 full collection pauses":  "G1 Old Generation",
	"PSScavenge":                 "PS Scavenge",
	"PSParallelCompact":          "PS MarkSweep",
	"Serial copying collector":   "Copy",
	"MarkSweepCompact":           "MarkSweepCompact",
	// JDK 17.0.15 and 25 name them so.
	"Parallel young collection pauses": "PS Scavenge",
	"Parallel full collection pauses":  "PS MarkSweep",
	"Serial young collection pauses":   "Copy",
	"Serial full collection pauses":    "MarkSweepCompact",
}

func (s *snapshot) records(pid int, now time.Time, period time.Duration) []*table.Record {
	pd := s.pd
	name := mainClass(pd)
	tgid := strconv.Itoa(pid)
	var out []*table.Record
	rec := func(t *table.Table, key, val string) *table.Record {
		r := t.NewRecord(now, period)
		r.SetStr(t.MustIndex("tgid"), tgid)
		if name != "" {
			r.SetStr(t.MustIndex("name"), name)
		}
		if key != "" {
			r.SetStr(t.MustIndex(key), val)
		}
		out = append(out, r)
		return r
	}
	num := func(r *table.Record, field string, v int64) {
		if v >= 0 {
			r.SetNum(r.Table.MustIndex(field), float64(v))
		}
	}
	long := func(n string) int64 {
		if v, ok := pd.Longs[n]; ok {
			return v
		}
		return -1
	}

	// jvm_info
	r := rec(table.JvmInfo, "", "")
	vendor, version := pd.Strings["java.property.java.vm.vendor"], pd.Strings["java.property.java.version"]
	if s.props != nil {
		if v := s.props["java.runtime.name"]; v != "" {
			r.SetStr(table.JvmInfo.MustIndex("runtime"), v)
		}
		vendor = firstSet(s.props["java.vm.vendor"], vendor)
		version = firstSet(s.props["java.runtime.version"], version)
	}
	if vendor != "" {
		r.SetStr(table.JvmInfo.MustIndex("vendor"), vendor)
	}
	if version != "" {
		r.SetStr(table.JvmInfo.MustIndex("version"), version)
	}
	r.SetNum(table.JvmInfo.MustIndex("info"), 1)

	// jvm_proc
	r = rec(table.JvmProc, "", "")
	if ms := long("sun.rt.createVmBeginTime"); ms > 0 {
		r.SetNum(table.JvmProc.MustIndex("proc_start_time_secs"), float64(ms)/1000)
	}
	if s.cpuSecs >= 0 {
		r.SetNum(table.JvmProc.MustIndex("proc_cpu_secs_total"), s.cpuSecs)
	}

	// jvm_class
	loaded, shared := long("java.cls.loadedClasses"), long("java.cls.sharedLoadedClasses")
	unloaded, sharedUn := long("java.cls.unloadedClasses"), long("java.cls.sharedUnloadedClasses")
	if loaded >= 0 && unloaded >= 0 {
		r = rec(table.JvmClass, "", "")
		total := loaded + max(shared, 0)
		num(r, "class_loaded_total", total)
		num(r, "class_current_loaded", total-unloaded-max(sharedUn, 0))
	}

	// jvm_thread
	r = rec(table.JvmThread, "", "")
	num(r, "threads_current", long("java.threads.live"))
	num(r, "threads_daemon", long("java.threads.daemon"))
	num(r, "threads_peak", long("java.threads.livePeak"))
	num(r, "threads_started_total", long("java.threads.started"))
	num(r, "threads_deadlocked", int64(s.deadlocked))

	// jvm_gc
	freq := long("sun.os.hrt.frequency")
	for i := 0; ; i++ {
		p := fmt.Sprintf("sun.gc.collector.%d.", i)
		gc, ok := pd.Strings[p+"name"]
		if !ok {
			break
		}
		if n, ok := gcNames[gc]; ok {
			gc = n
		}
		r = rec(table.JvmGc, "gc", gc)
		num(r, "gc_coll_secs_count", long(p+"invocations"))
		if t := long(p + "time"); t >= 0 && freq > 0 {
			r.SetNum(table.JvmGc.MustIndex("gc_coll_secs_sum"), float64(t)/float64(freq))
		}
	}

	// jvm_mem_pool: the heap's spaces (hsperfdata), metaspace and class
	// space (GC.heap_info, current; else hsperfdata, as of the last GC),
	// the code heaps (Compiler.codecache).
	heapPools := usage{0, 0, 0, 0}
	policy := pd.Strings["sun.gc.policy.name"]
	names := jmxPools[policy]
	pool := func(name string, u usage) {
		r := rec(table.JvmMemPool, "pool", name)
		num(r, "mem_pool_bytes_used", u.used)
		num(r, "mem_pool_bytes_commit", u.committed)
		num(r, "mem_pool_bytes_max", u.max)
		if cu, ok := s.coll(name); ok {
			num(r, "mem_pool_coll_used_bytes", cu.used)
			num(r, "mem_pool_coll_commit_bytes", cu.committed)
			num(r, "mem_pool_coll_max_bytes", cu.max)
		}
	}
	for g := 0; ; g++ {
		gp := fmt.Sprintf("sun.gc.generation.%d.", g)
		gen, ok := pd.Strings[gp+"name"]
		if !ok {
			break
		}
		heapPools.committed += max(long(gp+"capacity"), 0)
		var survivors []usage
		for sp := 0; ; sp++ {
			p := fmt.Sprintf("%sspace.%d.", gp, sp)
			space, ok := pd.Strings[p+"name"]
			if !ok {
				break
			}
			u := usage{used: long(p + "used"), committed: long(p + "capacity"), max: long(p + "maxCapacity"), init: long(p + "initCapacity")}
			heapPools.used += max(u.used, 0)
			if names == nil {
				pool(gen+" "+space, u)
				continue
			}
			if _, ok := names[[2]string{gen, "survivor"}]; ok && (space == "s0" || space == "s1") {
				survivors = append(survivors, u)
				continue
			}
			n := names[[2]string{gen, space}]
			switch n {
			case "G1 Old Gen":
				// G1's pools share the heap: JMX gives eden and
				// survivor no max, old the heap's.
				u.max = s.flag("MaxHeapSize")
			case "G1 Eden Space", "G1 Survivor Space":
				u.max = -1
			case "PS Eden Space":
				// JMX's max is the young generation's less the
				// survivors as they were at the JVM's start:
				// the pool's own (CollectionUsage), else unknown.
				u.max = s.collMax(n)
			}
			if n != "" {
				pool(n, u)
			}
		}
		if n := names[[2]string{gen, "survivor"}]; n != "" && len(survivors) == 2 {
			cu, _ := s.coll(n)
			u := survivorPool(survivors[0], survivors[1], cu.committed)
			if policy == "ParScav:MSC" {
				u.max = s.collMax(n) // the "from" space's at the JVM's start
			}
			pool(n, u)
		}
	}
	// Metaspace's max is JMX's: MaxMetaspaceSize when set (VM.flags lists
	// it then), else undefined (hsperfdata's maxCapacity is the space
	// reserved, not a bound JMX reports).
	meta := usage{used: long("sun.gc.metaspace.used"), committed: long("sun.gc.metaspace.capacity"), max: s.flag("MaxMetaspaceSize")}
	class := usage{used: long("sun.gc.compressedclassspace.used"), committed: long("sun.gc.compressedclassspace.capacity"),
		max: long("sun.gc.compressedclassspace.maxCapacity")}
	if h := s.heapInfo; h != nil && h.metaspace.used >= 0 {
		meta.used, meta.committed = h.metaspace.used, h.metaspace.committed
		if h.classSpc.used >= 0 {
			class.used, class.committed = h.classSpc.used, h.classSpc.committed
		}
	}
	nonHeap := usage{used: 0, committed: 0, max: -1, init: -1}
	add := func(u usage) {
		nonHeap.used += max(u.used, 0)
		nonHeap.committed += max(u.committed, 0)
	}
	pool("Metaspace", meta)
	add(meta)
	if _, ok := pd.Longs["sun.gc.compressedclassspace.used"]; ok {
		pool("Compressed Class Space", class)
		add(class)
	}
	for _, ch := range s.code {
		pool(ch.name, ch.u)
		add(ch.u)
	}

	// jvm_buf_pool: the BufferPoolMXBeans.
	if s.mbeans != nil {
		for _, b := range bufPools {
			if bp, ok := s.mbeans.bufPools[b]; ok {
				r = rec(table.JvmBufPool, "pool", b)
				num(r, "buffer_pool_used_bytes", bp.used)
				num(r, "buffer_pool_used_buffers", bp.count)
				num(r, "buffer_pool_capacity_bytes", bp.capacity)
			}
		}
	}

	// jvm_mem: the heap as GC.heap_info gives it (current) or as the
	// spaces sum; init and max from the heap size flags. Non-heap: the sum
	// of the non-heap pools (as JMX does).
	heap := usage{used: heapPools.used, committed: heapPools.committed, max: s.flag("MaxHeapSize"), init: s.flag("InitialHeapSize")}
	if h := s.heapInfo; h != nil && h.heapFound {
		heap.used, heap.committed = h.heap.used, h.heap.committed
	}
	for _, a := range []struct {
		area string
		u    usage
	}{{"heap", heap}, {"nonheap", nonHeap}} {
		r = rec(table.JvmMem, "area", a.area)
		num(r, "mem_bytes_used", a.u.used)
		num(r, "mem_bytes_commit", a.u.committed)
		num(r, "mem_bytes_max", a.u.max)
		num(r, "mem_bytes_init", a.u.init)
	}
	return out
}

// survivorPool is JMX's survivor pool, the current "from" space of s0
// and s1 (they swap roles at each young collection). Between collections
// "to" is empty: used is the sum, committed the capacity of the space in
// use, or, both empty, their common capacity, or the one the pool's
// CollectionUsage gives (collCommitted; -1 unknown: the capacity of
// "from" only changes in collections), else unknown.
func survivorPool(s0, s1 usage, collCommitted int64) usage {
	u := usage{used: -1, committed: -1, max: s0.max, init: -1}
	if s0.used >= 0 && s1.used >= 0 {
		u.used = s0.used + s1.used
	}
	switch {
	case s0.used > 0 && s1.used == 0:
		u.committed = s0.committed
	case s1.used > 0 && s0.used == 0:
		u.committed = s1.committed
	case s0.committed == s1.committed:
		u.committed = s0.committed
	case collCommitted >= 0 && (collCommitted == s0.committed || collCommitted == s1.committed):
		u.committed = collCommitted
	}
	return u
}

// coll is the pool's CollectionUsage read over JMX.
func (s *snapshot) coll(pool string) (usage, bool) {
	if s.mbeans != nil {
		if cu, ok := s.mbeans.coll[pool]; ok {
			return cu, true
		}
	}
	return unknownUsage(), false
}

// collMax is the pool's max as its CollectionUsage gives it, -1 without.
func (s *snapshot) collMax(pool string) int64 {
	cu, _ := s.coll(pool)
	return cu.max
}

// flag is a VM.flags value, -1 without.
func (s *snapshot) flag(name string) int64 {
	if v, ok := s.flags[name]; ok {
		return v
	}
	return -1
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
