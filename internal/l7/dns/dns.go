package dns

import (
	"github.com/galago-project/galago/internal/l7"
)

const (
	// maxPending bounds the queries waiting for their responses; past it
	// the oldest is given up (out with HasResponse false).
	maxPending = 256
	// Timeout is how long a query waits for its response (by the chunks'
	// timestamps) before it comes out with HasResponse false: resolvers
	// give up after 5 s (glibc, Go, dig) and retry with a new query.
	Timeout = 10_000_000_000
	// headCap is how much of a TCP message is kept: enough for the header
	// and the longest question, and for a whole small response (its OPT
	// record's extended RCODE).
	headCap = 512
)

// Detect reports whether b, the first bytes a client sent (a UDP
// datagram, or the start of a TCP stream), starts a DNS query: a 12-byte
// header with QR 0, opcode QUERY, NOTIFY or UPDATE, the Z bit and RCODE
// 0, one question, no answers, for QUERY and NOTIFY no authority records
// and at most 2 additional records (OPT, TSIG), followed by a first
// label of 1 to 63 bytes or the root; over TCP the same after a 2-byte
// length of 17 to 65535. At most 13 bytes are read (15 over TCP).
func Detect(b []byte) bool {
	if isQuery(b) {
		return true
	}
	if len(b) < 2 {
		return false
	}
	l := int(b[0])<<8 | int(b[1])
	return l >= headerLen+5 && isQuery(b[2:])
}

func isQuery(b []byte) bool {
	if len(b) < headerLen+1 {
		return false
	}
	op := b[2] >> 3 & 0xf
	switch {
	case b[2]&0x80 != 0, op != 0 && op != 4 && op != 5, b[3]&0x4f != 0: // QR, opcode, Z and RCODE
		return false
	case b[4] != 0 || b[5] != 1 || b[6] != 0 || b[7] != 0: // one question, no answer
		return false
	case op != 5 && (b[8] != 0 || b[9] != 0 || b[10] != 0 || b[11] > 2):
		return false
	}
	return b[12] <= 63
}

// pending is a query waiting for its response.
type pending struct {
	ts   uint64
	key  uint64 // the question's
	api  string
	size int
	id   uint16
}

// stream frames one direction of a TCP connection: a 2-byte length, the
// message.
type stream struct {
	lost    bool
	lenN    int // bytes of the length prefix read
	lenBuf  [2]byte
	left    int // bytes of the message still to come
	open    bool
	ts      uint64
	size    int
	headN   int
	headCut bool // a gap: keep no more
	head    [headCap]byte
}

// Parser parses the DNS messages of one UDP socket or TCP connection
// (see the package doc).
type Parser struct {
	reqDir    l7.Direction
	datagram  bool
	req, resp stream
	q         []pending // oldest first
	desyncs   uint64

	in  *l7.Interner
	own l7.Interner
	// the last question's bytes and template
	lastQN  int
	lastOp  uint8
	lastAPI string
	lastQ   [maxName + 5]byte
}

var _ l7.Parser = (*Parser)(nil)

// NewParser returns a parser for a TCP connection (messages behind a
// 2-byte length) on which the observed process has the given role.
func NewParser(role l7.Role) *Parser {
	p := &Parser{reqDir: role.RequestDir()}
	p.in = &p.own
	return p
}

// NewUDPParser returns a parser for a UDP socket: each chunk is one
// datagram, one message.
func NewUDPParser(role l7.Role) *Parser {
	p := NewParser(role)
	p.datagram = true
	return p
}

// SetInterner makes the parser intern its templates in in, shared with
// other parsers fed from the same goroutine (a resolver opens a socket
// per query: templates interned per parser would be allocated every
// time).
func (p *Parser) SetInterner(in *l7.Interner) {
	if in != nil {
		p.in = in
	}
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	out = p.expire(c.TS, out)
	isReq := c.Dir == p.reqDir
	if p.datagram {
		return p.message(c.Data, max(c.Size, len(c.Data)), c.TS, isReq, out)
	}
	s := &p.resp
	if isReq {
		s = &p.req
	}
	data := c.Data
	if s.lost {
		if !startsMessage(data, isReq) {
			return out
		}
		s.lost = false
	}
	for len(data) > 0 {
		if !s.open {
			// The length prefix, maybe split across chunks.
			if s.lenN == 0 {
				s.ts = c.TS
			}
			k := min(2-s.lenN, len(data))
			copy(s.lenBuf[s.lenN:], data[:k])
			s.lenN += k
			data = data[k:]
			if s.lenN < 2 {
				break
			}
			l := int(s.lenBuf[0])<<8 | int(s.lenBuf[1])
			s.lenN = 0
			if l < headerLen {
				return p.desync(s, out)
			}
			s.open, s.size, s.left, s.headN, s.headCut = true, 2, l, 0, false
		}
		k := min(s.left, len(data))
		if s.headN == 0 && k == s.left && !s.headCut {
			// The whole message is in sight: read it there.
			s.left, s.size, s.open = 0, s.size+k, false
			out = p.message(data[:k], s.size, s.ts, isReq, out)
			data = data[k:]
			continue
		}
		if !s.headCut {
			s.headN += copy(s.head[s.headN:], data[:k])
		}
		s.left -= k
		s.size += k
		data = data[k:]
		if s.left == 0 {
			s.open = false
			out = p.message(s.head[:s.headN], s.size, s.ts, isReq, out)
		}
	}
	if gap := c.Size - len(c.Data); gap > 0 {
		if !s.open || gap > s.left {
			return p.desync(s, out)
		}
		s.left -= gap
		s.size += gap
		s.headCut = true
		if s.left == 0 {
			s.open = false
			out = p.message(s.head[:s.headN], s.size, s.ts, isReq, out)
		}
	}
	return out
}

// message handles one message: m is what was captured of it (its start),
// size its length on the wire.
func (p *Parser) message(m []byte, size int, ts uint64, isReq bool, out []l7.Exchange) []l7.Exchange {
	h, ok := parseHeader(m)
	if !ok || h.qr == isReq {
		p.desyncs++ // not a DNS message, or one going the wrong way
		return out
	}
	var key uint64
	q, hasQ := question{}, false
	if h.qd > 0 {
		q, hasQ = parseQuestion(m)
		if hasQ {
			key = q.key()
		}
	}
	if isReq {
		e := pending{ts: ts, key: key, size: size, id: h.id}
		if hasQ && h.opcode == p.lastOp && p.lastAPI != "" && string(m[headerLen:q.end]) == string(p.lastQ[:p.lastQN]) {
			e.api = p.lastAPI // the same question again (a client asking repeatedly)
		} else {
			var buf [maxAPI + 16]byte
			if b, ok := AppendAPI(buf[:0], m); ok {
				e.api = p.in.Intern(b)
				if hasQ {
					p.lastQN = copy(p.lastQ[:], m[headerLen:q.end])
					p.lastOp, p.lastAPI = h.opcode, e.api
				}
			}
		}
		if len(p.q) == maxPending {
			// Given up: a query this old among so many newer ones was
			// not answered.
			out = append(out, unanswered(&p.q[0]))
			copy(p.q, p.q[1:])
			p.q = p.q[:len(p.q)-1]
		}
		p.q = append(p.q, e)
		return out
	}
	// A response pairs with the oldest query of its id and question; one
	// without a question (some FORMERR responses) with the oldest of its
	// id. A response cut before its question ends is paired by id too.
	cut := h.qd > 0 && !hasQ && len(m) < size
	for i := range p.q {
		e := &p.q[i]
		if e.id != h.id || hasQ && e.key != key || h.qd > 0 && !hasQ && !cut {
			continue
		}
		out = append(out, l7.Exchange{
			HasRequest: true, HasResponse: true, Start: e.ts, End: ts,
			Class: ResponseClass(m), API: e.api, ReqBytes: e.size, RespBytes: size,
		})
		copy(p.q[i:], p.q[i+1:])
		p.q = p.q[:len(p.q)-1]
		return out
	}
	p.desyncs++ // a response to no query seen: capture began late, or it came after Timeout
	return out
}

func unanswered(e *pending) l7.Exchange {
	return l7.Exchange{HasRequest: true, Start: e.ts, API: e.api, ReqBytes: e.size}
}

// expire gives up the queries older than Timeout at ts.
func (p *Parser) expire(ts uint64, out []l7.Exchange) []l7.Exchange {
	n := 0
	for n < len(p.q) && ts > p.q[n].ts && ts-p.q[n].ts > Timeout {
		out = append(out, unanswered(&p.q[n]))
		n++
	}
	if n > 0 {
		k := copy(p.q, p.q[n:])
		p.q = p.q[:k]
	}
	return out
}

// desync handles lost boundaries on a TCP stream: the message in progress
// is dropped, and the stream waits for a chunk that starts a message.
// Pairing by id needs nothing more: the responses to queries the gap hid
// find no query and are counted too.
func (p *Parser) desync(s *stream, out []l7.Exchange) []l7.Exchange {
	p.desyncs++
	s.open, s.lenN, s.lost = false, 0, true
	return out
}

// startsMessage reports whether a TCP chunk after lost boundaries
// plausibly starts a message: a length of a header at least, and a header
// going the right way with at most one question.
func startsMessage(b []byte, isReq bool) bool {
	if len(b) < 2+headerLen {
		return false
	}
	l := int(b[0])<<8 | int(b[1])
	h, _ := parseHeader(b[2:])
	return l >= headerLen && h.qr != isReq && h.qd <= 1 && h.opcode <= 6
}

// Flush implements l7.Parser: the queries still waiting for a response.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	for i := range p.q {
		out = append(out, unanswered(&p.q[i]))
	}
	p.q = p.q[:0]
	p.req = stream{}
	p.resp = stream{}
	return out
}
