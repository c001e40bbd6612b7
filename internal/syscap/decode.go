package syscap

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/galago-project/galago/internal/l7"
)

// L4 is the transport of a connection.
type L4 uint8

const (
	TCP L4 = L4(syscapSyscapL4SYSCAP_L4TCP)
	UDP L4 = L4(syscapSyscapL4SYSCAP_L4UDP)
)

func (l L4) String() string {
	switch l {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return fmt.Sprintf("l4(%d)", uint8(l))
}

// Conn is a traced connection, reported once before its first Data.
type Conn struct {
	ID   uint64
	TGID uint32
	FD   uint32
	// TS is CLOCK_MONOTONIC (ns) when the connection was recognised.
	TS    uint64
	L4    L4
	Role  l7.Role
	Proto l7.Protocol
	// SSL says the data is the plaintext of a TLS connection (from the TLS
	// uprobes); the raw bytes of the socket are not reported.
	SSL bool
	// Netns is the inode number of the socket's network namespace.
	Netns uint32
	// Local and Remote are the socket's addresses; Remote is invalid for
	// an unconnected UDP socket (each datagram's Data carries its peer).
	Local, Remote netip.AddrPort
}

// Data is one syscall's (or one datagram's) data on a traced connection.
type Data struct {
	ConnID uint64
	TGID   uint32
	TS     uint64 // CLOCK_MONOTONIC (ns) at the syscall's return
	Dir    l7.Direction
	// Size is how many bytes moved; Bytes (a prefix of them) is only valid
	// during the handler call.
	Size  int
	Bytes []byte
	// Peer is the datagram's remote address on an unconnected UDP socket.
	Peer netip.AddrPort
	// more and off are the record's place in a chunk captured whole
	// (whole.go): more records follow; off is the offset of Bytes in the
	// chunk (a continuation when not 0). The handler never sees them set.
	more bool
	off  int
}

// Close is the close() of a traced connection by its process (or the
// exit of its process, found by the reader's sweep).
type Close struct {
	ConnID uint64
	TGID   uint32
	TS     uint64
}

type (
	rawConn  = syscapSyscapConnRec
	rawClose = syscapSyscapCloseRec
	rawData  = syscapSyscapDataHdr
)

// Sizes of the fixed records and of the data header.
const (
	connRecSize  = int(unsafe.Sizeof(rawConn{}))
	closeRecSize = int(unsafe.Sizeof(rawClose{}))
	dataHdrSize  = int(unsafe.Sizeof(rawData{}))
	// CaptureMax is the most bytes of one chunk the kernel captures.
	CaptureMax = 4096
	recConn    = uint32(syscapSyscapRecTypeSYSCAP_REC_CONN)
	recData    = uint32(syscapSyscapRecTypeSYSCAP_REC_DATA)
	recClose   = uint32(syscapSyscapRecTypeSYSCAP_REC_CLOSE)
	flagPeer   = 0x1
	flagMore   = 0x4
	flagCont   = 0x8
	afInet     = 2
	afInet6    = 10
)

// The data header's field offsets, from the generated type.
var (
	d0                                  rawData
	offDTgid, offDConn, offDTS, offSize = unsafe.Offsetof(d0.Tgid), unsafe.Offsetof(d0.ConnId), unsafe.Offsetof(d0.Ts), unsafe.Offsetof(d0.Size)
	offLen, offDir, offFlags, offPeer   = unsafe.Offsetof(d0.Len), unsafe.Offsetof(d0.Dir), unsafe.Offsetof(d0.Flags), unsafe.Offsetof(d0.Peer)
	offPeerPort, offPeerFamily          = unsafe.Offsetof(d0.PeerPort), unsafe.Offsetof(d0.PeerFamily)
	offOff                              = unsafe.Offsetof(d0.Off)
)

// recordType is the type of a ring buffer record (its first u32), 0 if too short.
func recordType(raw []byte) uint32 {
	if len(raw) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(raw)
}

// decodeData fills d from a DATA record without allocating: d.Bytes
// aliases raw.
func decodeData(raw []byte, d *Data) error {
	if len(raw) < dataHdrSize {
		return fmt.Errorf("syscap: data record of %d bytes, want at least %d", len(raw), dataHdrSize)
	}
	le := binary.LittleEndian
	n := int(le.Uint16(raw[offLen:]))
	if n > CaptureMax || dataHdrSize+n > len(raw) {
		return fmt.Errorf("syscap: data record of %d bytes claims %d captured", len(raw), n)
	}
	dir := l7.Direction(raw[offDir])
	if dir != l7.Egress && dir != l7.Ingress {
		return fmt.Errorf("syscap: data record with direction %d", dir)
	}
	size := int(le.Uint32(raw[offSize:]))
	if size < n {
		return fmt.Errorf("syscap: data record captured %d of %d bytes", n, size)
	}
	*d = Data{
		ConnID: le.Uint64(raw[offDConn:]),
		TGID:   le.Uint32(raw[offDTgid:]),
		TS:     le.Uint64(raw[offDTS:]),
		Dir:    dir,
		Size:   size,
		Bytes:  raw[dataHdrSize : dataHdrSize+n],
	}
	if f := raw[offFlags]; f&(flagMore|flagCont) != 0 {
		d.more = f&flagMore != 0
		if f&flagCont != 0 {
			d.off = int(le.Uint32(raw[offOff:]))
			if d.off <= 0 || d.off+n > size {
				return fmt.Errorf("syscap: continuation of %d bytes at %d of a %d-byte chunk", n, d.off, size)
			}
		}
	}
	if raw[offFlags]&flagPeer != 0 {
		d.Peer = addrPort(le.Uint16(raw[offPeerFamily:]), raw[offPeer:offPeer+16], le.Uint16(raw[offPeerPort:]))
	}
	return nil
}

func decodeConn(raw []byte) (Conn, error) {
	if len(raw) != connRecSize {
		return Conn{}, fmt.Errorf("syscap: conn record of %d bytes, want %d", len(raw), connRecSize)
	}
	// The generated struct has the C layout byte for byte (HostLayout,
	// explicit padding, no pointers) and the objects are little-endian
	// like every host they are built for: a copy decodes the record.
	// encoding/binary's reflection took ~17 % of the agent's CPU on
	// connection-per-request traffic. TestLayout checks the layout.
	var r rawConn
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), connRecSize), raw)
	if r.Family != afInet && r.Family != afInet6 {
		return Conn{}, fmt.Errorf("syscap: conn record with family %d", r.Family)
	}
	c := Conn{
		ID: r.ConnId, TGID: r.Tgid, FD: r.Fd, TS: r.Ts, L4: L4(r.L4), Role: l7.Role(r.Role),
		Proto: l7.Protocol(r.Proto), Netns: r.Netns, SSL: r.Ssl != 0,
		Local: addrPort(r.Family, r.Saddr[:], r.Sport),
	}
	if r.Dport != 0 {
		c.Remote = addrPort(r.Family, r.Daddr[:], r.Dport)
	}
	return c, nil
}

func decodeClose(raw []byte) (Close, error) {
	if len(raw) != closeRecSize {
		return Close{}, fmt.Errorf("syscap: close record of %d bytes, want %d", len(raw), closeRecSize)
	}
	le := binary.LittleEndian
	return Close{TGID: le.Uint32(raw[4:]), ConnID: le.Uint64(raw[8:]), TS: le.Uint64(raw[16:])}, nil
}

// addrPort builds an address of family from 16 bytes (IPv4 in the first 4).
func addrPort(family uint16, b []byte, port uint16) netip.AddrPort {
	var a netip.Addr
	switch family {
	case afInet:
		a = netip.AddrFrom4([4]byte(b[:4]))
	case afInet6:
		a = netip.AddrFrom16([16]byte(b[:16])).Unmap()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(a, port)
}
