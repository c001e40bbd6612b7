package baseinfo

import (
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var diskF = struct {
	name                            int
	rspeed, rspeedKB, rAwait, rareq int
	wspeed, wspeedKB, wAwait, wareq int
	aqu, util                       int
}{
	name:   table.SystemIostat.MustIndex("disk_name"),
	rspeed: table.SystemIostat.MustIndex("rspeed"), rspeedKB: table.SystemIostat.MustIndex("rspeed_kB"),
	rAwait: table.SystemIostat.MustIndex("r_await"), rareq: table.SystemIostat.MustIndex("rareq"),
	wspeed: table.SystemIostat.MustIndex("wspeed"), wspeedKB: table.SystemIostat.MustIndex("wspeed_kB"),
	wAwait: table.SystemIostat.MustIndex("w_await"), wareq: table.SystemIostat.MustIndex("wareq"),
	aqu: table.SystemIostat.MustIndex("aqu"), util: table.SystemIostat.MustIndex("util"),
}

// diskCollector fills system_iostat, one record per /proc/diskstats line
// (every block device and partition, as gala-gopher does), with the
// semantics of `iostat -x` over the period.
type diskCollector struct {
	prev  map[string]procfs.DiskStat
	prevT time.Time
}

func (dc *diskCollector) forget() { dc.prev = nil }

func (dc *diskCollector) sample(c *cycle) {
	stats, err := c.fs.Diskstats()
	if err != nil {
		c.failed("disk.diskstats", "system_iostat", err)
		dc.prev = nil
		return
	}
	cur := make(map[string]procfs.DiskStat, len(stats))
	for _, s := range stats {
		cur[s.Name] = s
	}
	if c.emit && dc.prev != nil {
		elapsed := c.now.Sub(dc.prevT)
		for _, s := range stats {
			if p, ok := dc.prev[s.Name]; ok && elapsed > 0 {
				reportDisk(c, s, p, elapsed)
			}
		}
	}
	dc.prev, dc.prevT = cur, c.now
}

const sectorsPerKB = 1024 / procfs.SectorSize

func reportDisk(c *cycle, cur, prev procfs.DiskStat, elapsed time.Duration) {
	secs := elapsed.Seconds()
	ms := secs * 1000
	r := table.SystemIostat.NewRecord(c.now, elapsed)
	r.SetStr(diskF.name, cur.Name)
	for _, d := range []struct {
		speed, speedKB, await, req int
		ios, sectors, ticks        uint64
	}{
		{diskF.rspeed, diskF.rspeedKB, diskF.rAwait, diskF.rareq,
			delta(cur.ReadIOs, prev.ReadIOs), delta(cur.ReadSectors, prev.ReadSectors), delta(cur.ReadTicks, prev.ReadTicks)},
		{diskF.wspeed, diskF.wspeedKB, diskF.wAwait, diskF.wareq,
			delta(cur.WriteIOs, prev.WriteIOs), delta(cur.WriteSectors, prev.WriteSectors), delta(cur.WriteTicks, prev.WriteTicks)},
	} {
		r.SetNum(d.speed, float64(d.ios)/secs)
		r.SetNum(d.speedKB, float64(d.sectors)/sectorsPerKB/secs)
		// No request completed: iostat prints 0 for the per-request averages.
		var await, req float64
		if d.ios > 0 {
			await = float64(d.ticks) / float64(d.ios)
			req = float64(d.sectors) / sectorsPerKB / float64(d.ios)
		}
		r.SetNum(d.await, await)
		r.SetNum(d.req, req)
	}
	r.SetNum(diskF.aqu, float64(delta(cur.TimeInQueue, prev.TimeInQueue))/ms)
	util := float64(delta(cur.IOTicks, prev.IOTicks)) * 100 / ms
	r.SetNum(diskF.util, util)
	c.rt.Record(r)
	if thr, on := c.upperThr(); on && util > thr {
		c.event(event.DiskUtil, cur.Name, "", util)
	}
}
