package http2

import (
	"golang.org/x/net/http2/hpack"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/http"
)

// MaxStreams is how many streams a parser tracks at once. A new request
// beyond it evicts the oldest stream (it comes out as it stands, and is
// counted in Desyncs).
const MaxStreams = 128

// pathCap is how much of :path a header block capture keeps (gRPC
// methods and templates are far shorter; a longer path is templated as
// seen in part).
const pathCap = 256

// internMax bounds a parser's own interner (SetInterner shares one).
const internMax = 64

// Frame types and flags (RFC 9113 section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingMaxFrameSize = 0x5
	defaultMaxFrame     = 16384
)

// unknownReset is a RST_STREAM code hidden in a gap.
const unknownReset int64 = -1

// How a stream ended.
const (
	endStream = iota // the server's END_STREAM
	endReset         // RST_STREAM (code, and who sent it)
	endGoAway        // above a GOAWAY's last stream: not processed
	endClose         // the connection closed first (Flush)
	endLost          // the server's frames lost their boundaries: its end may be hidden
	endEvict         // too many streams: the oldest makes room
)

type ending struct {
	kind     uint8
	rst      int64  // endReset: the code, or unknownReset
	byClient bool   // endReset: the client sent it
	ts       uint64 // endReset: the RST_STREAM's TS
}

type dirState uint8

const (
	dsStart   dirState = iota // nothing seen yet
	dsPreface                 // matching the client preface
	dsHeader                  // reading a frame header
	dsPayload                 // in a frame's payload
	dsLost                    // boundaries lost: waiting for a chunk that starts with a frame
)

// Header block kinds.
const (
	blockRequest  = iota // the client's HEADERS
	blockResponse        // the server's HEADERS
	blockPush            // PUSH_PROMISE: decoded for the table only
)

// dir is one direction's framing and HPACK state.
type dir struct {
	p      *Parser
	client bool
	st     dirState
	pre    int // preface bytes matched

	hdr     [9]byte
	hdrN    int
	frameTS uint64 // TS of the chunk the frame began in
	typ     uint8
	flags   uint8
	stream  uint32
	length  int // payload length
	left    int // payload bytes left

	// HEADERS, PUSH_PROMISE, CONTINUATION payloads: prefix (pad length,
	// priority, promised stream), block fragment, padding.
	prefixLeft int
	padLen     int
	blockLeft  int

	small  [8]byte // a small frame's payload (RST_STREAM, GOAWAY, SETTINGS entry)
	smallN int

	inBlock     bool // a header block is open (until END_HEADERS)
	blockKind   uint8
	blockStream uint32
	blockTS     uint64
	blockBytes  int
	blockEnd    bool // its HEADERS frame had END_STREAM
	blockBroken bool // bytes of it were lost: the rest is skipped
	blk         fields

	hp       hpackDir
	maxFrame uint32 // the largest frame the receiver accepts (for resync checks)
}

// fields are what a header block told.
type fields struct {
	method     [16]byte
	methodN    int // -1: longer than the buffer
	path       [pathCap]byte
	pathN      int
	pathLong   bool
	status     int
	grpcStatus int  // -1: absent
	grpcCT     bool // content-type application/grpc...
	ctSeen     bool // content-type was decoded
	unknown    bool // a field could not be decoded
}

func (f *fields) reset() {
	f.methodN, f.pathN, f.pathLong, f.status, f.grpcStatus = 0, 0, false, 0, -1
	f.grpcCT, f.ctSeen, f.unknown = false, false, false
}

// stream is a tracked stream: a request and its response.
type stream struct {
	id          uint32
	hasReq      bool
	respStarted bool // the final response's HEADERS came
	grpc        bool
	maybeGRPC   bool // gRPC or not is unknown (request fields not decoded)
	undecoded   bool // its API or outcome could not be decoded
	start, end  uint64
	api         string
	apiGRPC     string   // maybeGRPC: the API if it proves to be gRPC
	path        *l7.Path // nil unless paths are kept
	reqBytes    int
	respBytes   int
	status      int
	grpcStatus  int // -1: not seen
}

// Parser is an HTTP/2 (and gRPC) parser for one connection. It implements
// l7.Parser; see the package documentation for what it counts and its
// limits.
type Parser struct {
	role       l7.Role
	c, s       dir // the client's frames, the server's
	streams    []stream
	lastClient uint32 // highest client stream id seen
	desyncs    uint64
	undecoded  uint64
	out        []l7.Exchange // during Feed
	in         *l7.Interner
	ownIn      l7.Interner
	scratch    [http.MaxAPI + 64]byte
	paths      l7.PathPool
}

// NewParser returns a parser for a connection on which the observed
// process has the given role (l7.Client or l7.Server; anything else is
// taken as a client), seen from its start (the client preface) or from
// anywhere after.
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role}
	p.init(&p.c, true)
	p.init(&p.s, false)
	p.ownIn.Max = internMax
	p.in = &p.ownIn
	return p
}

// NewUpgradedParser returns a parser for a connection that switched from
// HTTP/1.1 to h2c (see http.Upgrade): stream 1 is the upgrade request,
// with the given Start TS, API and size, and HTTP/2 answers it. Feed it
// the rest of the chunk the switch happened in, then every later chunk.
func NewUpgradedParser(role l7.Role, start uint64, api string, reqBytes int) *Parser {
	p := NewParser(role)
	p.s.st = dsHeader // the server's HTTP/2 begins right after its 101
	p.streams = append(p.streams, stream{id: 1, hasReq: true, start: start, api: api, reqBytes: reqBytes, grpcStatus: -1})
	p.lastClient = 1
	return p
}

func (p *Parser) init(d *dir, client bool) {
	d.p, d.client = p, client
	d.maxFrame = defaultMaxFrame
	d.hp.init(d.onField)
	d.blk.reset()
}

// SetInterner makes the parser intern API templates in in (shared by the
// parsers of one goroutine) instead of its own small interner.
func (p *Parser) SetInterner(in *l7.Interner) {
	if in != nil {
		p.in = in
	}
}

// KeepPaths makes the parser keep each request's raw path (l7.Path, from
// :path) in its Exchange, for spans.
func (p *Parser) KeepPaths() { p.paths.Enable() }

// SetUpgradePath gives stream 1 of a parser made by NewUpgradedParser its
// path (http.Upgrade's Path), when the parser keeps paths.
func (p *Parser) SetUpgradePath(path *l7.Path) {
	if s := p.find(1); s != nil && p.paths.Enabled() {
		s.path = path
	}
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Undecoded counts the exchanges whose API or outcome could not be
// decoded: header fields referring to HPACK table entries added before the
// capture began or lost in a gap, or too long to decode. Their API is ""
// and an outcome that could not be read is taken as OK.
func (p *Parser) Undecoded() uint64 { return p.undecoded }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	if c.Dir != l7.Egress && c.Dir != l7.Ingress {
		return out
	}
	p.paths.Recycle()
	d := &p.s
	if c.Dir == p.role.RequestDir() {
		d = &p.c
	}
	p.out = out
	data := c.Data
	if d.st == dsLost {
		if !plausibleFrame(data, d.maxFrame) {
			return p.flushOut()
		}
		d.st = dsHeader
	}
	for len(data) > 0 && d.st != dsLost {
		switch d.st {
		case dsStart:
			// The client preface, or (the capture began after it) a
			// plausible first frame header, however the bytes are cut.
			if d.client && d.hdrN == 0 {
				if n := min(len(data), len(Preface)); string(data[:n]) == Preface[:n] {
					d.st = dsPreface
					break
				}
			}
			if d.hdrN == 0 {
				d.frameTS = c.TS
			}
			n := copy(d.hdr[d.hdrN:], data)
			d.hdrN += n
			data = data[n:]
			if d.hdrN == 9 {
				d.hdrN = 0
				if !plausibleFrame(d.hdr[:], 1<<24-1) {
					d.lose()
					break
				}
				d.beginFrame()
			}
		case dsPreface:
			n := min(len(data), len(Preface)-d.pre)
			if string(data[:n]) != Preface[d.pre:d.pre+n] {
				// Not the preface after all: the bytes taken for it
				// are read again as dsStart reads them when they come
				// in one chunk with these (a frame header's start), so
				// the outcome does not depend on where reads cut the
				// stream. Rare: the replay's copy is the only one.
				data = append([]byte(Preface[:d.pre]), data...)
				d.pre = 0
				d.st = dsStart
				break
			}
			d.pre += n
			data = data[n:]
			if d.pre == len(Preface) {
				d.st = dsHeader
			}
		case dsHeader:
			if d.hdrN == 0 {
				d.frameTS = c.TS
			}
			n := copy(d.hdr[d.hdrN:], data)
			d.hdrN += n
			data = data[n:]
			if d.hdrN == 9 {
				d.hdrN = 0
				d.beginFrame()
			}
		case dsPayload:
			n := min(len(data), d.left)
			d.payload(data[:n])
			data = data[n:]
			d.left -= n
			if d.left == 0 && d.st == dsPayload {
				d.endFrame()
			}
		}
	}
	if gap := c.Size - len(c.Data); gap > 0 && d.st != dsLost {
		d.gap(gap)
	}
	return p.flushOut()
}

func (p *Parser) flushOut() []l7.Exchange {
	out := p.out
	p.out = nil
	return out
}

// lose gives up on the direction's frame boundaries: the rest of the chunk
// is skipped, parsing resumes at a later chunk that starts with a
// plausible frame, and the HPACK table is cleared (lost frames may have
// added entries).
func (d *dir) lose() {
	d.p.desyncs++
	d.st = dsLost
	d.hdrN = 0
	if d.inBlock {
		d.endBlock(true)
	}
	d.hp.clear()
	if !d.client {
		d.p.serverLost()
	}
}

// gap steps over n bytes the capture did not copy: the rest of the
// current frame's payload, by its declared length; past the frame's end
// the next frame header is hidden and the boundaries are lost.
func (d *dir) gap(n int) {
	if d.st == dsPayload {
		k := min(n, d.left)
		if d.inBlock && (d.typ == frameHeaders || d.typ == frameContinuation || d.typ == framePushPromise) {
			// Block bytes are hidden: the rest of the block cannot be
			// decoded, and what was hidden may have added table entries.
			d.breakBlock()
		}
		d.skipPayload(k)
		d.left -= k
		n -= k
		if d.left == 0 {
			d.endFrame()
		}
	}
	if n > 0 && d.st != dsLost {
		d.lose()
	}
}

// breakBlock marks the open header block as broken and clears the table.
func (d *dir) breakBlock() {
	if !d.blockBroken {
		d.blockBroken = true
		d.blk.unknown = true
		d.hp.clear()
	}
}

// beginFrame handles a frame header.
func (d *dir) beginFrame() {
	h := d.hdr
	length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	d.typ, d.flags = h[3], h[4]
	d.stream = uint32(h[5]&0x7f)<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8])
	d.length, d.left, d.smallN = length, length, 0
	if !validFrame(d.typ, d.flags, d.stream, length) || d.inBlock != (d.typ == frameContinuation) || d.inBlock && d.stream != d.blockStream {
		d.lose()
		return
	}
	d.st = dsPayload
	switch d.typ {
	case frameHeaders, framePushPromise:
		d.prefixLeft, d.padLen = 0, 0
		if d.flags&flagPadded != 0 {
			d.prefixLeft++
		}
		if d.typ == frameHeaders && d.flags&flagPriority != 0 {
			d.prefixLeft += 5
		}
		if d.typ == framePushPromise {
			d.prefixLeft += 4
		}
		d.blockLeft = length - d.prefixLeft
		if d.blockLeft < 0 {
			d.lose()
			return
		}
		d.openBlock()
	case frameContinuation:
		d.prefixLeft, d.padLen, d.blockLeft = 0, 0, length
	}
	if length == 0 {
		d.endFrame()
	}
}

// validFrame checks what RFC 9113 fixes of a frame header: stream 0 or not
// by type, fixed payload lengths, a padded frame's room for its pad
// length. Unknown types are valid (they are skipped).
func validFrame(typ, flags uint8, stream uint32, length int) bool {
	switch typ {
	case frameData, frameHeaders, framePriority, frameRSTStream, framePushPromise, frameContinuation:
		if stream == 0 {
			return false
		}
	case frameSettings, framePing, frameGoAway:
		if stream != 0 {
			return false
		}
	}
	switch typ {
	case framePriority:
		return length == 5
	case frameRSTStream, frameWindowUpdate:
		return length == 4
	case framePing:
		return length == 8
	case frameSettings:
		return length%6 == 0 && (flags&flagAck == 0 || length == 0)
	case frameGoAway:
		return length >= 8
	case frameData, frameHeaders, framePushPromise:
		return flags&flagPadded == 0 || length >= 1
	}
	return true
}

// allowedFlags are the flags each frame type defines.
var allowedFlags = [10]uint8{
	frameData:         flagEndStream | flagPadded,
	frameHeaders:      flagEndStream | flagEndHeaders | flagPadded | flagPriority,
	framePriority:     0,
	frameRSTStream:    0,
	frameSettings:     flagAck,
	framePushPromise:  flagEndHeaders | flagPadded,
	framePing:         flagAck,
	frameGoAway:       0,
	frameWindowUpdate: 0,
	frameContinuation: flagEndHeaders,
}

// plausibleFrame reports whether b starts with a frame header a sender
// could have written, strictly enough that bytes from inside a frame
// rarely pass: a known type with only its defined flags, the reserved bit
// clear, stream 0 or not as the type requires, its fixed length, and a
// length the receiver accepts.
func plausibleFrame(b []byte, maxLen uint32) bool {
	if len(b) < 9 || b[3] > frameContinuation || b[5]&0x80 != 0 {
		return false
	}
	length := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
	stream := uint32(b[5])<<24 | uint32(b[6])<<16 | uint32(b[7])<<8 | uint32(b[8])
	return b[4]&^allowedFlags[b[3]] == 0 && uint32(length) <= maxLen && validFrame(b[3], b[4], stream, length) &&
		b[3] != frameContinuation // a continuation cannot start a resync: its block began unseen
}

// payload handles payload bytes of the current frame.
func (d *dir) payload(b []byte) {
	switch d.typ {
	case frameHeaders, framePushPromise, frameContinuation:
		for len(b) > 0 {
			switch {
			case d.prefixLeft > 0:
				if d.flags&flagPadded != 0 && d.typ != frameContinuation && d.prefixFirst() {
					d.padLen = int(b[0])
					d.blockLeft -= d.padLen
					if d.blockLeft < 0 {
						d.lose()
						return
					}
				}
				d.prefixLeft--
				b = b[1:]
			case d.blockLeft > 0:
				n := min(len(b), d.blockLeft)
				if !d.blockBroken && !d.hp.write(b[:n], d) {
					d.breakBlock() // not HPACK: the table cannot be trusted
				}
				d.blockLeft -= n
				b = b[n:]
			default:
				return // padding
			}
		}
	case frameRSTStream, frameGoAway:
		d.smallN += copy(d.small[d.smallN:], b)
	case frameSettings:
		for len(b) > 0 {
			n := copy(d.small[d.smallN:6], b)
			d.smallN += n
			b = b[n:]
			if d.smallN == 6 {
				d.setting()
				d.smallN = 0
			}
		}
	}
}

// prefixFirst reports whether the next prefix byte is the first of the
// payload (the pad length).
func (d *dir) prefixFirst() bool {
	n := 0
	if d.flags&flagPadded != 0 {
		n++
	}
	if d.typ == frameHeaders && d.flags&flagPriority != 0 {
		n += 5
	}
	if d.typ == framePushPromise {
		n += 4
	}
	return d.prefixLeft == n
}

// skipPayload steps over n hidden payload bytes.
func (d *dir) skipPayload(n int) {
	if d.typ != frameHeaders && d.typ != framePushPromise && d.typ != frameContinuation {
		return
	}
	k := min(n, d.prefixLeft)
	d.prefixLeft -= k
	n -= k
	k = min(n, max(d.blockLeft, 0))
	d.blockLeft -= k
}

// setting applies one SETTINGS entry: the largest frame this direction's
// sender accepts bounds the other direction's frames.
func (d *dir) setting() {
	id := uint16(d.small[0])<<8 | uint16(d.small[1])
	v := uint32(d.small[2])<<24 | uint32(d.small[3])<<16 | uint32(d.small[4])<<8 | uint32(d.small[5])
	if id == settingMaxFrameSize && v >= defaultMaxFrame && v < 1<<24 {
		d.other().maxFrame = v
	}
}

func (d *dir) other() *dir {
	if d.client {
		return &d.p.s
	}
	return &d.p.c
}

// endFrame handles the end of the current frame. A stream's frames count
// in its sizes once they have passed whole (seen or stepped over).
func (d *dir) endFrame() {
	d.st = dsHeader
	p := d.p
	switch d.typ {
	case frameData:
		if s := p.find(d.stream); s != nil {
			d.addBytes(s, 9+d.length)
		}
		if d.flags&flagEndStream != 0 {
			p.endStream(d, d.stream)
		}
	case frameHeaders, framePushPromise, frameContinuation:
		d.blockBytes += 9 + d.length
		if d.flags&flagEndHeaders != 0 {
			d.endBlock(false)
		}
	case frameRSTStream:
		code := unknownReset
		if d.smallN == 4 {
			code = int64(uint32(d.small[0])<<24 | uint32(d.small[1])<<16 | uint32(d.small[2])<<8 | uint32(d.small[3]))
		}
		p.reset(d, d.stream, code)
	case frameGoAway:
		if d.smallN >= 4 && !d.client {
			last := uint32(d.small[0]&0x7f)<<24 | uint32(d.small[1])<<16 | uint32(d.small[2])<<8 | uint32(d.small[3])
			p.goAway(last)
		}
	}
}

// openBlock starts a header block on a HEADERS or PUSH_PROMISE frame.
func (d *dir) openBlock() {
	d.inBlock, d.blockBroken = true, false
	d.blockStream, d.blockTS = d.stream, d.frameTS
	d.blockBytes = 0
	d.blockEnd = d.typ == frameHeaders && d.flags&flagEndStream != 0
	switch {
	case d.typ == framePushPromise:
		d.blockKind = blockPush
	case d.client:
		d.blockKind = blockRequest
	default:
		d.blockKind = blockResponse
	}
	d.blk.reset()
}

// endBlock closes the header block (broken: its end was lost) and applies
// what it said.
func (d *dir) endBlock(broken bool) {
	d.inBlock = false
	_ = d.hp.dec.Close()
	d.hp.abort()
	if broken {
		d.blk.unknown = true
	}
	p := d.p
	switch d.blockKind {
	case blockRequest:
		p.request(d)
	case blockResponse:
		p.response(d)
	}
}

func (d *dir) addBytes(s *stream, n int) {
	if d.client {
		s.reqBytes += n
	} else {
		s.respBytes += n
	}
}

// onField is the HPACK Decoder's callback: for the literals it decodes
// (and, verifying, the fields it is asked to resolve).
func (d *dir) onField(f hpack.HeaderField) {
	h := &d.hp
	if h.probe {
		h.probed = f
		return
	}
	if h.adding {
		h.added(f)
	}
	if f.Name == "" { // a placeholder entry: its name is unknown
		d.unknown()
		return
	}
	d.field(f.Name, f.Value)
}

func (d *dir) unknown()                         { d.blk.unknown = true }
func (d *dir) field(name, value string)         { capture(&d.blk, name, value) }
func (d *dir) fieldBytes(name string, v []byte) { capture(&d.blk, name, v) }

// capture keeps what the parser reads of a field.
func capture[T string | []byte](f *fields, name string, value T) {
	switch name {
	case ":method":
		if len(value) > len(f.method) {
			f.methodN = -1
			return
		}
		f.methodN = copy(f.method[:], value)
	case ":path":
		f.pathN = copy(f.path[:], value)
		f.pathLong = len(value) > len(f.path)
	case ":status":
		f.status = 0
		if len(value) == 3 {
			for i := 0; i < 3; i++ {
				if value[i] < '0' || value[i] > '9' {
					f.status = 0
					return
				}
				f.status = f.status*10 + int(value[i]-'0')
			}
		}
	case "grpc-status":
		n := 0
		for i := 0; i < len(value) && i < 4; i++ {
			if value[i] < '0' || value[i] > '9' {
				n = GRPCUnknown
				break
			}
			n = n*10 + int(value[i]-'0')
		}
		if len(value) == 0 || len(value) > 4 {
			n = GRPCUnknown
		}
		f.grpcStatus = n
	case "content-type":
		const g = "application/grpc"
		f.grpcCT = len(value) >= len(g) && string(value[:len(g)]) == g
		f.ctSeen = true
	}
}

// request applies a client header block.
func (p *Parser) request(d *dir) {
	id := d.blockStream
	if s := p.find(id); s != nil {
		s.reqBytes += d.blockBytes // trailers
		return
	}
	if id&1 == 0 || id <= p.lastClient {
		return // not a new client stream: one whose start was not seen
	}
	p.lastClient = id
	s := p.add(id)
	s.hasReq, s.start, s.reqBytes = true, d.blockTS, d.blockBytes
	f := &d.blk
	s.grpc = f.grpcCT
	// gRPC requests are POSTs with content-type application/grpc: with
	// fields unknown, no content-type decoded and the method POST (or
	// unknown), whether it is gRPC - and so the API's form and what
	// decides its outcome - is not known. Its API is then the gRPC form
	// if the response shows gRPC, else unknown: never the HTTP form of a
	// gRPC method.
	s.maybeGRPC = !f.grpcCT && f.unknown && !f.ctSeen && (f.methodN == 0 || string(f.method[:max(f.methodN, 0)]) == "POST")
	if s.maybeGRPC {
		f.grpcCT = true
		s.apiGRPC = p.api(f)
	} else {
		s.api = p.api(f)
	}
	if f.pathN > 0 && f.methodN >= 0 {
		s.path = http.KeepPath(&p.paths, f.method[:f.methodN], f.path[:f.pathN], f.pathLong)
	}
	s.undecoded = s.api == ""
}

// api is a request block's API template, "" when :path or :method could
// not be decoded.
func (p *Parser) api(f *fields) string {
	if f.pathN == 0 || f.methodN == 0 && !f.grpcCT {
		return ""
	}
	b := p.scratch[:0]
	switch {
	case f.grpcCT:
		b = appendGRPCMethod(b, f.path[:f.pathN], f.pathLong)
	case f.methodN < 0: // longer than any method worth naming
		b = append(b, http.OtherMethod...)
	case f.pathLong:
		b = http.AppendAPIPrefix(b, f.method[:f.methodN], f.path[:f.pathN])
	default:
		b = http.AppendAPI(b, f.method[:f.methodN], f.path[:f.pathN])
	}
	return p.in.Intern(b)
}

// appendGRPCMethod appends a gRPC method's path as it is ("/pkg.Service/
// Method"), bytes outside printable ASCII as '?', at most http.MaxAPI
// bytes (a longer one ends in "...").
func appendGRPCMethod(dst, path []byte, long bool) []byte {
	long = long || len(path) > http.MaxAPI
	if long {
		path = path[:min(len(path), http.MaxAPI-3)]
	}
	for _, c := range path {
		if c < 0x21 || c > 0x7e {
			c = '?'
		}
		dst = append(dst, c)
	}
	if long {
		dst = append(dst, "..."...)
	}
	return dst
}

// response applies a server header block: the final response's headers,
// an interim response, or trailers.
func (p *Parser) response(d *dir) {
	id := d.blockStream
	f := &d.blk
	s := p.find(id)
	if s == nil {
		// A response to a request not seen (sent before the capture
		// began, or lost in a gap) - but only the start of a final
		// response: trailers or frames of a stream already finished (a
		// cancelled call the server still answers) make no exchange.
		if id&1 == 0 || f.status < 200 {
			return // pushed streams are not requests the client made
		}
		if id > p.lastClient {
			p.lastClient = id
		}
		s = p.add(id)
		s.maybeGRPC = true
	}
	s.respBytes += d.blockBytes
	switch {
	case !s.respStarted && f.status >= 100 && f.status < 200:
		return // interim (100 Continue, 103 Early Hints)
	case !s.respStarted:
		s.respStarted, s.end, s.status = true, d.blockTS, f.status
		if f.status == 0 {
			s.undecoded = true
		}
	}
	if f.grpcCT || f.grpcStatus >= 0 {
		s.grpc = true
	} else if f.ctSeen {
		s.maybeGRPC = false // a response content-type that is not gRPC's
	}
	if f.grpcStatus >= 0 {
		s.grpcStatus = f.grpcStatus
	} else if f.unknown && d.blockEnd && (s.grpc || s.maybeGRPC) {
		s.undecoded = true // a grpc-status may be among the unknown fields
	}
	if d.blockEnd {
		p.endStream(d, id)
	}
}

// endStream handles END_STREAM from direction d.
func (p *Parser) endStream(d *dir, id uint32) {
	if d.client {
		return // the request ended; the exchange ends with the response
	}
	if i := p.index(id); i >= 0 {
		p.finish(i, ending{kind: endStream})
	}
}

// reset handles RST_STREAM from direction d with the given error code
// (or unknownReset).
func (p *Parser) reset(d *dir, id uint32, code int64) {
	if i := p.index(id); i >= 0 {
		p.finish(i, ending{kind: endReset, rst: code, byClient: d.client, ts: d.frameTS})
	}
}

// goAway ends the streams above the last one the server processes: they
// come out without a response.
func (p *Parser) goAway(last uint32) {
	for i := 0; i < len(p.streams); {
		if s := &p.streams[i]; s.id > last && s.id&1 == 1 && !s.respStarted {
			p.finish(i, ending{kind: endGoAway})
			continue
		}
		i++
	}
}

// serverLost handles a desync of the server's frames: responses under way
// may have ended in what was lost. They come out now, with what was seen
// (a later frame of theirs finds no stream and is ignored), rather than
// linger until the connection closes. Streams still waiting for their
// response keep waiting.
func (p *Parser) serverLost() {
	for i := 0; i < len(p.streams); {
		if p.streams[i].respStarted {
			p.finish(i, ending{kind: endLost})
			continue
		}
		i++
	}
}

// finish emits stream i's exchange and forgets the stream.
func (p *Parser) finish(i int, e ending) {
	s := &p.streams[i]
	x := l7.Exchange{HasRequest: s.hasReq}
	if s.hasReq {
		x.Start, x.API, x.ReqBytes, x.Path = s.start, s.api, s.reqBytes, p.paths.Emit(s.path)
		if s.maybeGRPC && s.grpc {
			x.API = s.apiGRPC
		}
	}
	switch {
	case s.respStarted:
		x.HasResponse, x.End = true, s.end
	case e.kind == endReset && !e.byClient:
		// The server reset the stream instead of answering.
		x.HasResponse, x.End = true, e.ts
	}
	if x.HasResponse {
		x.RespBytes, x.Status = s.respBytes, uint16(s.status)
		x.Class = s.class(e)
		if s.grpc && s.grpcStatus >= 0 {
			x.GRPC, x.GRPCStatus = true, int16(s.grpcStatus)
		}
	}
	if s.undecoded {
		p.undecoded++
	}
	p.out = append(p.out, x)
	copy(p.streams[i:], p.streams[i+1:])
	p.streams = p.streams[:len(p.streams)-1]
}

// class is the outcome of a stream ending as e (and marks it undecoded
// when the outcome could not be known).
func (s *stream) class(e ending) l7.Class {
	reset, byServer := e.kind == endReset, e.kind == endReset && !e.byClient
	if !s.grpc && s.maybeGRPC {
		s.undecoded = true // a gRPC status may have decided it
	}
	if !s.grpc {
		switch {
		case s.status != 0:
			return StatusClass(s.status)
		case byServer:
			return l7.ServerError // refused or failed without a status
		}
		return l7.OK
	}
	code := s.grpcStatus
	if code < 0 {
		switch {
		case reset && e.byClient:
			code = GRPCCanceled // the client cancelled the call
		case byServer && e.rst >= 0:
			code = GRPCStatusFromReset(uint32(e.rst))
		case byServer:
			code = GRPCInternal // a reset whose code was lost
		case e.kind == endClose:
			code = GRPCUnavailable // the connection ended before the status
		case e.kind == endLost || e.kind == endEvict || s.status == 0:
			s.undecoded = true // the status was not seen: no failure is known
			return l7.OK
		default:
			code = GRPCStatusFromHTTP(s.status) // 200 without grpc-status: OK
		}
		s.grpcStatus = code // the status the call ended with
	}
	return GRPCClass(code)
}

// Flush implements l7.Parser: streams still open when the connection
// closes come out, with what they had.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	p.paths.Recycle()
	p.out = out
	for len(p.streams) > 0 {
		p.finish(0, ending{kind: endClose})
	}
	return p.flushOut()
}

func (p *Parser) index(id uint32) int {
	for i := len(p.streams) - 1; i >= 0; i-- {
		if p.streams[i].id == id {
			return i
		}
	}
	return -1
}

func (p *Parser) find(id uint32) *stream {
	if i := p.index(id); i >= 0 {
		return &p.streams[i]
	}
	return nil
}

// add tracks a new stream, evicting the oldest when MaxStreams are.
func (p *Parser) add(id uint32) *stream {
	if len(p.streams) == MaxStreams {
		p.desyncs++
		p.finish(0, ending{kind: endEvict})
	}
	if p.streams == nil {
		p.streams = make([]stream, 0, 8)
	}
	p.streams = append(p.streams, stream{id: id, grpcStatus: -1})
	return &p.streams[len(p.streams)-1]
}
