package baseinfo

import (
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var memF = struct {
	infos, util, swapUtil, vmalloc, bigPage int
}{
	infos: table.SystemMeminfo.MustIndex("infos"), util: table.SystemMeminfo.MustIndex("util"),
	swapUtil: table.SystemMeminfo.MustIndex("swap_util"), vmalloc: table.SystemMeminfo.MustIndex("vmalloc_kB"),
	bigPage: table.SystemMeminfo.MustIndex("big_page_kB"),
}

// memPlain maps system_meminfo fields to the /proc/meminfo line they copy.
var memPlain = []struct {
	field int
	key   string
}{
	{table.SystemMeminfo.MustIndex("total_kB"), "MemTotal"},
	{table.SystemMeminfo.MustIndex("free_kB"), "MemFree"},
	{table.SystemMeminfo.MustIndex("available_kB"), "MemAvailable"},
	{table.SystemMeminfo.MustIndex("buffers_kB"), "Buffers"},
	{table.SystemMeminfo.MustIndex("cache_kB"), "Cached"},
	{table.SystemMeminfo.MustIndex("active_kB"), "Active"},
	{table.SystemMeminfo.MustIndex("inactive_kB"), "Inactive"},
	{table.SystemMeminfo.MustIndex("swap_total_kB"), "SwapTotal"},
	{table.SystemMeminfo.MustIndex("swap_free_kB"), "SwapFree"},
	{table.SystemMeminfo.MustIndex("slab_kB"), "Slab"},
	{table.SystemMeminfo.MustIndex("SReclaimable_kB"), "SReclaimable"},
	{table.SystemMeminfo.MustIndex("Unreclaim_kB"), "SUnreclaim"},
	{table.SystemMeminfo.MustIndex("page_kB"), "PageTables"},
	{table.SystemMeminfo.MustIndex("stack_kB"), "KernelStack"},
	{table.SystemMeminfo.MustIndex("active_anon_kB"), "Active(anon)"},
	{table.SystemMeminfo.MustIndex("inactive_anon_kB"), "Inactive(anon)"},
	{table.SystemMeminfo.MustIndex("active_file_kB"), "Active(file)"},
	{table.SystemMeminfo.MustIndex("inactive_file_kB"), "Inactive(file)"},
	{table.SystemMeminfo.MustIndex("mlocked"), "Mlocked"},
	{table.SystemMeminfo.MustIndex("shmem_kB"), "Shmem"},
}

var dentryF = struct{ infos, dentry, unused, ageLimit int }{
	infos: table.SystemDentry.MustIndex("infos"), dentry: table.SystemDentry.MustIndex("dentry"),
	unused: table.SystemDentry.MustIndex("unused_dentry"), ageLimit: table.SystemDentry.MustIndex("age_limit"),
}

// memCollector fills system_meminfo from /proc/meminfo (and
// /proc/vmallocinfo) and system_dentry from /proc/sys/fs/dentry-state.
// Every value is a level at the end of the period; nothing is differenced.
type memCollector struct{}

func (memCollector) forget() {}

func (memCollector) sample(c *cycle) {
	m, err := c.fs.Meminfo()
	if err != nil {
		c.failed("mem.meminfo", "system_meminfo", err)
	}
	// VmallocUsed of /proc/meminfo also counts ioremap and vmap areas on
	// kernels before 5.3; gala-gopher sums the vmalloc areas of
	// /proc/vmallocinfo, which only root can read.
	vmallocKB, vmErr := c.fs.VmallocBytes()
	vmallocKB /= 1024
	if vmErr != nil {
		c.warnOnce("mem.vmalloc", "baseinfo: system_meminfo.vmalloc_kB falls back to VmallocUsed of /proc/meminfo",
			"reason", vmErr)
	}
	d, dErr := c.fs.DentryState()
	if dErr != nil {
		c.failed("mem.dentry", "system_dentry", dErr)
	}
	if !c.emit {
		return
	}
	if err == nil {
		reportMeminfo(c, m, vmallocKB, vmErr == nil)
	}
	if dErr == nil {
		r := table.SystemDentry.NewRecord(c.now, c.period)
		r.SetStr(dentryF.infos, "fs.dentry-state")
		r.SetNum(dentryF.dentry, float64(d.Dentries))
		r.SetNum(dentryF.unused, float64(d.Unused))
		r.SetNum(dentryF.ageLimit, float64(d.AgeLimit))
		c.rt.Record(r)
	}
}

func reportMeminfo(c *cycle, m procfs.Meminfo, vmallocKB uint64, haveVmalloc bool) {
	r := table.SystemMeminfo.NewRecord(c.now, c.period)
	r.SetStr(memF.infos, "/proc/meminfo")
	for _, f := range memPlain {
		if v, ok := m.Get(f.key); ok {
			r.SetNum(f.field, float64(v))
		}
	}
	if haveVmalloc {
		r.SetNum(memF.vmalloc, float64(vmallocKB))
	} else if v, ok := m.Get("VmallocUsed"); ok {
		r.SetNum(memF.vmalloc, float64(v))
	}
	if n, ok := m.Get("HugePages_Total"); ok {
		if size, ok := m.Get("Hugepagesize"); ok {
			r.SetNum(memF.bigPage, float64(n*size))
		}
	}
	// Used memory as gala-gopher (and free(1) before procps 3.3.10)
	// counts it: total - free - buffers - cache.
	total, ok1 := m.Get("MemTotal")
	free, ok2 := m.Get("MemFree")
	buffers, ok3 := m.Get("Buffers")
	cached, ok4 := m.Get("Cached")
	var util, swapUtil float64
	utilOK := ok1 && ok2 && ok3 && ok4 && total > 0
	if utilOK {
		util = (float64(total) - float64(free) - float64(buffers) - float64(cached)) * 100 / float64(total)
		r.SetNum(memF.util, util)
	}
	swapTotal, ok1 := m.Get("SwapTotal")
	swapFree, ok2 := m.Get("SwapFree")
	swapOK := ok1 && ok2
	if swapOK {
		// No swap configured: nothing of it is used.
		if swapTotal > 0 {
			swapUtil = float64(delta(swapTotal, swapFree)) * 100 / float64(swapTotal)
		}
		r.SetNum(memF.swapUtil, swapUtil)
	}
	c.rt.Record(r)

	if thr, on := c.upperThr(); on {
		if utilOK && util > thr {
			c.event(event.MemUtil, "/proc/meminfo", "", util)
		}
		if swapOK && swapUtil > thr {
			c.event(event.MemSwapUtil, "/proc/meminfo", "", swapUtil)
		}
	}
}
