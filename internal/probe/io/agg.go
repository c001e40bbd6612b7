package ioprobe

import (
	"fmt"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// maxErrorsPerPeriod bounds the failed requests kept for events per
// period (the event de-duplication keeps one per disk and window anyway).
const maxErrorsPerPeriod = 256

// stage is one latency stage of one disk over one period, in ns, with
// gala-gopher's definitions: jitter is the largest difference between two
// consecutive samples (0 with one sample).
type stage struct {
	max, last, sum, jitter, count uint64
}

func (s *stage) add(v uint64) {
	if s.count == 0 {
		*s = stage{max: v, last: v, sum: v, count: 1}
		return
	}
	s.max = max(s.max, v)
	s.sum += v
	d := v - s.last
	if v < s.last {
		d = s.last - v
	}
	s.jitter = max(s.jitter, d)
	s.last = v
	s.count++
}

// diskAgg is one disk's requests over one period.
type diskAgg struct {
	req, driver, device stage
	// slow is the request with the largest whole-request latency: the
	// latency event names it.
	slow    Request
	slowLat uint64
	errs    []Request // failed completions, in order, at most maxErrorsPerPeriod
	errN    int       // failed completions, all of them
	lastErr Request
}

// aggregator collects requests between two report ticks. Not safe for
// concurrent use: the probe holds its lock around it.
type aggregator struct {
	disks map[Dev]*diskAgg
}

func newAggregator() *aggregator { return &aggregator{disks: map[Dev]*diskAgg{}} }

func (a *aggregator) add(r Request) {
	d := a.disks[r.Disk]
	if d == nil {
		d = &diskAgg{}
		a.disks[r.Disk] = d
	}
	if r.Latency {
		if v, ok := r.reqLatency(); ok {
			d.req.add(v)
			if d.req.count == 1 || v > d.slowLat {
				d.slow, d.slowLat = r, v
			}
		}
		if v, ok := r.driverLatency(); ok {
			d.driver.add(v)
		}
		if v, ok := r.deviceLatency(); ok {
			d.device.add(v)
		}
	}
	if r.Error {
		d.errN++
		d.lastErr = r
		if len(d.errs) < maxErrorsPerPeriod {
			d.errs = append(d.errs, r)
		}
	}
}

// take returns the period's disks and starts a new period.
func (a *aggregator) take() map[Dev]*diskAgg {
	out := a.disks
	a.disks = map[Dev]*diskAgg{}
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
func latencyRecord(d Dev, n names, a *diskAgg, end time.Time, period time.Duration) *table.Record {
	stages := [3]*stage{&a.req, &a.driver, &a.device}
	any := false
	for _, s := range stages {
		any = any || s.count > 0
	}
	if !any {
		return nil
	}
	r := table.IoLatency.NewRecord(end, period)
	setKeys(r, d, n, latMajor, latMinor, latBlk, latDisk)
	for i, s := range stages {
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
func errRecord(d Dev, n names, a *diskAgg, end time.Time, period time.Duration) *table.Record {
	if a.errN == 0 {
		return nil
	}
	r := table.IoErr.NewRecord(end, period)
	setKeys(r, d, n, errMajor, errMinor, errBlk, errDisk)
	r.SetNum(errCode, float64(statusOf(a.lastErr.Status).errno))
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
func latencyEvent(d Dev, n names, a *diskAgg, p probe.Params, now time.Time) *event.Event {
	if p.LatencyThr <= 0 || a.req.count == 0 {
		return nil
	}
	thr := uint64(p.LatencyThr) * uint64(time.Millisecond)
	if a.req.max < thr {
		return nil
	}
	s := a.slow
	msg := fmt.Sprintf("IO latency occurred.(Disk %s(%d:%d), COMM %s, PID %d, op: %s, datalen %d, drv_latency %d, dev_latency %d)",
		n.disk, d.Major, d.Minor, s.Comm, s.PID, Rwbs(s.Op, s.Flags), s.DataLen, a.driver.max, a.device.max)
	return &event.Event{
		Time: now, Entity: Entity, EntityID: d.String(), Metric: "latency_req_max",
		PID: int(s.PID), Comm: s.Comm, Device: n.disk, Severity: event.SeverityWarn, Message: msg,
	}
}

// errorEvents are gala-gopher's "IO errors occurred" events, one per failed
// completion kept. scsi_err is what gala-gopher prints for a device without
// a SCSI error recorded: the SCSI dispatch tracepoints are not hooked.
func errorEvents(d Dev, n names, a *diskAgg, now time.Time) []event.Event {
	out := make([]event.Event, 0, len(a.errs))
	for _, r := range a.errs {
		st := statusOf(r.Status)
		msg := fmt.Sprintf("IO errors occurred.(Disk %s(%d:%d), COMM %s, PID %d, op: %s, datalen %d, blk_err(%d) '%s', scsi_err(%d) '%s', timestamp %f)",
			n.disk, d.Major, d.Minor, r.Comm, r.PID, Rwbs(r.Op, r.Flags), r.DataLen, r.Status, st.desc, 0, "UNKNOW",
			float64(r.DoneNs)/1e6)
		out = append(out, event.Event{
			Time: now, Entity: Entity, EntityID: d.String(), Metric: "err_code",
			PID: int(r.PID), Comm: r.Comm, Device: n.disk, Severity: event.SeverityWarn, Message: msg,
		})
	}
	return out
}
