package procfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// NetDevice is one entry of /sys/class/net.
type NetDevice struct {
	Name    string
	Ifindex int // 0 when /sys/class/net/<dev>/ifindex could not be read
	// Virtual is true for software devices (lo, veth, bridges, tun, ...):
	// those that live under /sys/devices/virtual/net.
	Virtual bool
	// OperState is /sys/class/net/<dev>/operstate (up, down, unknown,
	// dormant, ...); "" when it could not be read.
	OperState string
}

// NetDevices lists /sys/class/net, sorted by name.
func (fs FS) NetDevices() ([]NetDevice, error) {
	ents, err := os.ReadDir(fs.sys("class", "net"))
	if err != nil {
		return nil, err
	}
	out := make([]NetDevice, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		d := NetDevice{Name: name}
		if _, err := os.Stat(fs.sys("devices", "virtual", "net", name)); err == nil {
			d.Virtual = true
		}
		if st, err := readString(fs.sys("class", "net", name, "operstate")); err == nil {
			d.OperState = st
		}
		if idx, err := readUint(fs.sys("class", "net", name, "ifindex")); err == nil {
			d.Ifindex = int(idx)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NetDevStats are the counters of /sys/class/net/<dev>/statistics.
type NetDevStats struct {
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// NetDevStats reads the statistics of one device.
func (fs FS) NetDevStats(dev string) (NetDevStats, error) {
	var st NetDevStats
	for _, c := range []struct {
		file string
		dst  *uint64
	}{
		{"rx_bytes", &st.RxBytes}, {"rx_packets", &st.RxPackets},
		{"rx_errors", &st.RxErrors}, {"rx_dropped", &st.RxDropped},
		{"tx_bytes", &st.TxBytes}, {"tx_packets", &st.TxPackets},
		{"tx_errors", &st.TxErrors}, {"tx_dropped", &st.TxDropped},
	} {
		v, err := readUint(fs.sys("class", "net", dev, "statistics", c.file))
		if err != nil {
			return NetDevStats{}, err
		}
		*c.dst = v
	}
	return st, nil
}

// SNMP holds /proc/net/snmp or /proc/net/netstat: per protocol line prefix
// (Tcp, Udp, TcpExt, ...) the named counters. Values are signed because
// Tcp MaxConn is -1.
type SNMP map[string]map[string]int64

// Get returns one counter.
func (s SNMP) Get(proto, name string) (int64, bool) {
	v, ok := s[proto][name]
	return v, ok
}

// SNMP reads /proc/net/snmp.
func (fs FS) SNMP() (SNMP, error) { return parseFile(fs.proc("net", "snmp"), parseSNMP) }

// Netstat reads /proc/net/netstat (TcpExt, IpExt, MPTcpExt), same format.
func (fs FS) Netstat() (SNMP, error) { return parseFile(fs.proc("net", "netstat"), parseSNMP) }

// parseSNMP reads pairs of lines: "Proto: Name1 Name2 ..." then
// "Proto: v1 v2 ...".
func parseSNMP(r io.Reader) (SNMP, error) {
	out := SNMP{}
	s := newScanner(r)
	for s.Scan() {
		names := strings.Fields(s.Text())
		if len(names) == 0 {
			continue
		}
		if !s.Scan() {
			return nil, fmt.Errorf("%s: header without values", names[0])
		}
		vals := strings.Fields(s.Text())
		if len(vals) != len(names) || vals[0] != names[0] {
			return nil, fmt.Errorf("%s: values line %q does not match header", names[0], s.Text())
		}
		proto, ok := strings.CutSuffix(names[0], ":")
		if !ok || proto == "" {
			return nil, fmt.Errorf("bad line prefix %q", names[0])
		}
		m := make(map[string]int64, len(names)-1)
		for i := 1; i < len(names); i++ {
			v, err := strconv.ParseInt(vals[i], 10, 64)
			if err != nil {
				// Counters above MaxInt64 do not occur; refuse them loudly.
				return nil, fmt.Errorf("%s %s: %w", proto, names[i], err)
			}
			m[names[i]] = v
		}
		out[proto] = m
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("empty file")
	}
	return out, nil
}
