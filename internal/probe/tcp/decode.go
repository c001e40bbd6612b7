package tcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/galago-project/galago/internal/bpfrt"
)

// recordSize is sizeof(struct tcp_conn): every iterator and ring buffer
// record has exactly this size.
var recordSize = binary.Size(tcpTcpConn{})

// delaySize is sizeof(struct tcp_delay), the ring buffer's DELAY records.
var delaySize = binary.Size(tcpTcpDelay{})

// Record types (enum tcp_rec_type).
const (
	recSnapshot = uint32(tcpTcpRecTypeTCP_REC_SNAPSHOT)
	recListen   = uint32(tcpTcpRecTypeTCP_REC_LISTEN)
	recClose    = uint32(tcpTcpRecTypeTCP_REC_CLOSE)
	recLate     = uint32(tcpTcpRecTypeTCP_REC_LATE)
	recDelay    = uint32(tcpTcpRecTypeTCP_REC_DELAY)
)

// Roles (enum galago_sk_role in sockowner.h).
const (
	roleUnknown  = 0
	roleClient   = 1
	roleServer   = 2
	roleListener = 3
)

// unsetU32 is TCP_UNSET: the BPF side could not compute the value.
const unsetU32 = ^uint32(0)

const (
	afInet  = 2
	afInet6 = 10
)

// conn is one decoded struct tcp_conn with its addresses resolved.
type conn struct {
	raw tcpTcpConn
	// family is AF_INET for IPv4 and for IPv4-mapped IPv6 addresses (a
	// dual-stack socket carrying IPv4 traffic), else AF_INET6.
	family       uint16
	local, remot netip.Addr
}

// decode parses one fixed-size record.
func decode(b []byte) (conn, error) {
	var c conn
	if len(b) != recordSize {
		return c, fmt.Errorf("tcp record: %d bytes, want %d", len(b), recordSize)
	}
	// The generated struct has the C layout byte for byte (bpf2go, explicit
	// padding, no pointers) and the objects are little-endian like every
	// host they are built for (x86, arm64): a copy decodes the record.
	// encoding/binary's reflection cost a fifth of a sample's CPU with
	// 20k sockets. TestDecodeLayout checks the sizes agree.
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.raw)), recordSize), b)
	switch c.raw.Type {
	case recSnapshot, recListen, recClose, recLate:
	default:
		return c, fmt.Errorf("tcp record: unknown type %d", c.raw.Type)
	}
	if c.raw.Type == recLate {
		return c, nil // carries only the owner, cookie, generation and counters
	}
	switch c.raw.Family {
	case afInet:
		c.local = netip.AddrFrom4([4]byte(c.raw.Saddr[:4]))
		c.remot = netip.AddrFrom4([4]byte(c.raw.Daddr[:4]))
		c.family = afInet
	case afInet6:
		c.local = netip.AddrFrom16(c.raw.Saddr).Unmap()
		c.remot = netip.AddrFrom16(c.raw.Daddr).Unmap()
		c.family = afInet6
		if c.local.Is4() && (c.remot.Is4() || !c.remot.IsValid() || c.remot.IsUnspecified()) {
			c.family = afInet
		}
	default:
		return c, fmt.Errorf("tcp record: unknown address family %d", c.raw.Family)
	}
	return c, nil
}

// decodeAll splits an iterator's output into records.
func decodeAll(b []byte) ([]conn, error) {
	if len(b)%recordSize != 0 {
		return nil, fmt.Errorf("tcp iterator: %d bytes is not a multiple of %d", len(b), recordSize)
	}
	out := make([]conn, 0, len(b)/recordSize)
	for off := 0; off < len(b); off += recordSize {
		c, err := decode(b[off : off+recordSize])
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// commString is a record's comm as a string. Built once per row key, not
// per record (aggregator.keyOf).
func commString(c []int8) string { return bpfrt.CString(c) }

// recType is the type of a ring buffer record (the first field of both
// struct tcp_conn and struct tcp_delay), 0 when too short.
func recType(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// delaySample is one decoded struct tcp_delay.
type delaySample struct {
	raw    tcpTcpDelay
	remote netip.Addr
}

// decodeDelay parses one DELAY record.
func decodeDelay(b []byte) (delaySample, error) {
	var d delaySample
	if len(b) != delaySize {
		return d, fmt.Errorf("tcp delay record: %d bytes, want %d", len(b), delaySize)
	}
	if _, err := binary.Decode(b, binary.LittleEndian, &d.raw); err != nil {
		return d, fmt.Errorf("tcp delay record: %w", err)
	}
	if d.raw.Type != recDelay {
		return d, fmt.Errorf("tcp delay record: type %d", d.raw.Type)
	}
	switch d.raw.Family {
	case afInet:
		d.remote = netip.AddrFrom4([4]byte(d.raw.Raddr[:4]))
	case afInet6:
		d.remote = netip.AddrFrom16(d.raw.Raddr).Unmap()
	default:
		return d, fmt.Errorf("tcp delay record: unknown address family %d", d.raw.Family)
	}
	if d.raw.Role != roleClient && d.raw.Role != roleServer {
		return d, fmt.Errorf("tcp delay record: role %d", d.raw.Role)
	}
	return d, nil
}
