package baseinfo

import (
	"fmt"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var cpuF = struct {
	cpu, rcu, timer, sched, netRx                         int
	user, nice, system, idle, iowait, irq, softirq, steal int
	backlogDrops, rpsCount, utilPer, mhz                  int
}{
	cpu: table.SystemCpu.MustIndex("cpu"), rcu: table.SystemCpu.MustIndex("rcu"),
	timer: table.SystemCpu.MustIndex("timer"), sched: table.SystemCpu.MustIndex("sched"),
	netRx: table.SystemCpu.MustIndex("net_rx"), user: table.SystemCpu.MustIndex("user_msec"),
	nice: table.SystemCpu.MustIndex("nice_msec"), system: table.SystemCpu.MustIndex("system_msec"),
	idle: table.SystemCpu.MustIndex("idle_msec"), iowait: table.SystemCpu.MustIndex("iowait_msec"),
	irq: table.SystemCpu.MustIndex("irq_msec"), softirq: table.SystemCpu.MustIndex("softirq_msec"),
	steal: table.SystemCpu.MustIndex("steal_msec"), backlogDrops: table.SystemCpu.MustIndex("backlog_drops"),
	rpsCount: table.SystemCpu.MustIndex("rps_count"), utilPer: table.SystemCpu.MustIndex("util_per"),
	mhz: table.SystemCpu.MustIndex("mhz"),
}

var cpuUtilF = struct{ cpu, totalUsedPer int }{
	cpu: table.SystemCpuUtil.MustIndex("cpu"), totalUsedPer: table.SystemCpuUtil.MustIndex("total_used_per"),
}

// softirqFields maps system_cpu fields to /proc/softirqs rows.
var softirqFields = []struct {
	name  string
	field int
}{{"RCU", cpuF.rcu}, {"TIMER", cpuF.timer}, {"SCHED", cpuF.sched}, {"NET_RX", cpuF.netRx}}

type cpuSample struct {
	stat    procfs.Stat
	softirq *procfs.Softirqs           // nil when unreadable
	softnet map[int]procfs.SoftnetStat // nil when unreadable
}

// cpuCollector fills system_cpu (one record per online CPU) and
// system_cpu_util from /proc/stat, /proc/softirqs, /proc/net/softnet_stat
// and /proc/cpuinfo.
type cpuCollector struct {
	prev  *cpuSample
	prevT time.Time
}

func (cc *cpuCollector) forget() { cc.prev = nil }

func (cc *cpuCollector) sample(c *cycle) {
	st, err := c.fs.Stat()
	if err != nil {
		c.failed("cpu.stat", "system_cpu, system_cpu_util", err)
		cc.prev = nil
		return
	}
	cur := &cpuSample{stat: st}
	if s, err := c.fs.Softirqs(); err == nil {
		cur.softirq = &s
	} else {
		c.unmeasured("cpu.softirqs", "system_cpu.rcu, timer, sched, net_rx", err)
	}
	if rows, err := c.fs.SoftnetStat(); err == nil {
		cur.softnet = make(map[int]procfs.SoftnetStat, len(rows))
		for _, r := range rows {
			cur.softnet[r.CPU] = r
		}
	} else {
		c.unmeasured("cpu.softnet", "system_cpu.backlog_drops, rps_count", err)
	}
	mhz := cpuMHz(c, st.CPUs)
	if c.emit && cc.prev != nil {
		cc.report(c, cc.prev, cur, c.now.Sub(cc.prevT), mhz)
	}
	cc.prev, cc.prevT = cur, c.now
}

// cpuMHz reads each CPU's current frequency: "cpu MHz" of /proc/cpuinfo,
// else cpufreq's scaling_cur_freq.
func cpuMHz(c *cycle, cpus []procfs.CPUStat) map[int]float64 {
	out := map[int]float64{}
	if infos, err := c.fs.CPUInfo(); err == nil {
		for _, i := range infos {
			if i.HasMHz {
				out[i.Processor] = i.MHz
			}
		}
	}
	var lastErr error
	for _, s := range cpus {
		if _, ok := out[s.ID]; ok {
			continue
		}
		khz, err := c.fs.CPUCurFreqKHz(s.ID)
		if err != nil {
			lastErr = err
			continue
		}
		out[s.ID] = float64(khz) / 1000
	}
	if lastErr != nil {
		c.unmeasured("cpu.mhz", "system_cpu.mhz",
			fmt.Errorf("no \"cpu MHz\" in /proc/cpuinfo and no cpufreq: %w", lastErr))
	}
	return out
}

// utilization is the busy share of the ticks that passed, in percent; ok is
// false when no tick passed.
func utilization(cur, prev procfs.CPUTimes) (float64, bool) {
	total := delta(cur.Total(), prev.Total())
	if total == 0 {
		return 0, false
	}
	busy := delta(cur.Busy(), prev.Busy())
	return float64(busy) * 100 / float64(total), true
}

func ticksToMsec(d uint64) float64 { return float64(d) * 1000 / procfs.UserHZ }

func (cc *cpuCollector) report(c *cycle, prev, cur *cpuSample, elapsed time.Duration, mhz map[int]float64) {
	prevCPU := make(map[int]procfs.CPUTimes, len(prev.stat.CPUs))
	for _, s := range prev.stat.CPUs {
		prevCPU[s.ID] = s.CPUTimes
	}
	for _, s := range cur.stat.CPUs {
		p, ok := prevCPU[s.ID]
		if !ok {
			continue // came online during the period
		}
		r := table.SystemCpu.NewRecord(c.now, elapsed)
		r.SetStr(cpuF.cpu, strconv.Itoa(s.ID))
		if cur.softirq != nil && prev.softirq != nil {
			for _, f := range softirqFields {
				a, ok1 := cur.softirq.Get(f.name, s.ID)
				b, ok2 := prev.softirq.Get(f.name, s.ID)
				if ok1 && ok2 {
					r.SetNum(f.field, float64(delta(a, b)))
				}
			}
		}
		for _, m := range []struct {
			field     int
			cur, prev uint64
		}{
			{cpuF.user, s.User, p.User}, {cpuF.nice, s.Nice, p.Nice}, {cpuF.system, s.System, p.System},
			{cpuF.idle, s.Idle, p.Idle}, {cpuF.iowait, s.IOWait, p.IOWait}, {cpuF.irq, s.IRQ, p.IRQ},
			{cpuF.softirq, s.SoftIRQ, p.SoftIRQ}, {cpuF.steal, s.Steal, p.Steal},
		} {
			r.SetNum(m.field, ticksToMsec(delta(m.cur, m.prev)))
		}
		if a, ok := cur.softnet[s.ID]; ok {
			if b, ok := prev.softnet[s.ID]; ok {
				r.SetNum(cpuF.backlogDrops, float64(delta(a.Dropped, b.Dropped)))
				r.SetNum(cpuF.rpsCount, float64(delta(a.ReceivedRPS, b.ReceivedRPS)))
			}
		}
		if u, ok := utilization(s.CPUTimes, p); ok {
			r.SetNum(cpuF.utilPer, u)
		}
		if v, ok := mhz[s.ID]; ok {
			r.SetNum(cpuF.mhz, v)
		}
		c.rt.Record(r)
	}

	u, ok := utilization(cur.stat.Total, prev.stat.Total)
	if !ok {
		return
	}
	r := table.SystemCpuUtil.NewRecord(c.now, elapsed)
	r.SetStr(cpuUtilF.cpu, "cpu")
	r.SetNum(cpuUtilF.totalUsedPer, u)
	c.rt.Record(r)
	if thr, on := c.upperThr(); on && u > thr {
		c.event(event.CPUTotalUsedPer, "cpu", "", u)
	}
}
