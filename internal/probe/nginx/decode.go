package nginx

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// evSize is the size of a ring record (struct nginx_ev).
const evSize = 72

const (
	afInet  = 2
	afInet6 = 10
)

// event is one decoded ring record.
type event struct {
	kind nginxNginxEvKind
	id   connID
	// The rest is set for a link only.
	l7                      bool
	client, virtual, server netip.AddrPort
}

// connID is a client connection: the nginx process and the kernel address
// of its socket, unique while the connection is open.
type connID struct {
	tgid uint32
	sk   uint64
}

// decode parses a ring record.
func decode(raw []byte) (event, error) {
	var e event
	if len(raw) < evSize {
		return e, fmt.Errorf("nginx: record of %d bytes, want %d", len(raw), evSize)
	}
	le := binary.LittleEndian
	e.id = connID{sk: le.Uint64(raw[0:]), tgid: le.Uint32(raw[8:])}
	e.kind = nginxNginxEvKind(raw[12])
	switch e.kind {
	case nginxNginxEvKindNGINX_EV_CLOSE:
		return e, nil
	case nginxNginxEvKindNGINX_EV_LINK:
	default:
		return e, fmt.Errorf("nginx: record kind %d", raw[12])
	}
	e.l7 = raw[13] == 1
	fam, sfam := le.Uint16(raw[14:]), le.Uint16(raw[16:])
	var err error
	if e.client, err = addrPort(fam, raw[24:40], le.Uint16(raw[18:])); err != nil {
		return e, err
	}
	if e.virtual, err = addrPort(fam, raw[40:56], le.Uint16(raw[20:])); err != nil {
		return e, err
	}
	if e.server, err = addrPort(sfam, raw[56:72], le.Uint16(raw[22:])); err != nil {
		return e, err
	}
	return e, nil
}

// addrPort makes an address of family fam from the 16 bytes of ip (IPv4:
// the first 4); an IPv4-mapped IPv6 address becomes IPv4.
func addrPort(fam uint16, ip []byte, port uint16) (netip.AddrPort, error) {
	switch fam {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[:4])), port), nil
	case afInet6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip)).Unmap(), port), nil
	}
	return netip.AddrPort{}, fmt.Errorf("nginx: address family %d", fam)
}
