package socket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Roles of endpoint_tcp rows (enum socket_role); numeric as in
// gala-gopher's entity ids.
const (
	RoleClient uint8 = 0
	RoleServer uint8 = 1
)

// Layout of the BPF structs (socket.bpf.c), checked against the generated
// types by TestSpec.
const (
	// WalkReqSize is sizeof(struct socket_walk_req), the only ring buffer
	// record.
	WalkReqSize = 8
	tcpKeySize  = 60  // struct socket_tcp_key
	tcpValSize  = 200 // struct socket_tcp_val
	udpKeySize  = 44  // struct socket_udp_key
	udpValSize  = 24  // struct socket_udp_val
	nBuckets    = 8   // estab_latency buckets: len(estabBounds) + 1
)

const (
	afInet  = 2
	afInet6 = 10
)

// WalkRequest is one decoded struct socket_walk_req: a hook met a listener
// or UDP socket without owner and asks for an owner walk.
type WalkRequest struct {
	Netns  uint32 // inode of the network namespace; 0 when the hook cannot tell
	Family uint16
	Port   uint16
}

// DecodeWalkRequest parses one ring buffer record.
func DecodeWalkRequest(raw []byte) (WalkRequest, error) {
	if len(raw) < WalkReqSize {
		return WalkRequest{}, fmt.Errorf("socket: record of %d bytes, want %d", len(raw), WalkReqSize)
	}
	le := binary.LittleEndian
	r := WalkRequest{Netns: le.Uint32(raw[0:]), Family: le.Uint16(raw[4:]), Port: le.Uint16(raw[6:])}
	if r.Family != afInet && r.Family != afInet6 {
		return WalkRequest{}, fmt.Errorf("socket: unknown address family %d", r.Family)
	}
	return r, nil
}

// tcpKey is one endpoint_tcp row.
type tcpKey struct {
	tgid       uint32
	comm       string
	role       uint8
	client     netip.Addr
	server     netip.Addr
	serverPort uint16
	family     uint16
}

// tcpSample is one read of an endpoint's monotonic BPF counters
// (struct socket_tcp_val).
type tcpSample struct {
	c         [nTCPCounters]uint64
	buckets   [nBuckets]uint64
	sum       uint64 // ns
	maxPeriod [2]uint64
	maxNs     [2]uint64
}

// udpKey is one endpoint_udp row.
type udpKey struct {
	tgid       uint32
	local      netip.Addr
	localPort  uint16
	remote     netip.Addr // invalid when unconnected
	remotePort uint16
	family     uint16
}

// udpSample is one read of struct socket_udp_val (bytes).
type udpSample struct {
	drops, sends, rcvs uint64
}

// addrs decodes a family and two 16-byte address fields.
func addrs(family uint16, a, b []byte) (netip.Addr, netip.Addr, error) {
	switch family {
	case afInet:
		return netip.AddrFrom4([4]byte(a[:4])), netip.AddrFrom4([4]byte(b[:4])), nil
	case afInet6:
		// IPv4-mapped addresses of dual-stack sockets print as IPv4.
		return netip.AddrFrom16([16]byte(a[:16])).Unmap(), netip.AddrFrom16([16]byte(b[:16])).Unmap(), nil
	}
	return netip.Addr{}, netip.Addr{}, fmt.Errorf("socket: unknown address family %d", family)
}

// decodeTCPKey parses struct socket_tcp_key.
func decodeTCPKey(raw []byte) (tcpKey, error) {
	if len(raw) != tcpKeySize {
		return tcpKey{}, fmt.Errorf("socket: tcp key of %d bytes, want %d", len(raw), tcpKeySize)
	}
	le := binary.LittleEndian
	k := tcpKey{tgid: le.Uint32(raw[0:]), family: le.Uint16(raw[4:]), serverPort: le.Uint16(raw[6:]), role: raw[56]}
	var err error
	if k.client, k.server, err = addrs(k.family, raw[8:24], raw[24:40]); err != nil {
		return tcpKey{}, err
	}
	if k.role != RoleClient && k.role != RoleServer {
		return tcpKey{}, fmt.Errorf("socket: unknown role %d", k.role)
	}
	comm := raw[40:56]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	k.comm = string(comm)
	return k, nil
}

// decodeTCPVal parses struct socket_tcp_val.
func decodeTCPVal(raw []byte) (tcpSample, error) {
	if len(raw) != tcpValSize {
		return tcpSample{}, fmt.Errorf("socket: tcp value of %d bytes, want %d", len(raw), tcpValSize)
	}
	le := binary.LittleEndian
	var s tcpSample
	off := 0
	next := func() uint64 { v := le.Uint64(raw[off:]); off += 8; return v }
	for i := range s.c {
		s.c[i] = next()
	}
	for i := range s.buckets {
		s.buckets[i] = next()
	}
	s.sum = next()
	s.maxPeriod[0], s.maxPeriod[1] = next(), next()
	s.maxNs[0], s.maxNs[1] = next(), next()
	return s, nil
}

// decodeUDPKey parses struct socket_udp_key. The remote end is left
// invalid for an unconnected socket (zero address or port).
func decodeUDPKey(raw []byte) (udpKey, error) {
	if len(raw) != udpKeySize {
		return udpKey{}, fmt.Errorf("socket: udp key of %d bytes, want %d", len(raw), udpKeySize)
	}
	le := binary.LittleEndian
	k := udpKey{tgid: le.Uint32(raw[0:]), family: le.Uint16(raw[4:]), localPort: le.Uint16(raw[6:])}
	rport := le.Uint16(raw[8:])
	local, remote, err := addrs(k.family, raw[12:28], raw[28:44])
	if err != nil {
		return udpKey{}, err
	}
	k.local = local
	if rport != 0 && !remote.IsUnspecified() {
		k.remote, k.remotePort = remote, rport
	}
	return k, nil
}

// decodeUDPVal parses struct socket_udp_val.
func decodeUDPVal(raw []byte) (udpSample, error) {
	if len(raw) != udpValSize {
		return udpSample{}, fmt.Errorf("socket: udp value of %d bytes, want %d", len(raw), udpValSize)
	}
	le := binary.LittleEndian
	return udpSample{drops: le.Uint64(raw[0:]), sends: le.Uint64(raw[8:]), rcvs: le.Uint64(raw[16:])}, nil
}
