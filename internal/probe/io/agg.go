package ioprobe

import (
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// maxErrorsPerPeriod bounds the failed requests kept for events per disk
// and period (the event de-duplication keeps one per disk and window
// anyway).
const maxErrorsPerPeriod = 256

// stage is one latency stage of one disk over one period, in ns, with
// gala-gopher's definitions: max, last, sum, count, and jitter, the largest
// difference between two consecutive samples (0 with one sample).
type stage struct {
	max, last, sum, jitter, count uint64
	lastNs                        uint64 // when last was taken
}

// latStats is one disk's latency over one period, all CPUs merged.
type latStats struct {
	stages [3]stage // request, driver, device
	// The slowest request (whole-request latency): the latency event
	// names it.
	slowNs            uint64
	slowPID, slowLen  uint32
	slowOp, slowFlags uint8
	slowComm          string
}

// mergeLat merges one disk's per-CPU statistics. Counts, sums and maxima
// are exact; last is the newest sample of any CPU; jitter is the largest
// of the CPUs' (consecutive samples on one CPU: the kernel keeps no order
// across CPUs).
func mergeLat(per []ioIoLat) latStats {
	var l latStats
	slowSeen := false
	for _, c := range per {
		for i := range l.stages {
			src, dst := c.Stage[i], &l.stages[i]
			if src.Count == 0 {
				continue
			}
			dst.count += src.Count
			dst.sum += src.Sum
			dst.max = max(dst.max, src.Max)
			dst.jitter = max(dst.jitter, src.Jitter)
			if src.LastNs >= dst.lastNs {
				dst.last, dst.lastNs = src.Last, src.LastNs
			}
		}
		if c.Stage[ioIoStageIdIO_STAGE_REQ].Count > 0 && (!slowSeen || c.SlowNs > l.slowNs) {
			slowSeen = true
			l.slowNs, l.slowPID, l.slowLen = c.SlowNs, c.SlowPid, c.SlowLen
			l.slowOp, l.slowFlags, l.slowComm = c.SlowOp, c.SlowFlags, commString(c.SlowComm)
		}
	}
	return l
}

func commString(c [16]int8) string {
	b := make([]byte, len(c))
	for i, v := range c {
		b[i] = byte(v)
	}
	return cString(b)
}

// errAgg is one disk's failed completions over one period.
type errAgg struct {
	errs []Failure // in order, at most maxErrorsPerPeriod
	n    int       // all of them
	last Failure
}

// failures collects failed completions between two report ticks. Not safe
// for concurrent use: the probe holds its lock around it.
type failures struct {
	disks map[Dev]*errAgg
}

func newFailures() *failures { return &failures{disks: map[Dev]*errAgg{}} }

func (f *failures) add(r Failure) {
	d := f.disks[r.Disk]
	if d == nil {
		d = &errAgg{}
		f.disks[r.Disk] = d
	}
	d.n++
	d.last = r
	if len(d.errs) < maxErrorsPerPeriod {
		d.errs = append(d.errs, r)
	}
}

// take returns the period's disks and starts a new period.
func (f *failures) take() map[Dev]*errAgg {
	out := f.disks
	f.disks = map[Dev]*errAgg{}
	return out
}

// counts is one device's counters (summed over CPUs).
type counts struct {
	readBytes, writeBytes                         uint64
	markBufferDirty, loadPageCache, markPageDirty uint64
}

func (c counts) sub(p counts) counts {
	d := func(a, b uint64) uint64 {
		if a < b { // the entry was recreated: count from zero
			return a
		}
		return a - b
	}
	return counts{
		readBytes:       d(c.readBytes, p.readBytes),
		writeBytes:      d(c.writeBytes, p.writeBytes),
		markBufferDirty: d(c.markBufferDirty, p.markBufferDirty),
		loadPageCache:   d(c.loadPageCache, p.loadPageCache),
		markPageDirty:   d(c.markPageDirty, p.markPageDirty),
	}
}

func sumCPUs(per []ioIoCounts) counts {
	var c counts
	for _, v := range per {
		c.readBytes += v.ReadBytes
		c.writeBytes += v.WriteBytes
		c.markBufferDirty += v.MarkBufferDirty
		c.loadPageCache += v.LoadPageCache
		c.markPageDirty += v.MarkPageDirty
	}
	return c
}

// names are a device's labels: blk_name (the device itself, a partition
// or a whole disk) and disk_name (the whole disk it belongs to).
type names struct{ blk, disk string }

// Field indexes, resolved once.
var (
	latMajor  = table.IoLatency.MustIndex("major")
	latMinor  = table.IoLatency.MustIndex("first_minor")
	latBlk    = table.IoLatency.MustIndex("blk_name")
	latDisk   = table.IoLatency.MustIndex("disk_name")
	errMajor  = table.IoErr.MustIndex("major")
	errMinor  = table.IoErr.MustIndex("first_minor")
	errBlk    = table.IoErr.MustIndex("blk_name")
	errDisk   = table.IoErr.MustIndex("disk_name")
	errCode   = table.IoErr.MustIndex("err_code")
	cntMajor  = table.IoCount.MustIndex("major")
	cntMinor  = table.IoCount.MustIndex("first_minor")
	cntBlk    = table.IoCount.MustIndex("blk_name")
	cntDisk   = table.IoCount.MustIndex("disk_name")
	cntRead   = table.IoCount.MustIndex("read_bytes")
	cntWrite  = table.IoCount.MustIndex("write_bytes")
	pcMajor   = table.IoPagecache.MustIndex("major")
	pcMinor   = table.IoPagecache.MustIndex("first_minor")
	pcBlk     = table.IoPagecache.MustIndex("blk_name")
	pcDisk    = table.IoPagecache.MustIndex("disk_name")
	pcBufDirt = table.IoPagecache.MustIndex("mark_buffer_dirty")
	pcLoad    = table.IoPagecache.MustIndex("load_page_cache")
	pcDirty   = table.IoPagecache.MustIndex("mark_page_dirty")
)

// stageFields are the io_latency fields of each stage, in table order:
// max, last, sum, jitter, count.
var stageFields = [3][5]int{
	fields("latency_req_max", "latency_req_last", "latency_req_sum", "latency_req_jitter", "count_latency_req"),
	fields("latency_driver_max", "latency_driver_last", "latency_driver_sum", "latency_driver_jitter", "count_latency_driver"),
	fields("latency_device_max", "latency_device_last", "latency_device_sum", "latency_device_jitter", "count_latency_device"),
}

func fields(names ...string) [5]int {
	var out [5]int
	for i, n := range names {
		out[i] = table.IoLatency.MustIndex(n)
	}
	return out
}

func setKeys(r *table.Record, d Dev, n names, major, minor, blk, disk int) {
	r.SetStr(major, strconv.FormatUint(uint64(d.Major), 10))
	r.SetStr(minor, strconv.FormatUint(uint64(d.Minor), 10))
	r.SetStr(blk, n.blk)
	r.SetStr(disk, n.disk)
}

// latencyRecord renders one io_latency row; nil when no request of the
// disk completed in the period. A stage without samples is left unset
// (not measured), never zero.
func latencyRecord(d Dev, n names, l latStats, end time.Time, period time.Duration) *table.Record {
	any := false
	for _, s := range l.stages {
		any = any || s.count > 0
	}
	if !any {
		return nil
	}
	r := table.IoLatency.NewRecord(end, period)
	setKeys(r, d, n, latMajor, latMinor, latBlk, latDisk)
	for i, s := range l.stages {
		if s.count == 0 {
			continue
		}
		f := stageFields[i]
		r.SetNum(f[0], float64(s.max))
		r.SetNum(f[1], float64(s.last))
		r.SetNum(f[2], float64(s.sum))
		r.SetNum(f[3], float64(s.jitter))
		r.SetNum(f[4], float64(s.count))
	}
	return r
}

// errRecord renders one io_err row: the errno of the period's last failed
// completion (negative, as the kernel's block_rq_complete prints it); nil
// without failures.
func errRecord(d Dev, n names, a *errAgg, end time.Time, period time.Duration) *table.Record {
	if a == nil || a.n == 0 {
		return nil
	}
	r := table.IoErr.NewRecord(end, period)
	setKeys(r, d, n, errMajor, errMinor, errBlk, errDisk)
	r.SetNum(errCode, float64(statusOf(a.last.Status).errno))
	return r
}

// countRecord renders one io_count row; nil without bytes in the period.
func countRecord(d Dev, n names, c counts, end time.Time, period time.Duration) *table.Record {
	if c.readBytes == 0 && c.writeBytes == 0 {
		return nil
	}
	r := table.IoCount.NewRecord(end, period)
	setKeys(r, d, n, cntMajor, cntMinor, cntBlk, cntDisk)
	r.SetNum(cntRead, float64(c.readBytes))
	r.SetNum(cntWrite, float64(c.writeBytes))
	return r
}

// pagecacheRecord renders one io_pagecache row; nil without activity.
// access_pagecache is not measured (see the package doc) and stays unset.
func pagecacheRecord(d Dev, n names, c counts, end time.Time, period time.Duration) *table.Record {
	if c.markBufferDirty == 0 && c.loadPageCache == 0 && c.markPageDirty == 0 {
		return nil
	}
	r := table.IoPagecache.NewRecord(end, period)
	setKeys(r, d, n, pcMajor, pcMinor, pcBlk, pcDisk)
	r.SetNum(pcBufDirt, float64(c.markBufferDirty))
	r.SetNum(pcLoad, float64(c.loadPageCache))
	r.SetNum(pcDirty, float64(c.markPageDirty))
	return r
}

// Entity is the entity name of every io table ("block").
var Entity = table.IoLatency.Entity

// latencyEvent is gala-gopher's "IO latency occurred" event: the period's
// slowest request took at least latency_thr ms (galago compares like
// units; see the package doc). nil below the threshold.
func latencyEvent(d Dev, n names, l latStats, p probe.Params, now time.Time) *event.Event {
	req := l.stages[ioIoStageIdIO_STAGE_REQ]
	if p.LatencyThr <= 0 || req.count == 0 {
		return nil
	}
	if req.max < uint64(p.LatencyThr)*uint64(time.Millisecond) {
		return nil
	}
	e := event.New(now, event.BlockLatency, d.String(),
		n.disk, d.Major, d.Minor, l.slowComm, l.slowPID, Rwbs(l.slowOp, l.slowFlags), l.slowLen,
		l.stages[ioIoStageIdIO_STAGE_DRIVER].max, l.stages[ioIoStageIdIO_STAGE_DEVICE].max)
	e.PID, e.Comm, e.Device = int(l.slowPID), l.slowComm, n.disk
	return &e
}

// errorEvents are gala-gopher's "IO errors occurred" events, one per failed
// completion kept. scsi_err is what gala-gopher prints for a device without
// a SCSI error recorded: the SCSI dispatch tracepoints are not hooked.
func errorEvents(d Dev, n names, a *errAgg, now time.Time) []event.Event {
	if a == nil {
		return nil
	}
	out := make([]event.Event, 0, len(a.errs))
	for _, r := range a.errs {
		st := statusOf(r.Status)
		e := event.New(now, event.BlockError, d.String(),
			n.disk, d.Major, d.Minor, r.Comm, r.PID, Rwbs(r.Op, r.Flags), r.DataLen, r.Status, st.desc, 0, "UNKNOW",
			float64(r.DoneNs)/1e6)
		e.PID, e.Comm, e.Device = int(r.PID), r.Comm, n.disk
		out = append(out, e)
	}
	return out
}
