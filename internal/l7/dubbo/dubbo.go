package dubbo

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/lenframe"
	"github.com/galago-project/galago/internal/l7/internal/pairing"
)

// Header layout (see the package doc).
const (
	HeaderLen = 16
	magic0    = 0xda
	magic1    = 0xbb

	FlagRequest = 0x80
	FlagTwoWay  = 0x40
	FlagEvent   = 0x20
	// SerialHessian2 is the hessian2 serialization id.
	SerialHessian2 = 2

	// maxMessage bounds a frame (Dubbo's default payload limit is 8 MiB).
	maxMessage = 64 << 20
	// maxPending bounds the requests waiting for their response; the
	// oldest beyond come out alone.
	maxPending = 256
	// maxBody is how much of a request body the parser keeps to read the
	// service and method.
	maxBody = 512
)

// Response statuses.
const (
	StatusOK                = 20
	StatusClientTimeout     = 30
	StatusServerTimeout     = 31
	StatusBadRequest        = 40
	StatusBadResponse       = 50
	StatusServiceNotFound   = 60
	StatusServiceError      = 70
	StatusServerError       = 80
	StatusClientError       = 90
	StatusThreadPoolExhaust = 100
)

// Response types (the first value of a hessian2 response body).
const (
	RespException               = 0
	RespValue                   = 1
	RespNull                    = 2
	RespExceptionWithAttachment = 3
	RespValueWithAttachment     = 4
	RespNullWithAttachment      = 5
)

// header is a frame header's fields.
type header struct {
	total   int
	request bool
	twoWay  bool
	event   bool
	serial  byte
	status  byte
	id      uint64
}

func parseHeader(b []byte) (h header, ok bool) {
	if len(b) < HeaderLen || b[0] != magic0 || b[1] != magic1 {
		return h, false
	}
	n := int64(binary.BigEndian.Uint32(b[12:]))
	if n > maxMessage {
		return h, false
	}
	h.total = HeaderLen + int(n)
	h.request = b[2]&FlagRequest != 0
	h.twoWay = b[2]&FlagTwoWay != 0
	h.event = b[2]&FlagEvent != 0
	h.serial = b[2] & 0x1f
	h.status = b[3]
	h.id = binary.BigEndian.Uint64(b[4:])
	return h, true
}

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a Dubbo2 request: magic, request flag and a zero
// status byte (requests carry none).
func Detect(b []byte) bool {
	return len(b) >= HeaderLen && b[0] == magic0 && b[1] == magic1 && b[2]&FlagRequest != 0 && b[3] == 0 &&
		binary.BigEndian.Uint32(b[12:]) <= maxMessage
}

// classOf is the class of a response.
func classOf(status byte, exception bool) l7.Class {
	switch status {
	case StatusOK:
		if exception {
			return l7.ServerError
		}
		return l7.OK
	case StatusBadRequest, StatusClientError, StatusClientTimeout, StatusServiceNotFound:
		return l7.ClientError
	}
	return l7.ServerError
}

// Parser frames and pairs one Dubbo2 connection. Not safe for concurrent
// use.
type Parser struct {
	role       l7.Role
	frames     lenframe.Duplex
	reqS, resS sink
	in         *l7.Interner
	cur        [2]struct {
		h    header
		ts   uint64
		ok   bool
		body [maxBody]byte
		n    int
		cut  bool // a gap: later bytes are not the kept body's next ones
	}
	q   pairing.Queue[uint64]
	out []l7.Exchange
	api []byte
}

type sink struct {
	p   *Parser
	dir int // 0 requests, 1 responses
}

// NewParser returns a parser for one connection seen from role's side.
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role, in: &l7.Interner{}, q: pairing.Queue[uint64]{Max: maxPending}}
	p.reqS, p.resS = sink{p, 0}, sink{p, 1}
	for _, f := range []*lenframe.Framer{&p.frames.Req, &p.frames.Resp} {
		f.HeaderLen, f.Length = HeaderLen, length
	}
	return p
}

// SetInterner shares in (the API templates of a protocol) with other
// connections.
func (p *Parser) SetInterner(in *l7.Interner) {
	if in != nil {
		p.in = in
	}
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
	c.n, c.cut = 0, false
	// a request where responses go, or the reverse, is not paired
	c.ok = c.h.request == (s.dir == 0)
}

func (s *sink) Data(b []byte) {
	c := &s.p.cur[s.dir]
	if !c.ok || c.cut {
		return
	}
	c.n += copy(c.body[c.n:], b)
}

// Gap stops the kept body where the capture left a gap.
func (s *sink) Gap(int) { s.p.cur[s.dir].cut = true }

func (s *sink) End() {
	p := s.p
	c := &p.cur[s.dir]
	if !c.ok || c.h.event {
		return
	}
	if s.dir == 0 {
		api := ""
		if c.h.serial == SerialHessian2 {
			api = p.apiOf(c.body[:c.n])
		}
		r := pairing.Req[uint64]{ID: c.h.id, TS: c.ts, Size: c.h.total, API: api}
		if !c.h.twoWay {
			p.out = append(p.out, r.Alone())
			return
		}
		p.out = p.q.Push(r, p.out)
		return
	}
	exc := false
	if c.h.status == StatusOK && c.h.serial == SerialHessian2 {
		if t, ok := readInt(c.body[:c.n]); ok {
			exc = t == RespException || t == RespExceptionWithAttachment
		}
	}
	class := classOf(c.h.status, exc)
	if r, ok := p.q.Take(c.h.id); ok {
		p.out = append(p.out, r.Answered(c.ts, c.h.total, class))
		return
	}
	p.out = append(p.out, l7.Exchange{HasResponse: true, End: c.ts, Class: class, RespBytes: c.h.total})
}

// apiOf is the API template of a hessian2 request body, "" when its first
// four strings are not all there.
func (p *Parser) apiOf(b []byte) string {
	var f [4][]byte
	for i := range f {
		s, rest, ok := readString(b)
		if !ok {
			return ""
		}
		f[i], b = s, rest
	}
	service, version, method := f[1], f[2], f[3]
	if len(service) == 0 || len(method) == 0 {
		return ""
	}
	a := append(p.api[:0], service...)
	if len(version) > 0 {
		a = append(append(a, ':'), version...)
	}
	a = append(append(a, '/'), method...)
	p.api = a
	return p.in.Intern(a)
}
