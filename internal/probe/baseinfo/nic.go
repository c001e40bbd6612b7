package baseinfo

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var nicF = struct {
	dev, status                                int
	rxBytes, rxPackets, rxErrs, rxDropped      int
	txBytes, txPackets, txErrs, txDropped      int
	rxSpeed, txSpeed                           int
	tcDrop, tcOverlimits, tcBacklog, tcECNMark int
}{
	dev: table.Nic.MustIndex("dev_name"), status: table.Nic.MustIndex("status"),
	rxBytes: table.Nic.MustIndex("rx_bytes"), rxPackets: table.Nic.MustIndex("rx_packets"),
	rxErrs: table.Nic.MustIndex("rx_errs"), rxDropped: table.Nic.MustIndex("rx_dropped"),
	txBytes: table.Nic.MustIndex("tx_bytes"), txPackets: table.Nic.MustIndex("tx_packets"),
	txErrs: table.Nic.MustIndex("tx_errs"), txDropped: table.Nic.MustIndex("tx_dropped"),
	rxSpeed: table.Nic.MustIndex("rxspeed_KB"), txSpeed: table.Nic.MustIndex("txspeed_KB"),
	tcDrop: table.Nic.MustIndex("tc_sent_drop"), tcOverlimits: table.Nic.MustIndex("tc_sent_overlimits"),
	tcBacklog: table.Nic.MustIndex("tc_backlog"), tcECNMark: table.Nic.MustIndex("tc_ecn_mark"),
}

type nicDev struct {
	up    bool
	stats procfs.NetDevStats
	qdisc *qdiscStats // nil when the dump failed or the device has no qdisc
}

// nicCollector fills the nic table for the physical devices (those not
// under /sys/devices/virtual/net, as gala-gopher does), or only dev_name
// when that parameter is set: counters from /sys/class/net/<dev>/statistics,
// queueing-discipline counters from an rtnetlink qdisc dump.
type nicCollector struct {
	// dump returns the qdisc counters per ifindex (tests replace it).
	dump  func(procfs.FS) (map[int]qdiscStats, error)
	prev  map[string]nicDev
	prevT time.Time
}

func (nc *nicCollector) forget() { nc.prev = nil }

func (nc *nicCollector) sample(c *cycle) {
	devs, err := c.fs.NetDevices()
	if err != nil {
		c.failed("nic.list", "nic", err)
		nc.prev = nil
		return
	}
	qd, qErr := nc.dump(c.fs)
	if qErr != nil {
		c.unmeasured("nic.qdisc", "nic.tc_sent_drop, tc_sent_overlimits, tc_backlog, tc_ecn_mark", qErr)
	}
	cur := map[string]nicDev{}
	for _, d := range devs {
		if d.Virtual {
			continue
		}
		if want := c.cfg.Params.DevName; want != "" && !strings.EqualFold(want, d.Name) {
			continue
		}
		st, err := c.fs.NetDevStats(d.Name)
		if err != nil {
			continue // the device went away while we listed it
		}
		nd := nicDev{up: strings.EqualFold(d.OperState, "up"), stats: st}
		if q, ok := qd[d.Ifindex]; ok {
			nd.qdisc = &q
			if !q.HasECN {
				c.unmeasured("nic.ecn."+d.Name, "nic.tc_ecn_mark of "+d.Name,
					fmt.Errorf("its qdiscs (root %s) keep no ECN mark counter; only fq_codel, codel, pie and fq_pie do", q.Kind))
			}
		}
		cur[d.Name] = nd
	}
	if c.emit && nc.prev != nil {
		elapsed := c.now.Sub(nc.prevT)
		for name, d := range cur {
			if p, ok := nc.prev[name]; ok {
				reportNIC(c, name, d, p, elapsed)
			}
		}
	}
	nc.prev, nc.prevT = cur, c.now
}

// hostQdiscs dumps the qdiscs when they describe the devices under fs.
func hostQdiscs(fs procfs.FS) (map[int]qdiscStats, error) {
	if err := sameNetns(fs); err != nil {
		return nil, err
	}
	return dumpRootQdiscs()
}

// sameNetns checks that rtnetlink (the probe's network namespace) and
// /sys/class/net under the root describe the same devices: true for the
// host root; under another root, only when the root's init process is
// provably in the probe's namespace. Otherwise an ifindex could name a
// different device in each.
func sameNetns(fs procfs.FS) error {
	if fs.Root == "" || fs.Root == "/" {
		return nil
	}
	var host, self unix.Stat_t
	if err := unix.Stat(fs.Path("/proc/1/ns/net"), &host); err != nil {
		return fmt.Errorf("cannot tell the host's network namespace from the probe's: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return fmt.Errorf("cannot tell the host's network namespace from the probe's: %w", err)
	}
	if host.Dev != self.Dev || host.Ino != self.Ino {
		return errors.New("the probe runs in another network namespace than the host (no host networking)")
	}
	return nil
}

func reportNIC(c *cycle, name string, cur, prev nicDev, elapsed time.Duration) {
	r := table.Nic.NewRecord(c.now, elapsed)
	r.SetStr(nicF.dev, name)
	status := "DOWN"
	if cur.up {
		status = "UP"
	}
	r.SetStr(nicF.status, status)
	a, b := cur.stats, prev.stats
	d := procfs.NetDevStats{
		RxBytes: delta(a.RxBytes, b.RxBytes), RxPackets: delta(a.RxPackets, b.RxPackets),
		RxErrors: delta(a.RxErrors, b.RxErrors), RxDropped: delta(a.RxDropped, b.RxDropped),
		TxBytes: delta(a.TxBytes, b.TxBytes), TxPackets: delta(a.TxPackets, b.TxPackets),
		TxErrors: delta(a.TxErrors, b.TxErrors), TxDropped: delta(a.TxDropped, b.TxDropped),
	}
	for _, f := range []struct {
		field int
		v     uint64
	}{
		{nicF.rxBytes, d.RxBytes}, {nicF.rxPackets, d.RxPackets}, {nicF.rxErrs, d.RxErrors},
		{nicF.rxDropped, d.RxDropped}, {nicF.txBytes, d.TxBytes}, {nicF.txPackets, d.TxPackets},
		{nicF.txErrs, d.TxErrors}, {nicF.txDropped, d.TxDropped},
	} {
		r.SetNum(f.field, float64(f.v))
	}
	if s := elapsed.Seconds(); s > 0 {
		r.SetNum(nicF.rxSpeed, float64(d.RxBytes)/1024/s)
		r.SetNum(nicF.txSpeed, float64(d.TxBytes)/1024/s)
	}
	if cur.qdisc != nil {
		q := cur.qdisc
		if prev.qdisc != nil {
			r.SetNum(nicF.tcDrop, float64(delta(q.Drops, prev.qdisc.Drops)))
			r.SetNum(nicF.tcOverlimits, float64(delta(q.Overlimits, prev.qdisc.Overlimits)))
		}
		r.SetNum(nicF.tcBacklog, float64(q.Backlog))
		if q.HasECN {
			r.SetNum(nicF.tcECNMark, float64(q.ECNMark))
		}
	}
	c.rt.Record(r)

	thr := uint64(c.cfg.Params.DropsThr)
	if c.cfg.Params.ReportEvent != 1 || thr == 0 {
		return
	}
	for _, e := range []struct {
		desc *event.Desc
		v    uint64
	}{
		{event.NICTxDropped, d.TxDropped},
		{event.NICRxDropped, d.RxDropped},
		{event.NICTxErrs, d.TxErrors},
		{event.NICRxErrs, d.RxErrors},
	} {
		if e.v > thr {
			c.event(e.desc, name, name, e.v)
		}
	}
}
