package baseinfo

import (
	"fmt"
	"time"

	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

const snmpOrigin = "/proc/net/snmp"

// snmpFields maps a field of system_tcp or system_udp to its /proc/net/snmp
// counter; gauge ones are levels, the others period deltas.
var snmpFields = []struct {
	tbl         *table.Table
	field       int
	proto, name string
	gauge       bool
}{
	{table.SystemTcp, table.SystemTcp.MustIndex("tcp_curr_estab"), "Tcp", "CurrEstab", true},
	{table.SystemTcp, table.SystemTcp.MustIndex("tcp_in_segs"), "Tcp", "InSegs", false},
	{table.SystemTcp, table.SystemTcp.MustIndex("tcp_out_segs"), "Tcp", "OutSegs", false},
	{table.SystemTcp, table.SystemTcp.MustIndex("tcp_retrans_segs"), "Tcp", "RetransSegs", false},
	{table.SystemTcp, table.SystemTcp.MustIndex("tcp_in_errs"), "Tcp", "InErrs", false},
	{table.SystemUdp, table.SystemUdp.MustIndex("udp_indata_grams"), "Udp", "InDatagrams", false},
	{table.SystemUdp, table.SystemUdp.MustIndex("udp_outdata_grams"), "Udp", "OutDatagrams", false},
}

var (
	tcpOriginF = table.SystemTcp.MustIndex("origin")
	udpOriginF = table.SystemUdp.MustIndex("origin")
)

// netCollector fills system_tcp and system_udp from /proc/net/snmp (of the
// network namespace /proc/net resolves to under the root).
type netCollector struct {
	prev  procfs.SNMP
	prevT time.Time
}

func (nc *netCollector) forget() { nc.prev = nil }

func (nc *netCollector) sample(c *cycle) {
	cur, err := c.fs.SNMP()
	if err != nil {
		c.failed("net.snmp", "system_tcp, system_udp", err)
		nc.prev = nil
		return
	}
	if c.emit && nc.prev != nil {
		elapsed := c.now.Sub(nc.prevT)
		tcp := table.SystemTcp.NewRecord(c.now, elapsed)
		tcp.SetStr(tcpOriginF, snmpOrigin)
		udp := table.SystemUdp.NewRecord(c.now, elapsed)
		udp.SetStr(udpOriginF, snmpOrigin)
		for _, f := range snmpFields {
			r := tcp
			if f.tbl == table.SystemUdp {
				r = udp
			}
			a, ok := cur.Get(f.proto, f.name)
			if !ok {
				c.unmeasured("net."+f.name, fmt.Sprintf("%s.%s", f.tbl.Name, f.tbl.Fields[f.field].Name),
					fmt.Errorf("no %s %s in /proc/net/snmp", f.proto, f.name))
				continue
			}
			if f.gauge {
				r.SetNum(f.field, float64(a))
				continue
			}
			if b, ok := nc.prev.Get(f.proto, f.name); ok && a >= 0 && b >= 0 {
				r.SetNum(f.field, float64(delta(uint64(a), uint64(b))))
			}
		}
		c.rt.Record(tcp)
		c.rt.Record(udp)
	}
	nc.prev, nc.prevT = cur, c.now
}
