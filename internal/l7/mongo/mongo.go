package mongo

import (
	"bytes"
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/ident"
	"github.com/galago-project/galago/internal/l7/internal/lenframe"
)

// Opcodes.
const (
	opReply       = 1
	opUpdate      = 2001
	opInsert      = 2002
	opQuery       = 2004
	opGetMore     = 2005
	opDelete      = 2006
	opKillCursors = 2007
	opCompressed  = 2012
	opMsg         = 2013
)

// OP_MSG flag bits.
const (
	flagChecksum   = 1 << 0
	flagMoreToCome = 1 << 1
	flagExhaust    = 1 << 16
)

const (
	headerLen = 16
	// maxMessage bounds a declared message length: the server's
	// maxMessageSizeBytes is 48,000,000.
	maxMessage = 64 << 20
	// reqPrefix is how much of a request's body is kept to find its
	// command, collection and flags.
	reqPrefix = 512
	// maxPending bounds the requests awaiting a response on a connection.
	maxPending = 64
	maxAPI     = 128
)

func validOp(op int32) bool {
	switch op {
	case opReply, opUpdate, opInsert, opQuery, opGetMore, opDelete, opKillCursors, opCompressed, opMsg:
		return true
	}
	return false
}

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a MongoDB request. See the package doc for the exact
// signature; it reads at most the first 32 bytes.
func Detect(b []byte) bool {
	if len(b) < 21 {
		return false
	}
	n := int32(binary.LittleEndian.Uint32(b))
	reqID := int32(binary.LittleEndian.Uint32(b[4:]))
	respTo := binary.LittleEndian.Uint32(b[8:])
	op := int32(binary.LittleEndian.Uint32(b[12:]))
	if n < 21 || n > maxMessage || reqID < 0 || respTo != 0 {
		return false
	}
	switch op {
	case opMsg:
		flags := binary.LittleEndian.Uint32(b[16:])
		if flags&^(flagChecksum|flagMoreToCome|flagExhaust) != 0 {
			return false
		}
		switch b[20] {
		case 0: // body: a document whose first element has a printable name
			if len(b) < 27 {
				return false
			}
			dl := int32(binary.LittleEndian.Uint32(b[21:]))
			if dl < 5 || dl > n-21 || !bsonType(b[25]) {
				return false
			}
			return printableUntilNUL(b[26:min(len(b), 32)])
		case 1: // document sequence
			return len(b) >= 25 && int32(binary.LittleEndian.Uint32(b[21:])) <= n-21
		}
		return false
	case opQuery: // flags, then the collection's full name: "db.coll"
		if binary.LittleEndian.Uint32(b[16:])&^0xfe != 0 {
			return false
		}
		return printableUntilNUL(b[20:min(len(b), 32)]) && bytes.IndexByte(b[20:min(len(b), 32)], '.') > 0
	case opCompressed:
		return len(b) >= 25 && validOp(int32(binary.LittleEndian.Uint32(b[16:]))) && b[24] <= 3
	case opInsert, opUpdate, opDelete, opGetMore, opKillCursors:
		return true
	}
	return false
}

func bsonType(t byte) bool {
	return t >= tDouble && t <= tDecimal || t == tMinKey || t == tMaxKey
}

// printableUntilNUL: b holds printable ASCII up to a NUL or its end, and
// at least one byte.
func printableUntilNUL(b []byte) bool {
	for i, c := range b {
		if c == 0 {
			return i > 0
		}
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return len(b) > 0
}

type pending struct {
	id        int32
	ts        uint64
	size      int
	api       string
	cmd       bool // an OP_QUERY command: its OP_REPLY's first document is the command's reply
	responded bool
}

// Parser frames and pairs one MongoDB connection: a reply takes the request
// whose requestID is its responseTo. A request with moreToCome (an
// unacknowledged write) and the legacy writes get no reply: they come out
// at once, HasResponse false. A reply with moreToCome (an exhaust cursor,
// a streaming hello) is followed by more replies to the same request: the
// first one completes the exchange, the rest continue it and are not
// counted again. A reply to a request that was not seen comes out alone
// (HasRequest false), with its outcome.
type Parser struct {
	role       l7.Role
	reqF, resF lenframe.Framer
	reqS       reqSink
	resS       respSink

	// the request being read
	rID   int32
	rOp   int32
	rTS   uint64
	rSize int
	rBuf  [reqPrefix]byte
	rN    int
	rCut  bool

	// the reply being read
	sID, sTo int32
	sOp      int32
	sTS      uint64
	sSize    int
	sHdr     [20]byte // OP_MSG flags and section kind, or OP_REPLY's fixed fields
	sHdrN    int
	sHdrNeed int
	sCmd     bool
	sCont    bool // a continuation of an exhaust stream
	sGapped  bool
	w        replyWalker

	// the exhaust stream in progress: replies answering streamLast (the
	// previous reply) or streamOrig (the request) continue it
	streaming              bool
	streamLast, streamOrig int32

	q  []pending
	qh int

	in   l7.Interner
	tmpl [maxAPI + 8]byte
	out  []l7.Exchange
}

type reqSink struct{ p *Parser }
type respSink struct{ p *Parser }

// NewParser returns a parser for one connection seen from role's side.
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role}
	p.reqS.p, p.resS.p = p, p
	p.reqF.HeaderLen, p.reqF.Length = headerLen, reqLength
	p.resF.HeaderLen, p.resF.Length = headerLen, p.respLength
	return p
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.reqF.Desyncs() + p.resF.Desyncs() }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	p.out = out
	if c.Dir == p.role.RequestDir() {
		p.reqF.Feed(&c, &p.reqS)
	} else {
		p.resF.Feed(&c, &p.resS)
	}
	out, p.out = p.out, nil
	return out
}

// Flush implements l7.Parser: the requests still waiting for a reply.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	for i := p.qh; i < len(p.q); i++ {
		if !p.q[i].responded {
			out = append(out, p.unanswered(&p.q[i]))
		}
	}
	p.q, p.qh = p.q[:0], 0
	return out
}

func header(h []byte) (n, id, to, op int32) {
	return int32(binary.LittleEndian.Uint32(h)), int32(binary.LittleEndian.Uint32(h[4:])),
		int32(binary.LittleEndian.Uint32(h[8:])), int32(binary.LittleEndian.Uint32(h[12:]))
}

func reqLength(h []byte) int {
	n, _, to, op := header(h)
	if n < headerLen || n > maxMessage || to != 0 || op == opReply || !validOp(op) {
		return -1
	}
	return int(n)
}

func (p *Parser) respLength(h []byte) int {
	n, _, to, op := header(h)
	if n < headerLen || n > maxMessage || (op != opReply && op != opMsg && op != opCompressed) {
		return -1
	}
	if p.resF.Lost() && p.find(to) < 0 && !p.continues(to) {
		return -1 // resynchronising: only on a reply a request waits for
	}
	return int(n)
}

// continues says a reply answering to continues the exhaust stream.
func (p *Parser) continues(to int32) bool {
	return p.streaming && (to == p.streamLast || to == p.streamOrig)
}

func (p *Parser) find(id int32) int {
	for i := p.qh; i < len(p.q); i++ {
		if p.q[i].id == id && !p.q[i].responded {
			return i
		}
	}
	return -1
}

func (s *reqSink) Start(h []byte, total int, ts uint64) {
	p := s.p
	_, p.rID, _, p.rOp = header(h)
	p.rTS, p.rSize, p.rN, p.rCut = ts, total, 0, false
}

func (s *reqSink) Data(b []byte) {
	p := s.p
	if !p.rCut {
		p.rN += copy(p.rBuf[p.rN:], b)
	}
}

// Gap ends the prefix: what follows a gap is not its continuation.
func (s *reqSink) Gap(int) { s.p.rCut = true }

func (s *reqSink) End() {
	p := s.p
	api, reply, cmd := p.request(p.rOp, p.rBuf[:p.rN])
	if !reply {
		p.out = append(p.out, l7.Exchange{HasRequest: true, Start: p.rTS, API: api, ReqBytes: p.rSize})
		return
	}
	if len(p.q)-p.qh >= maxPending {
		if !p.q[p.qh].responded {
			p.out = append(p.out, p.unanswered(&p.q[p.qh]))
		}
		p.qh++
	}
	if p.qh > 0 && len(p.q) == cap(p.q) {
		n := copy(p.q, p.q[p.qh:])
		p.q, p.qh = p.q[:n], 0
	}
	p.q = append(p.q, pending{id: p.rID, ts: p.rTS, size: p.rSize, api: api, cmd: cmd})
}

func (p *Parser) unanswered(q *pending) l7.Exchange {
	return l7.Exchange{HasRequest: true, Start: q.ts, API: q.api, ReqBytes: q.size}
}

// request reads a request's prefix: its API template, whether a reply
// will come, and whether it is an OP_QUERY command.
func (p *Parser) request(op int32, b []byte) (api string, reply, cmd bool) {
	t := p.tmpl[:0]
	switch op {
	case opMsg:
		if len(b) < 4 {
			return "", true, false
		}
		flags := binary.LittleEndian.Uint32(b)
		t = appendMsgAPI(t, b)
		return p.in.Intern(t), flags&flagMoreToCome == 0, false
	case opQuery:
		t, cmd = appendQueryAPI(t, b)
		return p.in.Intern(t), true, cmd
	case opInsert, opUpdate, opDelete, opGetMore:
		t = append(t, legacyName(op)...)
		if len(b) > 4 {
			if coll := collOf(b[4:]); coll != nil {
				t = appendColl(append(t, ' '), coll)
			}
		}
		return p.in.Intern(t), op == opGetMore, false
	case opKillCursors:
		return "killCursors", false, false
	case opCompressed:
		return "OP_COMPRESSED", true, false
	}
	return "", true, false
}

func legacyName(op int32) string {
	switch op {
	case opInsert:
		return "insert"
	case opUpdate:
		return "update"
	case opDelete:
		return "delete"
	}
	return "getMore"
}

func (s *respSink) Start(h []byte, total int, ts uint64) {
	p := s.p
	_, p.sID, p.sTo, p.sOp = header(h)
	p.sTS, p.sSize, p.sHdrN, p.sGapped = ts, total, 0, false
	p.sCont = false
	i := p.find(p.sTo)
	if i >= 0 {
		// a connection's requests are answered in order: the ones this
		// reply passed over will not be
		for j := p.qh; j < i; j++ {
			if !p.q[j].responded {
				p.out = append(p.out, p.unanswered(&p.q[j]))
				p.q[j].responded = true
			}
		}
		p.sCmd = p.q[i].cmd
	} else if p.continues(p.sTo) {
		p.sCont = true
	}
	switch p.sOp {
	case opMsg:
		p.sHdrNeed = 5 // flags, the first section's kind
	case opReply:
		p.sHdrNeed = 20 // flags, cursor id, starting from, number returned
	default:
		p.sHdrNeed = 0 // OP_COMPRESSED: not decoded
	}
	p.w.reset(0)
	if p.sHdrNeed == 0 {
		p.w.dead = true
	}
}

func (s *respSink) Data(b []byte) {
	p := s.p
	if p.sHdrN < p.sHdrNeed {
		k := copy(p.sHdr[p.sHdrN:p.sHdrNeed], b)
		p.sHdrN += k
		b = b[k:]
		if p.sHdrN < p.sHdrNeed {
			return
		}
		switch p.sOp {
		case opMsg:
			if p.sHdr[4] != 0 {
				p.w.dead = true // a document sequence first: not decoded
			}
		case opReply:
			// an OP_REPLY's first document is a command's reply only for
			// commands; else it is data, unless the query failed
			if !p.sCmd && binary.LittleEndian.Uint32(p.sHdr[:4])&2 == 0 {
				p.w.dead = true
			}
		}
	}
	p.w.feed(b)
}

func (s *respSink) Gap(n int) {
	p := s.p
	if p.sHdrN < p.sHdrNeed {
		p.sGapped = true
		p.w.dead = true
		return
	}
	p.w.gap(n)
}

func (s *respSink) End() {
	p := s.p
	more := p.sOp == opMsg && p.sHdrN >= 4 && !p.sGapped && binary.LittleEndian.Uint32(p.sHdr[:4])&flagMoreToCome != 0
	class := p.w.class(p.sOp == opReply && p.sHdrN >= 4 && binary.LittleEndian.Uint32(p.sHdr[:4])&2 != 0)
	i := -1
	if !p.sCont {
		i = p.find(p.sTo)
	}
	switch {
	case more && i >= 0:
		p.streaming, p.streamLast, p.streamOrig = true, p.sID, p.sTo
	case more && p.sCont:
		p.streamLast = p.sID
	case p.sCont:
		p.streaming = false
	}
	if p.sCont {
		return
	}
	if i < 0 {
		p.out = append(p.out, l7.Exchange{HasResponse: true, End: p.sTS, Class: class, RespBytes: p.sSize})
		return
	}
	q := &p.q[i]
	p.out = append(p.out, l7.Exchange{
		HasRequest: true, HasResponse: true, Start: q.ts, End: p.sTS,
		Class: class, API: q.api, ReqBytes: q.size, RespBytes: p.sSize,
	})
	q.responded = true
	for p.qh < len(p.q) && p.q[p.qh].responded {
		p.qh++
	}
	if p.qh == len(p.q) {
		p.q, p.qh = p.q[:0], 0
	}
}

// class is the outcome the walk found: see codes.go.
func (w *replyWalker) class(queryFailure bool) l7.Class {
	c := l7.OK
	if (w.okSeen && w.ok == 0) || queryFailure {
		c = CodeClass(w.code)
	}
	if w.weSeen {
		c = max(c, CodeClass(w.weCode))
	}
	if w.wceSeen {
		c = max(c, CodeClass(w.wceCode))
	}
	return c
}

// appendMsgAPI appends the template of an OP_MSG whose body (after the
// header) b starts: the body section's command and collection.
func appendMsgAPI(t, b []byte) []byte {
	off := 4
	for off < len(b) {
		kind := b[off]
		off++
		switch kind {
		case 0:
			return appendCommand(t, b[off:])
		case 1:
			if off+4 > len(b) {
				return t
			}
			// the size counts itself: a smaller one would not move on
			size := int(int32(binary.LittleEndian.Uint32(b[off:])))
			if size < 4 {
				return t
			}
			off += size
		default:
			return t
		}
	}
	return t
}

// appendQueryAPI appends the template of an OP_QUERY: a command on
// "<db>.$cmd", else a legacy query of the collection.
func appendQueryAPI(t, b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return t, false
	}
	b = b[4:]
	z := bytes.IndexByte(b, 0)
	if z < 0 {
		return t, false
	}
	full := b[:z]
	if !bytes.HasSuffix(full, []byte(".$cmd")) {
		t = append(t, "find"...)
		if coll := collOf(b); coll != nil {
			t = appendColl(append(t, ' '), coll)
		}
		return t, false
	}
	if z+9 > len(b) {
		return t, true
	}
	doc := b[z+9:]
	if e, _, ok := nextElem(doc, 4); ok && (string(e.name) == "$query" || string(e.name) == "query") && e.typ == tDocument {
		doc = e.val
	}
	return appendCommand(t, doc), true
}

// collOf returns the collection of the cstring "db.coll" b starts with.
func collOf(b []byte) []byte {
	z := bytes.IndexByte(b, 0)
	if z < 0 {
		return nil
	}
	_, coll, ok := bytes.Cut(b[:z], []byte("."))
	if !ok {
		return nil
	}
	return coll
}

// appendCommand appends "<command>" or "<command> <collection>" from the
// command document doc starts.
func appendCommand(t, doc []byte) []byte {
	e, next, ok := nextElem(doc, 4)
	if !ok || !validName(e.name) {
		return t
	}
	t = append(t, e.name...)
	switch name := string(e.name); {
	case name == "getMore":
		// {getMore: <cursor id>, collection: "<coll>"}
		for off := next; ; {
			f, n, ok := nextElem(doc, off)
			if !ok {
				return t
			}
			if string(f.name) == "collection" {
				if s, ok := f.str(); ok && validColl(s) {
					t = appendColl(append(t, ' '), s)
				}
				return t
			}
			off = n
		}
	case name == "explain" && e.typ == tDocument:
		// {explain: {find: "orders", ...}}: "explain find orders"
		inner := appendCommand(append(t, ' '), e.val)
		if len(inner) > len(t)+1 {
			return inner
		}
		return t
	case collectionCommands[name]:
		if s, ok := e.str(); ok && validColl(s) {
			t = appendColl(append(t, ' '), s)
		}
	}
	return t
}

func appendColl(t, coll []byte) []byte {
	t = ident.AppendCollapsed(t, coll)
	if len(t) > maxAPI {
		t = t[:maxAPI]
	}
	return t
}

// collectionCommands take a collection name as their first value. Only
// these: the first value of others is a flag (1, true), a user or role
// name, a document or a literal, none of which belongs in a template.
var collectionCommands = map[string]bool{
	"find": true, "insert": true, "update": true, "delete": true, "aggregate": true, "count": true,
	"distinct": true, "findAndModify": true, "findandmodify": true, "killCursors": true,
	"create": true, "drop": true, "createIndexes": true, "dropIndexes": true, "deleteIndexes": true,
	"listIndexes": true, "collMod": true, "collStats": true, "validate": true, "mapReduce": true,
	"mapreduce": true, "compact": true, "reIndex": true, "convertToCapped": true,
	"cloneCollectionAsCapped": true, "listSearchIndexes": true, "createSearchIndexes": true,
	"updateSearchIndex": true, "dropSearchIndex": true, "geoNear": true, "dataSize": true,
	"shardCollection": true, "renameCollection": true, "refineCollectionShardKey": true,
}

// validName: a command name is letters, digits, '_' or '$', at most 64.
func validName(b []byte) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for _, c := range b {
		if !nameChar(c) {
			return false
		}
	}
	return true
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// validColl: a collection name is printable ASCII without spaces (others
// are not kept), at most 120 bytes.
func validColl(b []byte) bool {
	if len(b) == 0 || len(b) > 120 {
		return false
	}
	for _, c := range b {
		if c <= 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// AppendAPI appends to dst the API template of the request that req (a
// prefix of a request, its header included) starts; dst is unchanged when
// req does not start a MongoDB request with a readable command.
func AppendAPI(dst, req []byte) []byte {
	if len(req) < headerLen || reqLength(req[:headerLen]) < 0 {
		return dst
	}
	_, _, _, op := header(req)
	var p Parser
	api, _, _ := p.request(op, req[headerLen:min(len(req), headerLen+reqPrefix)])
	return append(dst, api...)
}

// ReplyClass returns the outcome of the reply (OP_MSG or OP_REPLY) that
// resp, a prefix of it with its header, starts: ok 0 by its code, write
// errors and write concern errors by theirs (see CodeClass). cmdQuery says
// the request was an OP_QUERY command (for OP_REPLY). A prefix that ends
// before the deciding fields gives OK.
func ReplyClass(resp []byte, cmdQuery bool) l7.Class {
	if len(resp) < headerLen {
		return l7.OK
	}
	n, _, _, op := header(resp)
	b := resp[headerLen:min(len(resp), max(int(n), headerLen))]
	var w replyWalker
	w.reset(0)
	failure := false
	switch op {
	case opMsg:
		if len(b) < 5 || b[4] != 0 {
			return l7.OK
		}
		w.feed(b[5:])
	case opReply:
		if len(b) < 20 {
			return l7.OK
		}
		failure = binary.LittleEndian.Uint32(b)&2 != 0
		if !cmdQuery && !failure {
			return l7.OK
		}
		w.feed(b[20:])
	default:
		return l7.OK
	}
	return w.class(failure)
}
