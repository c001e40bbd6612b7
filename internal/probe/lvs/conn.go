package lvs

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// conn is one line of /proc/net/ip_vs_conn.
type conn struct {
	proto   string // TCP, UDP, SCTP; IP for a persistence template
	client  netip.AddrPort
	virtual netip.AddrPort
	server  netip.AddrPort
	state   string
}

// template reports whether the entry is a persistence template (it ties a
// client to a real server; it is not a connection).
func (c conn) template() bool { return c.proto == "IP" }

// maxConnLines bounds one read; entries beyond it are counted as dropped.
const maxConnLines = 1 << 20

// parseConns parses /proc/net/ip_vs_conn (ip_vs_conn_seq_show):
//
//	Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
//	TCP 0A000001 A3F2 0A00000A 0050 0A000064 1F90 ESTABLISHED     897
//	TCP fd00:0000:0000:0000:0000:0000:0000:0001 A3F2 fd00:...:000a 0050 fd00:...:0064 1F90 ESTABLISHED 897
//
// IPv4 addresses are 8 hex digits in host order as printed by %08X of the
// address in network order read as a number; IPv6 ones are %pI6 (eight
// colon-separated groups); ports are 4 hex digits. A line that does not
// parse is an error naming its line number; nothing is returned then.
// Lines past max are not parsed and returned as dropped.
func parseConns(r io.Reader, max int) (conns []conn, dropped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 4096)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if !strings.HasPrefix(text, "Pro ") {
				return nil, 0, fmt.Errorf("ip_vs_conn: header %q, want \"Pro FromIP ...\"", text)
			}
			continue
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if len(conns) >= max {
			dropped++
			continue
		}
		c, err := parseConn(text)
		if err != nil {
			return nil, 0, fmt.Errorf("ip_vs_conn line %d: %w", line, err)
		}
		conns = append(conns, c)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("ip_vs_conn line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, 0, fmt.Errorf("ip_vs_conn: empty (no header)")
	}
	return conns, dropped, nil
}

func parseConn(s string) (conn, error) {
	f := strings.Fields(s)
	if len(f) < 9 {
		return conn{}, fmt.Errorf("%d fields, want at least 9", len(f))
	}
	var c conn
	var err error
	c.proto, c.state = f[0], f[7]
	if c.client, err = addrPort(f[1], f[2]); err != nil {
		return conn{}, fmt.Errorf("client: %w", err)
	}
	if c.virtual, err = addrPort(f[3], f[4]); err != nil {
		return conn{}, fmt.Errorf("virtual: %w", err)
	}
	if c.server, err = addrPort(f[5], f[6]); err != nil {
		return conn{}, fmt.Errorf("destination: %w", err)
	}
	if _, err := strconv.ParseUint(f[8], 10, 32); err != nil {
		return conn{}, fmt.Errorf("expires %q: %w", f[8], err)
	}
	return c, nil
}

func addrPort(a, p string) (netip.AddrPort, error) {
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil || len(p) != 4 {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 4 hex digits", p)
	}
	var addr netip.Addr
	switch {
	case len(a) == 8:
		b, err := hex.DecodeString(a)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("address %q: %w", a, err)
		}
		addr = netip.AddrFrom4([4]byte(b))
	case strings.Count(a, ":") == 7:
		addr, err = netip.ParseAddr(a)
		if err != nil || !addr.Is6() {
			return netip.AddrPort{}, fmt.Errorf("address %q: not IPv6", a)
		}
	default:
		return netip.AddrPort{}, fmt.Errorf("address %q: want 8 hex digits or an IPv6 address", a)
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}
