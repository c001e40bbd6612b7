package memcached

import (
	"bytes"

	"github.com/galago-project/galago/internal/l7"
)

// maxPending bounds the requests kept while they wait for their
// responses; deeper pipelines are counted, not kept (see doc.go).
const maxPending = 1024

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a memcached text protocol command: a command name
// memcached knows, in lower case, followed by a space and a printable
// byte (get, gets, gat, gats, set, add, replace, append, prepend, cas,
// delete, incr, decr, touch, stats, verbosity, flush_all, mg, ms, md, ma,
// me, lru_crawler, watch), or a command that stands alone followed by
// "\r\n" or "\n" (stats, version, flush_all, quit, mn). The binary
// protocol (first byte 0x80) is not detected: it is not parsed.
func Detect(b []byte) bool {
	for _, w := range withArgs {
		if len(b) >= len(w)+2 && string(b[:len(w)]) == w && b[len(w)] == ' ' && b[len(w)+1] > ' ' && b[len(w)+1] < 0x7f {
			return true
		}
	}
	for _, w := range alone {
		if len(b) > len(w) && string(b[:len(w)]) == w && (b[len(w)] == '\n' || b[len(w)] == '\r' && len(b) > len(w)+1 && b[len(w)+1] == '\n') {
			return true
		}
	}
	return false
}

var withArgs = [...]string{"get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas",
	"delete", "incr", "decr", "touch", "stats", "verbosity", "flush_all", "mg", "ms", "md", "ma", "me",
	"lru_crawler", "watch"}

var alone = [...]string{"stats", "version", "flush_all", "quit", "mn"}

type event uint8

const (
	evNone  event = iota
	evLine        // a line is complete: s.cur
	evData        // a data block is complete
	evError       // bytes that do not frame (a data block without its CRLF)
	evEnd         // a gap ended a VALUE's data block and the END after it
)

// stream frames one direction into lines and data blocks.
type stream struct {
	lost     bool
	dataLeft int64 // bytes of a data block (and its CRLF) still to come
	lineN    int   // bytes of a line begun in an earlier chunk
	line     [maxLine]byte
	// cur is the line just completed: its first maxLine bytes (all of
	// it when curFull), valid until the next call.
	cur     []byte
	curFull bool

	// the message in progress
	open   bool
	ts     uint64
	seq    uint64
	size   int64
	c      cmd      // request: its command line
	lines  int      // response: lines so far
	first  rcode    // response: its first line's code
	class  l7.Class // response: its outcome so far
	list   bool     // response: a list that ends with END (VALUE, STAT, ITEM lines, dumps)
	opaque uint64   // response: the O flag of a meta response
	hasOpq bool
}

func (s *stream) reset() {
	s.dataLeft, s.lineN, s.open, s.cur = 0, 0, false, nil
}

// next consumes data (non-empty) up to the end of a line or a data block.
func (s *stream) next(data []byte, ts, seq uint64, isReq bool) (int, event) {
	if !s.open {
		s.open, s.ts, s.seq, s.size = true, ts, seq, 0
		s.lines, s.first, s.class, s.list, s.hasOpq = 0, cOther, l7.OK, false, false
	}
	if s.dataLeft > 0 {
		k := int64(len(data))
		if k > s.dataLeft {
			k = s.dataLeft
		}
		// memcached reads a request's block by its length whatever ends
		// it (and answers "bad data chunk"); a server's block ends with
		// CRLF, checked where in sight.
		if !isReq {
			if cr := s.dataLeft - 2; cr >= 0 && cr < k && data[cr] != '\r' {
				return int(k), evError
			}
			if lf := s.dataLeft - 1; lf < k && data[lf] != '\n' {
				return int(k), evError
			}
		}
		s.size += k
		s.dataLeft -= k
		if s.dataLeft > 0 {
			return int(k), evNone
		}
		return int(k), evData
	}
	j := bytes.IndexByte(data, '\n')
	if j < 0 {
		if s.lineN < maxLine {
			copy(s.line[s.lineN:], data)
		}
		s.lineN += len(data)
		s.size += int64(len(data))
		return len(data), evNone
	}
	s.size += int64(j + 1)
	if s.lineN == 0 {
		s.cur, s.curFull = data[:j+1], true
		return j + 1, evLine
	}
	if s.lineN < maxLine {
		copy(s.line[s.lineN:], data[:j+1])
	}
	n := s.lineN + j + 1
	s.lineN = 0
	s.cur, s.curFull = s.line[:min(n, maxLine)], n <= maxLine
	return j + 1, evLine
}

// gap steps over n uncaptured bytes: inside a data block the parser can
// tell where they end; after the block of a retrieval's VALUE, 5 bytes
// more can only be its "END\r\n" (another VALUE takes 16 at least), and so
// can the line that follows a whole block when its bytes seen and those
// missing are a start of "END\r\n" and 5 in all (a reply a little over the
// capture's 4 KiB: the value whole, its END cut).
func (s *stream) gap(n int64) (event, bool) {
	if s.open && s.dataLeft == 0 && s.first == cValue && s.lineN < len(endLine) &&
		int64(s.lineN)+n == int64(len(endLine)) && string(s.line[:s.lineN]) == endLine[:s.lineN] {
		s.size += n
		s.lineN = 0
		return evEnd, true
	}
	if !s.open || s.dataLeft == 0 || n > s.dataLeft && (n != s.dataLeft+5 || s.first != cValue) {
		return evNone, false
	}
	s.size += n
	if n > s.dataLeft {
		s.dataLeft = 0
		return evEnd, true
	}
	s.dataLeft -= n
	if s.dataLeft > 0 {
		return evNone, true
	}
	return evData, true
}

// endLine ends a retrieval's list of VALUEs.
const endLine = "END\r\n"

// pending is a request waiting for its response, or a barrier.
type pending struct {
	ts, seq uint64
	api     string
	size    int64
	opaque  uint64
	n       int64 // kOverflow: the requests it stands for
	kind    kind
	resp    respKind
	quiet   meta
	hasOpq  bool
	infer   bool // a barrier behind a gap in the requests: each response to it stands for one
}

type kind uint8

const (
	kRequest  kind = iota
	kBarrier       // a gap in which an unknown number of requests or responses went
	kOverflow      // n requests beyond maxPending, known by their number
)

// Parser parses one connection's memcached text protocol conversation
// (see the package doc).
type Parser struct {
	reqDir    l7.Direction
	seq       uint64
	req, resp stream
	q         []pending
	qh        int
	desyncs   uint64
	watching  bool // "watch" answered OK: what follows is a log stream
}

var _ l7.Parser = (*Parser)(nil)

// NewParser returns a parser for one connection on which the observed
// process has the given role.
func NewParser(role l7.Role) *Parser {
	return &Parser{reqDir: role.RequestDir()}
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	p.seq++
	isReq := c.Dir == p.reqDir
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
		n, ev := s.next(data, c.TS, p.seq, isReq)
		data = data[n:]
		switch ev {
		case evLine:
			out = p.line(s, isReq, out)
		case evData:
			out = p.data(s, isReq, out)
		case evError:
			return p.desync(s, isReq, c.TS, out)
		}
	}
	if gap := int64(c.Size) - int64(len(c.Data)); gap > 0 {
		ev, ok := s.gap(gap)
		if !ok {
			return p.desync(s, isReq, c.TS, out)
		}
		switch ev {
		case evData:
			out = p.data(s, isReq, out)
		case evEnd:
			out = p.response(s, out)
		}
	}
	return out
}

// line handles a complete line of s.
func (p *Parser) line(s *stream, isReq bool, out []l7.Exchange) []l7.Exchange {
	line := trimEOL(s.cur)
	if isReq {
		s.c = parseCmd(line, s.curFull)
		if s.c.data > 0 {
			s.dataLeft = s.c.data
			return out
		}
		return p.request(s, out)
	}
	c := code(line)
	first := s.lines == 0
	s.lines++
	if first {
		s.first = c
		s.class = ResponseClass(line)
		s.list = c == cValue || c == cStat || c == cItem
		if e := p.front(); e != nil && e.kind == kRequest && e.resp == rDump {
			s.list = true
		}
		if c >= cVA && c <= cMN {
			s.opaque, s.hasOpq = metaOpaque(line, c)
		}
	} else if cl := ResponseClass(line); cl > s.class {
		s.class = cl // an error that ends a list
	}
	switch {
	case c == cValue || c == cVA:
		if l, ok := valueLen(line, c); ok {
			s.dataLeft = l
			return out
		}
	case p.watching:
	case s.list && c != cEnd && c != cError && c != cClientError && c != cServerError && c != cBusy &&
		(!first || c != cReset && c != cOK):
		return out // the list goes on
	}
	return p.response(s, out)
}

// data handles the end of a data block of s.
func (p *Parser) data(s *stream, isReq bool, out []l7.Exchange) []l7.Exchange {
	if isReq {
		return p.request(s, out)
	}
	if s.first == cVA && !s.list {
		return p.response(s, out)
	}
	return out // a VALUE's block: the list goes on to END
}

// metaOpaque finds the O flag of a meta response line.
func metaOpaque(line []byte, c rcode) (uint64, bool) {
	var c2 cmd
	skip := 1
	if c == cVA {
		skip = 2
	}
	c2.metaFlags(line, skip, mNone)
	return c2.opaque, c2.hasOpq
}

// request handles a complete request.
func (p *Parser) request(s *stream, out []l7.Exchange) []l7.Exchange {
	s.open = false
	c := &s.c
	if c.noreply || c.resp == rNone {
		return append(out, l7.Exchange{HasRequest: true, Start: s.ts, API: c.api, ReqBytes: int(s.size)})
	}
	e := pending{ts: s.ts, seq: s.seq, api: c.api, size: s.size, resp: c.resp, quiet: c.quiet, opaque: c.opaque, hasOpq: c.hasOpq}
	if n := len(p.q); n-p.qh >= maxPending || n > p.qh && p.q[n-1].kind == kOverflow {
		// Beyond maxPending: counted, not kept. Their responses still
		// pair in order, with the first one's start and their template
		// when they share it. Quiet meta commands lose their quiet.
		if t := &p.q[n-1]; t.kind == kOverflow {
			t.n++
			if t.api != e.api {
				t.api = ""
			}
			return out
		}
		p.desyncs++
		e = pending{kind: kOverflow, n: 1, ts: e.ts, seq: e.seq, api: e.api}
	}
	if p.qh > 0 && p.qh == len(p.q) {
		p.q, p.qh = p.q[:0], 0
	} else if p.qh >= 64 && p.qh*2 >= len(p.q) {
		n := copy(p.q, p.q[p.qh:])
		p.q, p.qh = p.q[:n], 0
	}
	p.q = append(p.q, e)
	return out
}

func (p *Parser) front() *pending {
	if p.qh < len(p.q) {
		return &p.q[p.qh]
	}
	return nil
}

func (p *Parser) pop() {
	p.qh++
	if p.qh == len(p.q) {
		p.q, p.qh = p.q[:0], 0
	}
}

// response pairs a complete response with the oldest request waiting.
func (p *Parser) response(s *stream, out []l7.Exchange) []l7.Exchange {
	s.open = false
	if p.watching {
		return out // a log line of "watch"
	}
	e := p.front()
	for e != nil {
		switch {
		case e.kind == kBarrier && p.qh+1 < len(p.q) && s.seq > p.q[p.qh+1].seq:
			// A response that began after the first request that
			// followed the gap answers that request.
		case e.kind == kRequest && e.quiet != mNone &&
			(!mayAnswer(e.quiet, s.first) || s.hasOpq && e.hasOpq && s.opaque != e.opaque):
			// A quiet meta command whose response was left out: it
			// succeeded (or, for mg, missed).
			out = append(out, l7.Exchange{HasRequest: true, Start: e.ts, API: e.api, ReqBytes: int(e.size)})
		default:
			goto resolved
		}
		p.pop()
		e = p.front()
	}
resolved:
	switch {
	case e == nil:
		p.desyncs++ // a response to no request seen: capture began mid-conversation
		return out
	case e.kind == kBarrier:
		if e.infer {
			out = append(out, l7.Exchange{HasRequest: true, HasResponse: true, Start: e.ts, End: s.ts, Class: s.class, RespBytes: int(s.size)})
		}
		return out
	case e.kind == kOverflow:
		out = append(out, l7.Exchange{HasRequest: true, HasResponse: true, Start: e.ts, End: s.ts, Class: s.class, API: e.api, RespBytes: int(s.size)})
		if e.n--; e.n == 0 {
			p.pop()
		}
		return out
	}
	out = append(out, l7.Exchange{
		HasRequest: true, HasResponse: true, Start: e.ts, End: s.ts,
		Class: s.class, API: e.api, ReqBytes: int(e.size), RespBytes: int(s.size),
	})
	if e.resp == rWatch && s.first == cOK {
		p.watching = true
	}
	p.pop()
	return out
}

// desync handles lost boundaries in s: the message in progress still
// counts, s waits for a chunk that starts a message, and a barrier keeps
// the responses to what the gap hid from being paired with later
// requests (see doc.go).
func (p *Parser) desync(s *stream, isReq bool, ts uint64, out []l7.Exchange) []l7.Exchange {
	p.desyncs++
	switch {
	case !s.open:
	case isReq && s.dataLeft > 0:
		out = p.request(s, out)
	case isReq && s.lineN > 0: // the command line was cut: read what there is
		s.c = parseCmd(s.line[:min(s.lineN, maxLine)], false)
		out = p.request(s, out)
	case !isReq && s.lines == 0 && s.lineN > 0:
		line := s.line[:min(s.lineN, maxLine)]
		s.first, s.class = code(line), ResponseClass(line)
		out = p.response(s, out)
	case !isReq && (s.lines > 0 || s.dataLeft > 0):
		out = p.response(s, out)
	}
	s.reset()
	s.lost = true
	if !isReq {
		p.q, p.qh = p.q[:0], 0 // their responses may be in the gap
	}
	if n := len(p.q); n == p.qh || p.q[n-1].kind != kBarrier {
		p.q = append(p.q, pending{kind: kBarrier, seq: p.seq, ts: ts, infer: isReq})
	}
	return out
}

// startsMessage reports whether a chunk after lost boundaries plausibly
// starts a message: a command or a response memcached sends.
func startsMessage(b []byte, isReq bool) bool {
	if isReq {
		var w [1][]byte
		n := words(trimEOL(b[:min(len(b), 32)]), w[:])
		return n > 0 && lookup(w[0]) != "" && len(b) > len(w[0]) && (b[len(w[0])] == ' ' || b[len(w[0])] == '\r' || b[len(w[0])] == '\n')
	}
	i := bytes.IndexByte(b[:min(len(b), 32)], '\n')
	if i < 0 {
		i = min(len(b), 32)
	}
	return code(b[:i]) != cOther
}

// Flush implements l7.Parser: the requests still waiting for a response
// (a response cut short by the close answers the oldest).
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	if s := &p.resp; s.open && (s.lines > 0 || s.lineN > 0) {
		if s.lines == 0 {
			line := s.line[:min(s.lineN, maxLine)]
			s.first, s.class = code(line), ResponseClass(line)
		}
		out = p.response(s, out)
	}
	for i := p.qh; i < len(p.q); i++ {
		e := &p.q[i]
		switch e.kind {
		case kOverflow:
			for range e.n {
				out = append(out, l7.Exchange{HasRequest: true, Start: e.ts, API: e.api})
			}
		case kRequest:
			out = append(out, l7.Exchange{HasRequest: true, Start: e.ts, API: e.api, ReqBytes: int(e.size)})
		}
	}
	p.q, p.qh = p.q[:0], 0
	p.req.reset()
	p.resp.reset()
	p.req.lost, p.resp.lost = false, false
	return out
}
