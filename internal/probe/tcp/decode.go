package tcp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"
)

// recordSize is sizeof(struct tcp_conn): every iterator and ring buffer
// record has exactly this size.
var recordSize = binary.Size(tcpTcpConn{})

// Record types (enum tcp_rec_type).
const (
	recSnapshot = uint32(tcpTcpRecTypeTCP_REC_SNAPSHOT)
	recListen   = uint32(tcpTcpRecTypeTCP_REC_LISTEN)
	recClose    = uint32(tcpTcpRecTypeTCP_REC_CLOSE)
	recLate     = uint32(tcpTcpRecTypeTCP_REC_LATE)
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
	comm         string
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
	c.comm = commString(c.raw.Comm[:])
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

func commString(c []int8) string {
	b := make([]byte, 0, len(c))
	for _, v := range c {
		if v == 0 {
			break
		}
		b = append(b, byte(v))
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
