package http

import (
	"bytes"

	"github.com/galago-project/galago/internal/l7"
)

// Memory bounds, per connection.
const (
	// LineCap is how much of one line the parser keeps when the line spans
	// chunks (per direction); the rest of a longer line is skipped, which
	// only shortens a request target seen in the template.
	LineCap = 1024
	// MaxPending is how many requests may await their responses
	// (pipelining depth). Requests beyond it are counted in Desyncs and
	// their responses come out without a request.
	MaxPending = 128
	// internMax bounds a parser's own interner (SetInterner shares one).
	internMax = 64
	// lastReqCap bounds the request key whose template a parser
	// remembers: most request lines fit.
	lastReqCap = 256
)

type state uint8

const (
	stStart      state = iota // at a message boundary: a start line comes next
	stHeaders                 // in the header section
	stBody                    // in a body of declared length (remain bytes left)
	stChunkSize               // a chunk-size line comes next
	stChunkData               // in chunk data (remain bytes left)
	stChunkCRLF               // the CRLF closing chunk data comes next
	stTrailers                // in the trailer section after the last chunk
	stUntilClose              // in a close-delimited body
	stLost                    // boundaries lost: waiting for a chunk that starts a message
	stDone                    // the connection switched protocols
)

// Request flags.
const (
	fHead    uint8 = 1 << iota // a HEAD request: its response has no body
	fConnect                   // CONNECT: a 2xx response opens a tunnel
	fHole                      // stands for requests hidden in a gap
	fH2C                       // asks to upgrade to h2c
)

type pending struct {
	start uint64
	api   string
	path  *l7.Path // nil unless paths are kept
	bytes int
	seq   uint64
	flags uint8
}

// half is one direction's framing state.
type half struct {
	resp   bool // carries responses
	st     state
	remain int64 // bytes left in a body or chunk

	line     []byte // a line spanning chunks, at most LineCap bytes
	lineTS   uint64 // TS of the chunk the line began in
	lineLong bool   // the line outgrew LineCap: the rest is dropped

	// The message being parsed.
	msgBytes      int
	status        int
	contentLength int64  // -1: none
	badLength     bool   // an unparsable Content-Length
	te            bool   // Transfer-Encoding present
	chunked       bool   // ... and its last coding is chunked
	upgradeH2C    bool   // Upgrade: h2c
	detached      bool   // already accounted for; its remaining bytes are skipped
	lostChunked   bool   // lost inside a chunked body: a chunk-size line may continue it
	skippedTS     uint64 // TS of the last chunk skipped while lost (0: none)
}

// Upgrade says how the connection continues after HTTP/1: after a 101
// Switching Protocols response (WebSocket, h2c, ...) or a 2xx answer to
// CONNECT (a tunnel), the bytes are no longer HTTP/1.
type Upgrade struct {
	// Protocol is l7.HTTP2 for an h2c upgrade (the probe continues with
	// an http2 parser made by http2.NewUpgradedParser) and l7.Unknown
	// otherwise (WebSocket, a CONNECT tunnel, anything else).
	Protocol l7.Protocol
	// Dir and Offset locate the switch: in the last chunk fed (of
	// direction Dir, the response's), Data[Offset:] and the chunk's gap
	// already belong to the new protocol. Rest cuts that part out.
	Dir    l7.Direction
	Offset int
	// For h2c, the upgrade request, which HTTP/2 answers on stream 1:
	// its Start TS, API, size and (when paths are kept) path; no
	// exchange is emitted for it here.
	Start    uint64
	API      string
	ReqBytes int
	Path     *l7.Path
}

// Rest is the part of chunk c (the last one fed) after the switch.
func (u *Upgrade) Rest(c l7.Chunk) l7.Chunk {
	off := min(u.Offset, len(c.Data))
	c.Data = c.Data[off:]
	c.Size = max(c.Size-off, len(c.Data))
	return c
}

// Parser is an HTTP/1.x parser for one connection. It implements
// l7.Parser; see the package documentation for what it counts and its
// limits.
type Parser struct {
	role      l7.Role
	req, resp half

	// Requests awaiting responses, a ring: q[(qHead+i)%len(q)], i < qLen.
	// It starts in q1: one request in flight is the common case, and a
	// connection then costs no allocation beyond the parser.
	q        []pending
	q1       [1]pending
	qHead    int
	qLen     int
	nextSeq  uint64
	curSeq   uint64  // seq of the request being parsed
	overflow int     // requests beyond MaxPending, queued after q's
	hole     pending // what pop returns for one of those

	// The response being parsed: bytes of its interim and final
	// messages, TS of the final one's first chunk.
	respBytes int
	finalTS   uint64
	final     bool

	desyncs  uint64
	upgraded bool
	up       Upgrade

	in      *l7.Interner
	ownIn   l7.Interner
	scratch [MaxAPI + 64]byte
	paths   l7.PathPool

	// The last complete request's "METHOD SP target" and its template
	// (see api); lastReqN 0 is none.
	lastReq  [lastReqCap]byte
	lastReqN int
	lastAPI  string
}

// NewParser returns a parser for a connection on which the observed
// process has the given role (l7.Client or l7.Server; anything else is
// taken as a client).
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role}
	p.resp.resp = true
	p.ownIn.Max = internMax
	p.in = &p.ownIn
	p.reset()
	return p
}

// SetInterner makes the parser intern API templates in in (shared by the
// parsers of one goroutine) instead of its own small interner.
func (p *Parser) SetInterner(in *l7.Interner) {
	if in != nil {
		p.in = in
	}
}

// KeepPaths makes the parser keep each request's raw path (l7.Path) in
// its Exchange, for spans.
func (p *Parser) KeepPaths() { p.paths.Enable() }

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Upgrade reports whether the connection switched protocols, and how it
// continues. Once it has, Feed ignores further chunks.
func (p *Parser) Upgrade() (Upgrade, bool) { return p.up, p.upgraded }

func (p *Parser) reset() {
	for _, h := range []*half{&p.req, &p.resp} {
		h.st = stStart
		h.line = h.line[:0]
		h.lineLong = false
		h.lostChunked = false
		h.resetMsg()
	}
	p.respBytes, p.final = 0, false
}

func (h *half) resetMsg() {
	h.msgBytes = 0
	h.status = 0
	h.contentLength = -1
	h.badLength, h.te, h.chunked, h.upgradeH2C, h.detached = false, false, false, false, false
}

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	p.paths.Recycle()
	if p.upgraded || c.Dir != l7.Egress && c.Dir != l7.Ingress {
		return out
	}
	h := &p.resp
	if c.Dir == p.role.RequestDir() {
		h = &p.req
	}
	data := c.Data
	if h.st == stLost {
		var ok bool
		if ok, out = p.resync(h, data, out); !ok {
			h.skippedTS = c.TS
			return out // the whole chunk, gap included, is skipped
		}
	}
	off := 0
	for off < len(data) && !p.upgraded {
		switch h.st {
		case stBody, stChunkData:
			n := int(min(h.remain, int64(len(data)-off)))
			h.remain -= int64(n)
			h.msgBytes += n
			off += n
			if h.remain == 0 {
				out = p.bodyDone(h, c, off, out)
			}
		case stUntilClose:
			h.msgBytes += len(data) - off
			off = len(data)
		case stLost, stDone:
			off = len(data)
		default:
			if h.st == stHeaders && len(h.line) == 0 && !h.lineLong {
				// The common case: the header lines are whole in this
				// chunk. They are read in one tight loop; a line the
				// chunk cuts is left to the general path below.
				n, end := h.headerLines(data[off:])
				h.msgBytes += n
				off += n
				if end {
					out = p.headersEnd(h, c, off, out)
					break
				}
				if off == len(data) {
					break
				}
			}
			i := bytes.IndexByte(data[off:], '\n')
			if i < 0 {
				if h.st == stStart && !h.plausibleStart(data[off:]) {
					out = p.lose(h, out)
					break
				}
				h.keep(data[off:], c.TS)
				h.msgBytes += len(data) - off
				off = len(data)
				break
			}
			line, ts, long := data[off:off+i+1], c.TS, false
			if len(h.line) > 0 || h.lineLong {
				h.keep(line, c.TS)
				line, ts, long = h.line, h.lineTS, h.lineLong
			}
			h.msgBytes += i + 1
			off += i + 1
			out = p.line(h, trimEOL(line), ts, long, c, off, out)
			h.line, h.lineLong = h.line[:0], false
		}
	}
	if gap := c.Size - len(data); gap > 0 && !p.upgraded {
		out = p.gap(h, gap, c, out)
	}
	return out
}

// plausibleStart reports whether a start line that begins with h.line
// and continues with b (no line feed yet) may begin a message, so that
// garbage is dropped at once rather than buffered up to the next line
// feed. It looks at the line's prefix only, never at how it was cut into
// chunks, and accepts every prefix of a line the full parse accepts.
func (h *half) plausibleStart(b []byte) bool {
	var pre [12]byte // the line's first bytes, leading CR/LF skipped
	n := 0
	for _, part := range [2][]byte{h.line, b} {
		for _, c := range part {
			if n == 0 && (c == '\r' || c == '\n') {
				continue
			}
			if n == len(pre) {
				break
			}
			pre[n] = c
			n++
		}
	}
	if h.resp {
		return n == 0 || looksLikeResponse(pre[:n])
	}
	// METHOD (1 to 32 token bytes) SP target: walk both parts.
	method, sp := 0, false
	for _, part := range [2][]byte{h.line, b} {
		for _, c := range part {
			switch {
			case method == 0 && !sp && (c == '\r' || c == '\n'):
			case sp:
				return targetStart(c)
			case c == ' ':
				if method == 0 {
					return false
				}
				sp = true
			case isTchar(c) && method < 32:
				method++
			default:
				return false
			}
		}
	}
	return true
}

// targetStart: a request target starts with a visible byte (raw UTF-8
// included, which some clients send).
func targetStart(b byte) bool { return b > ' ' && b != 0x7f }

// keep buffers the part of a line a chunk holds, up to LineCap bytes.
func (h *half) keep(b []byte, ts uint64) {
	if len(h.line) == 0 && !h.lineLong {
		h.lineTS = ts
	}
	if room := LineCap - len(h.line); len(b) > room {
		b = b[:room]
		h.lineLong = true
	}
	if h.line == nil {
		h.line = make([]byte, 0, 128)
	}
	h.line = append(h.line, b...)
}

func trimEOL(l []byte) []byte {
	if n := len(l); n > 0 && l[n-1] == '\n' {
		l = l[:n-1]
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l
}

// line handles one line of a line-oriented state. long says it was cut at
// LineCap (or by a gap); off is where the chunk's data continues.
func (p *Parser) line(h *half, l []byte, ts uint64, long bool, c l7.Chunk, off int, out []l7.Exchange) []l7.Exchange {
	switch h.st {
	case stStart:
		if len(l) == 0 {
			return out // empty lines may precede a start line
		}
		if h.resp {
			return p.statusLine(h, l, ts, out)
		}
		return p.requestLine(h, l, ts, long, out)
	case stHeaders:
		if len(l) == 0 {
			return p.headersEnd(h, c, off, out)
		}
		h.header(l)
	case stChunkSize:
		n, ok := parseChunkSize(l)
		if !ok {
			return p.lose(h, out)
		}
		if n == 0 {
			h.st = stTrailers
		} else {
			h.st, h.remain = stChunkData, n
		}
	case stChunkCRLF:
		if len(l) != 0 {
			return p.lose(h, out)
		}
		h.st = stChunkSize
	case stTrailers:
		if len(l) == 0 {
			return p.msgDone(h, c, off, out)
		}
	}
	return out
}

func (p *Parser) requestLine(h *half, l []byte, ts uint64, long bool, out []l7.Exchange) []l7.Exchange {
	method, target, partial, ok := splitRequestLine(l, long)
	if !ok {
		return p.lose(h, out)
	}
	n := h.msgBytes // the start line's bytes, counted as they came
	h.resetMsg()
	h.msgBytes = n
	var flags uint8
	switch string(method) {
	case "HEAD":
		flags = fHead
	case "CONNECT":
		flags = fConnect
	}
	api := p.api(l[:len(method)+1+len(target)], method, target, partial)
	p.curSeq = p.push(pending{start: ts, api: api, flags: flags, path: KeepPath(&p.paths, method, target, partial)})
	h.st = stHeaders
	return out
}

// api returns the template of a request whose line begins with reqKey
// ("METHOD SP target"). Clients often send the same request again and
// again on a connection (polls, health checks, load generators): the last
// request's template is kept with its key, and comparing the key costs
// far less than templating and interning.
func (p *Parser) api(reqKey, method, target []byte, partial bool) string {
	if partial {
		return p.in.Intern(appendAPI(p.scratch[:0], method, target, true))
	}
	if p.lastReqN > 0 && string(reqKey) == string(p.lastReq[:p.lastReqN]) {
		return p.lastAPI
	}
	api := p.in.Intern(appendAPI(p.scratch[:0], method, target, false))
	if len(reqKey) <= len(p.lastReq) {
		p.lastReqN = copy(p.lastReq[:], reqKey)
		p.lastAPI = api
	}
	return api
}

// splitRequestLine splits "METHOD SP target SP HTTP/1.x". A line cut short
// (long) may lack the version; the target is then partial unless its end
// was seen.
func splitRequestLine(l []byte, long bool) (method, target []byte, partial, ok bool) {
	sp := bytes.IndexByte(l, ' ')
	if sp < 1 || sp > 32 {
		return nil, nil, false, false
	}
	method = l[:sp]
	for _, b := range method {
		if !isTchar(b) {
			return nil, nil, false, false
		}
	}
	rest := l[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		if !long || len(rest) == 0 || !targetStart(rest[0]) {
			return nil, nil, false, false
		}
		return method, rest, true, true
	}
	target, version := rest[:sp], rest[sp+1:]
	if len(target) == 0 || !targetStart(target[0]) {
		return nil, nil, false, false
	}
	if long && len(version) < 8 {
		// The version was cut: what is there must begin "HTTP/1.".
		const v = "HTTP/1."
		return method, target, false, string(version) == v[:min(len(version), len(v))]
	}
	if len(version) != 8 || string(version[:7]) != "HTTP/1." || version[7] < '0' || version[7] > '9' {
		return nil, nil, false, false
	}
	return method, target, false, true
}

// isTchar is RFC 9110's token character.
func isTchar(b byte) bool {
	if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' {
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func (p *Parser) statusLine(h *half, l []byte, ts uint64, out []l7.Exchange) []l7.Exchange {
	status, _, ok := ParseStatusLine(l)
	if !ok {
		return p.lose(h, out)
	}
	n := h.msgBytes
	h.resetMsg()
	h.msgBytes, h.status = n, status
	if status >= 200 || status == 101 {
		p.final, p.finalTS = true, ts
	}
	h.st = stHeaders
	return out
}

// headerLines reads the complete header lines at the start of b, up to
// and including the empty line that ends the section, without the
// per-line dispatch of Feed's loop. It returns the bytes it consumed and
// whether the section ended; it stops before a line that b cuts.
func (h *half) headerLines(b []byte) (n int, end bool) {
	for {
		i := bytes.IndexByte(b[n:], '\n')
		if i < 0 {
			return n, false
		}
		l := trimEOL(b[n : n+i+1])
		n += i + 1
		if len(l) == 0 {
			return n, true
		}
		h.header(l)
	}
}

// header notes the header fields that frame the message.
func (h *half) header(l []byte) {
	// Only Content-Length, Transfer-Encoding and Upgrade matter. A field's
	// name ends at its first colon, and none of these names holds one: a
	// line is one of them when its colon is where that name would end it
	// and the bytes before match, so the colon need not be searched for.
	// Most fields are rejected by their first letter alone.
	if len(l) < len("upgrade:") {
		return
	}
	switch l[0] | 0x20 {
	case 'c':
		if len(l) > 14 && l[14] == ':' && equalFold(l[:14], "content-length") {
			n, ok := parseDecimal(trimSpace(l[15:]))
			if !ok || h.contentLength >= 0 && n != h.contentLength {
				h.badLength = true
			}
			h.contentLength = n
		}
	case 't':
		if len(l) > 17 && l[17] == ':' && equalFold(l[:17], "transfer-encoding") {
			h.te = true
			value := trimSpace(l[18:])
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = trimSpace(value[i+1:])
			}
			h.chunked = equalFold(last, "chunked")
		}
	case 'u':
		if l[7] == ':' && equalFold(l[:7], "upgrade") {
			value := trimSpace(l[8:])
			h.upgradeH2C = len(value) >= 3 && equalFold(value[:3], "h2c") && (len(value) == 3 || value[3] == ',' || value[3] == ' ')
		}
	}
}

// headersEnd decides how the message's body is framed.
func (p *Parser) headersEnd(h *half, c l7.Chunk, off int, out []l7.Exchange) []l7.Exchange {
	if !h.resp {
		if e := p.bySeq(p.curSeq); e != nil && h.upgradeH2C {
			e.flags |= fH2C
		}
		switch {
		case h.chunked:
			h.st = stChunkSize
		case h.te || h.badLength:
			// A request body of unknown length cannot be stepped over.
			return p.lose(h, out)
		case h.contentLength > 0:
			h.st, h.remain = stBody, h.contentLength
		default:
			return p.msgDone(h, c, off, out)
		}
		return out
	}
	var flags uint8
	if e := p.head(); e != nil {
		flags = e.flags
	}
	switch s := h.status; {
	case s < 200 && s != 101:
		return p.msgDone(h, c, off, out) // interim
	case p.switches(h):
		return p.switchProtocols(h, c, off, out)
	case flags&fHead != 0 || s == 204 || s == 304:
		return p.msgDone(h, c, off, out)
	case h.chunked:
		h.st = stChunkSize
	case h.te || h.badLength || h.contentLength < 0:
		h.st = stUntilClose
	case h.contentLength == 0:
		return p.msgDone(h, c, off, out)
	default:
		h.st, h.remain = stBody, h.contentLength
	}
	return out
}

// switches reports whether the final response h is parsing ends HTTP/1
// on the connection: a 101, or a 2xx to CONNECT.
func (p *Parser) switches(h *half) bool {
	if h.status == 101 {
		return true
	}
	e := p.head()
	return e != nil && e.flags&fConnect != 0 && h.status >= 200 && h.status < 300
}

func (p *Parser) bodyDone(h *half, c l7.Chunk, off int, out []l7.Exchange) []l7.Exchange {
	if h.st == stChunkData {
		h.st = stChunkCRLF
		return out
	}
	return p.msgDone(h, c, off, out)
}

// msgDone ends the message h was parsing.
func (p *Parser) msgDone(h *half, c l7.Chunk, off int, out []l7.Exchange) []l7.Exchange {
	h.st = stStart
	if !h.resp {
		if e := p.bySeq(p.curSeq); e != nil && !h.detached {
			e.bytes = h.msgBytes
		}
		h.resetMsg()
		return out
	}
	if h.detached {
		h.resetMsg()
		return out
	}
	p.respBytes += h.msgBytes
	if h.status < 200 && h.status != 101 {
		h.resetMsg() // interim: the final response is still to come
		return out
	}
	out = p.emit(h, out)
	h.resetMsg()
	return out
}

// emit pairs the final response just parsed with the oldest request.
func (p *Parser) emit(h *half, out []l7.Exchange) []l7.Exchange {
	x := l7.Exchange{HasResponse: true, End: p.finalTS, Class: StatusClass(h.status), Status: uint16(h.status), RespBytes: p.respBytes}
	if e := p.pop(); e != nil && e.flags&fHole == 0 {
		x.HasRequest, x.Start, x.API, x.ReqBytes, x.Path = true, e.start, e.api, e.bytes, p.paths.Emit(e.path)
	}
	p.respBytes, p.final = 0, false
	return append(out, x)
}

// switchProtocols ends HTTP/1 on this connection after a 101 or a CONNECT
// tunnel's 2xx.
func (p *Parser) switchProtocols(h *half, c l7.Chunk, off int, out []l7.Exchange) []l7.Exchange {
	var flags uint8
	if e := p.head(); e != nil {
		flags = e.flags
	}
	p.upgraded = true
	p.up = Upgrade{Protocol: l7.Unknown, Dir: c.Dir, Offset: off}
	if h.status == 101 && (h.upgradeH2C || flags&fH2C != 0) {
		// HTTP/2 answers the upgrade request on stream 1.
		p.up.Protocol = l7.HTTP2
		if e := p.pop(); e != nil && e.flags&fHole == 0 {
			p.up.Start, p.up.API, p.up.ReqBytes, p.up.Path = e.start, e.api, e.bytes, e.path
		}
		p.respBytes, p.final = 0, false
	} else {
		p.respBytes += h.msgBytes
		out = p.emit(h, out)
	}
	p.req.st, p.resp.st = stDone, stDone
	return out
}

// lose gives up on the message boundaries of h (bytes that do not parse):
// the rest of the chunk is skipped, and parsing resumes at a later chunk
// that starts a message.
func (p *Parser) lose(h *half, out []l7.Exchange) []l7.Exchange {
	p.desyncs++
	if h.resp {
		if p.final && !h.detached {
			// The status was seen: the exchange is known, its size is not.
			p.respBytes += h.msgBytes
			out = p.emit(h, out)
		}
		p.respBytes, p.final = 0, false
		out = p.abandon(^uint64(0), out)
	}
	if !h.resp && h.st != stStart {
		if e := p.bySeq(p.curSeq); e != nil {
			e.bytes = h.msgBytes // as far as it could be followed
		}
	}
	h.st = stLost
	h.lostChunked = false
	h.line, h.lineLong = h.line[:0], false
	h.resetMsg()
	return out
}

// resync is called on a chunk while h is lost: it reports whether the
// chunk starts a message (or continues a chunked body lost at a gap) and
// parsing resumes with it. Responses may have been in the chunks skipped
// meanwhile: the requests sent before the last of them come out without
// a response rather than be paired with later responses.
func (p *Parser) resync(h *half, data []byte, out []l7.Exchange) (bool, []l7.Exchange) {
	switch {
	case h.resp && looksLikeResponse(data) || !h.resp && looksLikeRequest(data):
		h.st, h.lostChunked = stStart, false
		h.resetMsg()
	case h.lostChunked && looksLikeChunkSize(data):
		h.st = stChunkSize
		if data[0] == '\r' || data[0] == '\n' {
			h.st = stChunkCRLF
		}
		h.detached = true // accounted for when the gap was met
		h.lostChunked = false
	default:
		return false, out
	}
	if h.resp && h.skippedTS != 0 {
		out = p.abandon(h.skippedTS, out)
	}
	h.skippedTS = 0
	return true, out
}

// abandon ends the pairing of the requests sent at or before ts: after a
// response-side desync, responses to them may have been lost, and pairing
// them with later responses would shift every exchange after. They come
// out without a response; a late response of theirs comes out alone.
func (p *Parser) abandon(ts uint64, out []l7.Exchange) []l7.Exchange {
	for p.qLen > 0 && p.q[p.qHead].start <= ts {
		e := p.pop()
		if e.flags&fHole == 0 {
			out = append(out, l7.Exchange{HasRequest: true, Start: e.start, API: e.api, ReqBytes: e.bytes, Path: p.paths.Emit(e.path)})
		}
	}
	return out
}

// gap steps over n bytes the capture did not copy.
func (p *Parser) gap(h *half, n int, c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	off := len(c.Data)
	switch h.st {
	case stUntilClose:
		h.msgBytes += n
		return out
	case stLost, stDone:
		return out
	case stBody, stChunkData:
		if int64(n) <= h.remain {
			h.remain -= int64(n)
			h.msgBytes += n
			if h.remain == 0 {
				out = p.bodyDone(h, c, off, out)
			}
			return out
		}
		// The body ends inside the gap; more is hidden after it.
		n -= int(h.remain)
		h.msgBytes += int(h.remain)
		h.remain = 0
		if h.st == stChunkData {
			return p.softEnd(h, n, c, out)
		}
		out = p.msgDone(h, c, off, out)
		return p.hidden(h, out)
	case stStart:
		if len(h.line) == 0 && !h.lineLong {
			return p.hidden(h, out)
		}
		// A start line cut by the gap: take what it shows.
		l, ts := h.line, h.lineTS
		h.line, h.lineLong = h.line[:0], false
		if h.resp {
			if _, _, ok := ParseStatusLine(l); !ok {
				return p.hidden(h, out)
			}
			out = p.statusLine(h, l, ts, out)
		} else {
			out = p.requestLine(h, l, ts, true, out)
			if h.st == stLost {
				return out
			}
		}
		return p.softEnd(h, n, c, out)
	}
	// stHeaders, stChunkSize, stChunkCRLF, stTrailers: the message's end
	// is hidden.
	return p.softEnd(h, n, c, out)
}

// softEnd handles a gap that hides where the current message ends: the
// message is taken to end with the chunk (programs write a message with
// one call more often than not), and parsing resumes at the next chunk
// that starts a message or, inside a chunked body, a chunk.
//
// A chunked body whose later chunk-size lines the capture did not copy
// (a long body written in large writes) is the common case: its message
// was seen and is counted, and parsing resumes with the next message, so
// it is not a desync unless requests in flight lose their responses.
func (p *Parser) softEnd(h *half, n int, c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	chunked := h.chunked && (h.st == stChunkSize || h.st == stChunkData || h.st == stChunkCRLF)
	h.msgBytes += n
	h.line, h.lineLong = h.line[:0], false
	detached := h.detached
	if h.resp && p.final && !detached && h.st == stHeaders && p.switches(h) {
		p.desyncs++
		return p.switchProtocols(h, c, len(c.Data), out)
	}
	counted := false
	if h.resp && !p.final {
		// Only an interim response (or none) was seen.
		p.respBytes = 0
		h.resetMsg()
	} else if !detached {
		out = p.msgDone(h, c, len(c.Data), out)
		counted = true
	}
	abandoned := false
	if h.resp {
		before := len(out)
		out = p.abandon(^uint64(0), out)
		abandoned = len(out) > before
	}
	if !chunked || !counted || abandoned {
		p.desyncs++
	}
	h.resetMsg()
	h.st = stLost
	h.lostChunked = chunked
	return out
}

// hidden handles a gap right at a message boundary: at least one whole
// message start is hidden in it. A hidden request is queued as a hole, so
// that its response is not paired with a later request; hidden responses
// answer requests in flight, which come out without their responses.
func (p *Parser) hidden(h *half, out []l7.Exchange) []l7.Exchange {
	p.desyncs++
	h.line, h.lineLong = h.line[:0], false
	h.resetMsg()
	h.st = stLost
	h.lostChunked = false
	if !h.resp {
		p.push(pending{flags: fHole})
		return out
	}
	p.respBytes, p.final = 0, false
	return p.abandon(^uint64(0), out)
}

// Flush implements l7.Parser: a response running to the connection's end
// (or cut by it) completes, and requests without a response come out.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	p.paths.Recycle()
	h := &p.resp
	if !p.upgraded && p.final && !h.detached && h.st != stLost && h.st != stStart {
		p.respBytes += h.msgBytes
		out = p.emit(h, out)
	}
	for {
		e := p.pop()
		if e == nil {
			break
		}
		if e.flags&fHole == 0 {
			out = append(out, l7.Exchange{HasRequest: true, Start: e.start, API: e.api, ReqBytes: e.bytes, Path: p.paths.Emit(e.path)})
		}
	}
	p.overflow = 0
	if !p.upgraded {
		p.reset()
	}
	return out
}

// push queues a request and returns its sequence number.
func (p *Parser) push(e pending) uint64 {
	e.seq = p.nextSeq
	p.nextSeq++
	if p.overflow > 0 || p.qLen == MaxPending {
		// Keep order: once one request is over the limit, later ones are
		// too, until the responses drain them.
		p.overflow++
		p.desyncs++
		return e.seq
	}
	if len(p.q) == 0 {
		p.q = p.q1[:]
	}
	if p.qLen == len(p.q) {
		n := min(max(2*len(p.q), 4), MaxPending)
		q := make([]pending, n)
		for i := 0; i < p.qLen; i++ {
			q[i] = p.q[p.slot(i)]
		}
		p.q, p.qHead = q, 0
	}
	p.q[p.slot(p.qLen)] = e
	p.qLen++
	return e.seq
}

// pop takes the oldest request, nil when none is waiting; a response to
// a request over the limit gets a hole (no request). The entry is read in
// place, not copied out (a copy of the struct costs more than the rest of
// the pop): it stays in its slot, valid until a push reuses the slot.
func (p *Parser) pop() *pending {
	if p.qLen == 0 {
		if p.overflow > 0 {
			p.overflow--
			p.hole = pending{flags: fHole}
			return &p.hole
		}
		return nil
	}
	e := &p.q[p.qHead]
	p.qHead = p.slot(1)
	p.qLen--
	if e.seq == p.curSeq && p.req.st != stStart && p.req.st != stLost && e.flags&fHole == 0 {
		e.bytes = p.req.msgBytes // answered before the request ended
	}
	return e
}

// slot is the index in q of the i-th request queued (i <= len(q)): a
// compare instead of a modulo, whose division costs more than the rest of
// a push or pop.
func (p *Parser) slot(i int) int {
	if j := p.qHead + i; j < len(p.q) {
		return j
	}
	return p.qHead + i - len(p.q)
}

func (p *Parser) head() *pending {
	if p.qLen == 0 {
		return nil
	}
	return &p.q[p.qHead]
}

func (p *Parser) bySeq(seq uint64) *pending {
	if p.qLen == 0 {
		return nil
	}
	first := p.q[p.qHead].seq
	if seq < first || seq-first >= uint64(p.qLen) {
		return nil
	}
	e := &p.q[p.slot(int(seq-first))]
	if e.seq != seq {
		return nil
	}
	return e
}

func parseChunkSize(l []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(l) && isHex(l[i]); i++ {
		if i >= 15 {
			return 0, false
		}
		n = n<<4 | int64(unhex(l[i]))
	}
	if i == 0 {
		return 0, false
	}
	rest := trimSpace(l[i:])
	if len(rest) > 0 && rest[0] != ';' {
		return 0, false
	}
	return n, true
}

// looksLikeChunkSize: a chunk that starts with a chunk-size line (or the
// CRLF closing the previous chunk's data, then one).
func looksLikeChunkSize(b []byte) bool {
	if len(b) >= 2 && b[0] == '\r' && b[1] == '\n' {
		b = b[2:]
	}
	i := 0
	for i < len(b) && i < 16 && isHex(b[i]) {
		i++
	}
	return i > 0 && (i == len(b) || b[i] == '\r' || b[i] == ';' || b[i] == '\n' || b[i] == ' ')
}

func unhex(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return -1, false
	}
	var n int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return -1, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares b with lower-case ASCII s, ignoring b's case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func isHex(b byte) bool { return byteClass[b]&cHex != 0 }
