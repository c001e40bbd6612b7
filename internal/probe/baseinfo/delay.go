package baseinfo

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/taskstats"
)

// delayFields are proc_delay's (ns, count) field indexes per delay kind.
var delayFields = func() map[taskstats.Kind][2]int {
	m := map[taskstats.Kind][2]int{}
	for _, k := range taskstats.Kinds {
		m[k] = [2]int{ProcDelay.MustIndex(k.String() + "_delay_ns"), ProcDelay.MustIndex(k.String() + "_delay_count")}
	}
	return m
}()

var delayTGID = ProcDelay.MustIndex("tgid")

// delaySource is what the delay collector reads (a taskstats.Client).
type delaySource interface {
	TGID(tgid int) (taskstats.Stats, error)
	Close() error
}

type delaySample struct {
	start   uint64 // process start time, ticks since boot: tells a reused pid
	threads int
	stats   taskstats.Stats
}

// delayCollector fills proc_delay for the observed processes from the
// kernel's taskstats (TASKSTATS_CMD_GET per tgid over generic netlink).
type delayCollector struct {
	open  func() (delaySource, error)
	src   delaySource
	prev  map[int]delaySample
	prevT time.Time
	// prevUptime is the uptime read before the previous sample, or -1: a
	// process that started after it was entirely inside the period.
	prevUptime float64
}

func newDelayCollector() *delayCollector {
	return &delayCollector{open: func() (delaySource, error) {
		c, err := taskstats.Open()
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
}

func (dc *delayCollector) forget() {
	dc.prev = nil
	dc.close()
}

func (dc *delayCollector) close() {
	if dc.src != nil {
		_ = dc.src.Close()
		dc.src = nil
	}
}

// delayAcct says whether kernel.task_delayacct is on; when it is off (or
// unreadable) the delays other than CPU are left unset, logged once.
func delayAcct(c *cycle) bool {
	b, err := os.ReadFile(c.fs.Path("/proc/sys/kernel/task_delayacct"))
	if err == nil {
		var on bool
		if on, err = taskstats.ParseDelayAcct(b); err == nil {
			if !on {
				c.warnOnce("delay.off", "baseinfo: kernel.task_delayacct is 0, so proc_delay reports the CPU run-queue delay only; "+
					"the blkio, swapin, freepages, thrashing, compact, wpcopy and irq delays need `sysctl kernel.task_delayacct=1` (galago never changes it)")
			}
			return on
		}
	}
	c.unmeasured("delay.sysctl", "proc_delay fields other than cpu_delay_*", err)
	return false
}

func (dc *delayCollector) sample(c *cycle) {
	if dc.src == nil {
		src, err := dc.open()
		if err != nil {
			c.failed("delay.open", "proc_delay", err)
			return
		}
		dc.src = src
	}
	uptime, err := c.fs.Uptime()
	if err != nil {
		uptime = -1
	}
	pids, err := observedPIDs(c)
	if err != nil {
		c.failed("delay.list", "proc_delay", err)
		dc.prev = nil
		return
	}
	all := delayAcct(c)
	cur := make(map[int]delaySample, len(pids))
	for _, pid := range pids {
		st, err := c.fs.PIDStat(pid)
		if err != nil {
			continue // exited
		}
		s, err := dc.src.TGID(pid)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.failed("delay.get", "proc_delay of processes taskstats cannot read", err)
			}
			continue
		}
		cur[pid] = delaySample{start: st.StartTime, threads: int(st.NumThreads), stats: s}
	}
	if c.emit && dc.prev != nil {
		elapsed := c.now.Sub(dc.prevT)
		for _, pid := range pids {
			s, ok := cur[pid]
			if !ok {
				continue
			}
			base, ok := dc.prev[pid]
			switch {
			case ok && base.start == s.start:
			case dc.prevUptime >= 0 && float64(s.start)/procfs.UserHZ > dc.prevUptime:
				base = delaySample{start: s.start} // born in the period: all of it is the period's
			default:
				continue // first seen now: this sample is its baseline
			}
			r := ProcDelay.NewRecord(c.now, elapsed)
			r.SetStr(delayTGID, strconv.Itoa(pid))
			// No kind of wait can add up to more than the period times the
			// threads (doubled for threads that came and went).
			limit := float64(elapsed.Nanoseconds()) * float64(2*max(s.threads, base.threads, 1))
			for _, k := range taskstats.Kinds {
				if !s.stats.Has(k) || (k != taskstats.CPU && !all) {
					continue
				}
				f := delayFields[k]
				d, b := s.stats.Delays[k], base.stats.Delays[k]
				ns := float64(delta(d.TotalNS, b.TotalNS))
				if ns > limit {
					c.rt.Error()
					c.warnOnce("delay.bogus."+k.String(), "baseinfo: the kernel's delay total grew more than the period allows; "+
						"the field is left unset for that process and period (seen with blkio on kernels that stamp a wait's start and end on different CPUs or lose its start)",
						"field", k.String()+"_delay_ns", "tgid", pid, "ns", ns, "limit_ns", limit)
					continue
				}
				r.SetNum(f[0], ns)
				r.SetNum(f[1], float64(delta(d.Count, b.Count)))
			}
			c.rt.Record(r)
		}
	}
	dc.prev, dc.prevT, dc.prevUptime = cur, c.now, uptime
}
