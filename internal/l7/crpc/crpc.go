package crpc

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/lenframe"
	"github.com/galago-project/galago/internal/l7/internal/pairing"
)

// The tech header, as gala-gopher documents it (l7probe include/l7.h,
// the comment above __get_crpc_type).
const (
	flag1 = 0x1a
	flag2 = 0x19
	// the first bytes msgLen does not count: beginFlag and msgLen itself
	msgLenOffset = 6
	// the first bytes headLen does not count: beginFlag, msgLen, headLen
	headLenOffset = 8
	// MinHeader is gala-gopher's CRPC_REQUEST_HEADER_MIN_LEN: the tech
	// header (32 bytes) and the business header's documented fields.
	MinHeader = 103
	// framed is what the framer keeps: beginFlag to requestID
	framed = 28

	rqFlag = 0x80 // property bit 0: 1 request, 0 response
	hbFlag = 0x20 // property bit 2: heartbeat

	maxMessage = 64 << 20
	maxPending = 256
)

// header is the tech header's fields the parser uses.
type header struct {
	total     int // the message's length
	request   bool
	heartbeat bool
	id        [16]byte
}

// parseHeader reads the first 28 bytes of a message; ok is false when
// they are not a CRPC tech header.
func parseHeader(b []byte) (h header, ok bool) {
	if len(b) < framed || b[0] != flag1 || b[1] != flag2 || (b[8] != 1 && b[8] != 2) {
		return h, false
	}
	msgLen := int64(binary.BigEndian.Uint32(b[2:]))
	headLen := int64(binary.BigEndian.Uint16(b[6:]))
	total, head := msgLen+msgLenOffset, headLen+headLenOffset
	if total > maxMessage || head < MinHeader || head > total || (b[9]>>2)&7 > 2 {
		return h, false
	}
	h.total = int(total)
	h.request = b[9]&rqFlag != 0
	h.heartbeat = b[9]&hbFlag != 0
	copy(h.id[:], b[12:28])
	return h, true
}

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a CRPC request: see the package doc for the exact
// signature (the first 12 bytes).
func Detect(b []byte) bool {
	if len(b) < 12 {
		return false
	}
	var hb [framed]byte
	copy(hb[:], b[:12])
	h, ok := parseHeader(hb[:])
	return ok && h.request
}

// APIHeartbeat is the API template of heartbeats. Calls have none: the
// service and method are inside the serialized body, whose layout is not
// published.
const APIHeartbeat = "heartbeat"

// Parser frames and pairs one CRPC connection. Requests and responses
// carry the same 16-byte requestID and are paired by it, in any order (an
// RPC connection multiplexes calls). A response whose request was not seen
// comes out alone (HasRequest false). Every exchange is OK: where a
// response's status is, is not documented.
type Parser struct {
	role   l7.Role
	frames lenframe.Duplex
	reqS   sink
	resS   sink
	cur    [2]struct {
		h  header
		ts uint64
		ok bool // the message is of its direction's kind
	}
	q   pairing.Queue[[16]byte]
	out []l7.Exchange
}

type sink struct {
	p   *Parser
	dir int // 0 requests, 1 responses
}

// NewParser returns a parser for one connection seen from role's side.
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role}
	p.reqS, p.resS = sink{p, 0}, sink{p, 1}
	p.q.Max = maxPending
	for _, f := range []*lenframe.Framer{&p.frames.Req, &p.frames.Resp} {
		f.HeaderLen, f.Length = framed, length
	}
	return p
}

func length(b []byte) int {
	h, ok := parseHeader(b)
	if !ok {
		return -1
	}
	return h.total
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.frames.Desyncs() }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	p.out = out
	p.frames.Feed(p.role, &c, &p.reqS, &p.resS)
	out, p.out = p.out, nil
	return out
}

// Flush implements l7.Parser: the requests still waiting for a response.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange { return p.q.Flush(out) }

func (s *sink) Start(b []byte, _ int, ts uint64) {
	c := &s.p.cur[s.dir]
	c.h, _ = parseHeader(b)
	c.ts = ts
	// a request where responses go, or the reverse, is not paired
	c.ok = c.h.request == (s.dir == 0)
}

func (s *sink) Data([]byte) {}
func (s *sink) Gap(int)     {}

func (s *sink) End() {
	p := s.p
	c := &p.cur[s.dir]
	if !c.ok {
		return
	}
	api := ""
	if c.h.heartbeat {
		api = APIHeartbeat
	}
	if s.dir == 0 {
		p.out = p.q.Push(pairing.Req[[16]byte]{ID: c.h.id, TS: c.ts, Size: c.h.total, API: api}, p.out)
		return
	}
	if r, ok := p.q.Take(c.h.id); ok {
		p.out = append(p.out, r.Answered(c.ts, c.h.total, l7.OK))
		return
	}
	p.out = append(p.out, l7.Exchange{HasResponse: true, End: c.ts, API: api, RespBytes: c.h.total})
}
