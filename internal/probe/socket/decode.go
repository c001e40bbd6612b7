package socket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// EventType is enum socket_event_type of socket.bpf.c.
type EventType uint32

// Event types, as socket.bpf.c defines them.
const (
	EvSynSent        = EventType(socketSocketEventTypeSOCKET_EV_SYN_SENT)
	EvActiveOpen     = EventType(socketSocketEventTypeSOCKET_EV_ACTIVE_OPEN)
	EvActiveFail     = EventType(socketSocketEventTypeSOCKET_EV_ACTIVE_FAIL)
	EvPassiveOpen    = EventType(socketSocketEventTypeSOCKET_EV_PASSIVE_OPEN)
	EvPassiveFail    = EventType(socketSocketEventTypeSOCKET_EV_PASSIVE_FAIL)
	EvRetranSynack   = EventType(socketSocketEventTypeSOCKET_EV_RETRAN_SYNACK)
	EvRetranSyn      = EventType(socketSocketEventTypeSOCKET_EV_RETRAN_SYN)
	EvSynDrop        = EventType(socketSocketEventTypeSOCKET_EV_SYN_DROP)
	EvAcceptOverflow = EventType(socketSocketEventTypeSOCKET_EV_ACCEPT_OVERFLOW)
	EvSynOverflow    = EventType(socketSocketEventTypeSOCKET_EV_SYN_OVERFLOW)
	EvListenDrop     = EventType(socketSocketEventTypeSOCKET_EV_LISTEN_DROP)
	EvSynackSent     = EventType(socketSocketEventTypeSOCKET_EV_SYNACK_SENT)
	EvUDPSend        = EventType(socketSocketEventTypeSOCKET_EV_UDP_SEND)
	EvUDPRecv        = EventType(socketSocketEventTypeSOCKET_EV_UDP_RECV)
	EvUDPDrop        = EventType(socketSocketEventTypeSOCKET_EV_UDP_DROP)
	// EvUnowned asks for an owner walk; it carries no measurement.
	EvUnowned = EventType(socketSocketEventTypeSOCKET_EV_UNOWNED)
)

// Roles of TCP events (enum socket_role); numeric as in gala-gopher's
// entity ids.
const (
	RoleClient uint8 = 0
	RoleServer uint8 = 1
)

// RecordSize is sizeof(struct socket_event).
const RecordSize = 72

const (
	afInet  = 2
	afInet6 = 10
)

// Event is one decoded struct socket_event. For TCP, Src is the client and
// Dst the server; for UDP, Src is local and Dst remote.
type Event struct {
	Type    EventType
	TGID    uint32
	Value   uint64
	Src     netip.Addr
	Dst     netip.Addr
	SrcPort uint16
	DstPort uint16
	Family  uint16
	Role    uint8
	Comm    string
}

// Decode parses one ring buffer record.
func Decode(raw []byte) (Event, error) {
	if len(raw) < RecordSize {
		return Event{}, fmt.Errorf("socket: record of %d bytes, want %d", len(raw), RecordSize)
	}
	le := binary.LittleEndian
	e := Event{
		Type:    EventType(le.Uint32(raw[0:])),
		TGID:    le.Uint32(raw[4:]),
		Value:   le.Uint64(raw[8:]),
		SrcPort: le.Uint16(raw[48:]),
		DstPort: le.Uint16(raw[50:]),
		Family:  le.Uint16(raw[52:]),
		Role:    raw[54],
	}
	if e.Type < EvSynSent || e.Type > EvUnowned {
		return Event{}, fmt.Errorf("socket: unknown event type %d", e.Type)
	}
	switch e.Family {
	case afInet:
		e.Src = netip.AddrFrom4([4]byte(raw[16:20]))
		e.Dst = netip.AddrFrom4([4]byte(raw[32:36]))
	case afInet6:
		// IPv4-mapped addresses of dual-stack sockets print as IPv4.
		e.Src = netip.AddrFrom16([16]byte(raw[16:32])).Unmap()
		e.Dst = netip.AddrFrom16([16]byte(raw[32:48])).Unmap()
	default:
		return Event{}, fmt.Errorf("socket: unknown address family %d", e.Family)
	}
	comm := raw[56:72]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	e.Comm = string(comm)
	return e, nil
}
