package pgsql

import (
	"bytes"
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/sqlapi"
)

// MaxPending bounds the requests a connection may have in flight that the
// parser tracks one by one; deeper pipelines are counted in aggregate (see
// the package doc).
const MaxPending = 256

// Startup-phase request codes (the second int32 of an untyped message).
const (
	codeV3      = 3 << 16
	codeCancel  = 80877102
	codeSSL     = 80877103
	codeGSSENC  = 80877104
	codeV3Major = 3
)

type phase uint8

const (
	phStartup phase = iota // expecting a startup-family message (or, mid-connection, a typed one)
	phAuth                 // startup sent: authentication until ReadyForQuery
	phReady                // ready for queries
	phDead                 // nothing more to parse (encrypted, cancel request, unsupported)
)

type unitKind uint8

const (
	uExec  unitKind = iota // Parse/Bind/Describe... Execute: one exchange
	uQuery                 // simple query 'Q': one exchange
	uFunc                  // FunctionCall 'F': one exchange
	uGroup                 // extended-protocol messages without an Execute (prepare, close): an exchange only if it fails
	uSync                  // Sync: answered by ReadyForQuery
	uLost                  // requests hidden by a gap: their outcomes up to a ReadyForQuery
	uMany                  // pipelined requests beyond MaxPending, in aggregate
	uLogin                 // the startup message: an exchange only if it fails
)

// unit is one pending request (or group of messages) awaiting its responses.
type unit struct {
	start, end uint64
	api        string
	req, resp  int
	kind       unitKind
	class      l7.Class
	hasResp    bool
	failed     bool
	suspect    bool  // its response lost boundaries in a gap
	apiSet     bool  // uMany: api is that of the requests merged so far
	need       int32 // intermediate responses (ParseComplete, ...) still due; uMany: Executes still due
	syncs      int32 // uMany: Syncs (and simple queries) still due
}

// Parser is a PostgreSQL frontend/backend protocol v3 parser for one
// connection; see the package doc.
type Parser struct {
	role     l7.Role
	cli, srv stream
	phase    phase
	sslWait  bool // the client sent SSLRequest/GSSENCRequest: a one-byte answer is due
	skipping bool // an extended-protocol error: the server ignores messages up to Sync

	q     []unit // ring of pending units
	qHead int
	qLen  int

	// building collects the extended-protocol messages sent since the last
	// Execute/Sync/Flush.
	building unit
	bOps     bool
	bLast    byte // the last message added to building: 'P' or 'B' when inferTail may complete it
	bName    int  // that Parse's statement name length

	stmts         sqlapi.Statements
	unnamedStmt   string
	portals       [4]portal
	portalNext    int
	unnamedPortal string
	tp            sqlapi.Templater

	out      []l7.Exchange
	desyncs  uint64
	orphans  uint64
	overflow uint64
}

type portal struct {
	key uint64
	api string
}

// NewParser returns a parser for a connection where the observed process
// has the given role, with its own template interner.
func NewParser(role l7.Role) *Parser {
	return NewParserWith(role, nil)
}

// NewParserWith is NewParser with a shared template interner (nil: its
// own): the probe passes one per goroutine so that every connection's
// templates are stored once.
func NewParserWith(role l7.Role, in *l7.Interner) *Parser {
	p := &Parser{
		role: role,
		cli:  newStream(headCap, false),
		srv:  newStream(srvHeadCap, true),
		q:    make([]unit, 8),
	}
	p.tp.In = in
	return p
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Orphans counts the responses that answered no request the parser saw
// (the capture began mid-connection, or their requests were lost in a
// desync): they were dropped.
func (p *Parser) Orphans() uint64 { return p.orphans }

// Overflows counts the requests tracked in aggregate because more than
// MaxPending were in flight.
func (p *Parser) Overflows() uint64 { return p.overflow }

// Feed implements l7.Parser.
func (p *Parser) Feed(c l7.Chunk, out []l7.Exchange) []l7.Exchange {
	p.out = out
	if p.phase == phDead || (c.Dir != l7.Egress && c.Dir != l7.Ingress) {
		return out
	}
	data := c.Data
	gap := c.Size - len(c.Data)
	client := c.Dir == p.role.RequestDir()
	s := &p.srv
	if client {
		s = &p.cli
	}
	if s.lost {
		off := resync(data, c.Size, !client)
		if off < 0 {
			p.out, out = nil, p.out
			return out
		}
		data = data[off:]
		s.lost = false
		s.untyped, s.single = false, false
	}
	var ok bool
	tail := 0
	if client {
		if p.phase == phStartup && s.n == 0 && s.size == 0 && len(data) > 0 && !s.untyped {
			// A connection's first bytes: a startup-family message starts
			// with the high byte of its length (0); a typed message never
			// does. Anything else means the capture began mid-connection.
			if data[0] == 0 {
				s.untyped = true
			} else {
				p.phase = phReady
			}
		}
		ok, tail = s.feed(data, gap, c.TS, p.onClient)
		if !ok && p.inferTail(tail, c.TS) {
			ok = true
		}
	} else {
		ok, _ = s.feed(data, gap, c.TS, p.onServer)
	}
	if !ok {
		p.desync(client, c.TS)
	}
	p.out, out = nil, p.out
	return out
}

// inferTail completes a request whose end a gap hid, when the hidden
// bytes after the last message are exactly what drivers send next:
//   - after a Bind of the unnamed portal (a parameter larger than the
//     capture): Execute (10 bytes) and Sync (5), with a Describe of the
//     portal (7) before them or not;
//   - after a Parse of statement S (a statement longer than the capture,
//     being prepared): Sync, with a Describe of S (7+len(S)) before it or
//     not.
func (p *Parser) inferTail(tail int, ts uint64) bool {
	if p.phase != phReady || !p.bOps {
		return false
	}
	switch {
	case p.bLast == 'B' && (tail == 10+5 || tail == 7+10+5):
		if tail == 7+10+5 {
			p.building.need++ // the Describe's RowDescription or NoData
			p.building.req += 7
		}
		u := p.building
		u.kind = uExec
		u.req += 10
		u.api = p.unnamedPortal
		p.building, p.bOps = unit{}, false
		p.push(u)
	case p.bLast == 'P' && (tail == 5 || tail == 7+p.bName+5):
		if tail != 5 {
			p.building.need += 2 // ParameterDescription, RowDescription or NoData
			p.building.req += 7 + p.bName
		}
		p.flushBuilding()
	default:
		return false
	}
	p.push(unit{kind: uSync, start: ts, req: 5})
	return true
}

// desync handles lost message boundaries in one direction; ts is the
// chunk's.
func (p *Parser) desync(client bool, ts uint64) {
	p.desyncs++
	if client {
		p.cli.lost = true
		// Requests were hidden: what was being assembled and what the gap
		// held become one placeholder. The server answers each hidden
		// Execute with its own CommandComplete (or error) and the hidden
		// Sync with ReadyForQuery (clients flush at Sync), so the
		// placeholder turns each of those outcomes into an exchange, the
		// first with the API of the visible start, and ends at the
		// ReadyForQuery.
		u := unit{kind: uLost, start: ts}
		if p.bOps {
			u.start, u.api, u.req = p.building.start, p.building.api, p.building.req
		}
		p.building, p.bOps = unit{}, false
		p.push(u)
		return
	}
	p.srv.lost = true
	pending := 0
	for i := 0; i < p.qLen; i++ {
		switch p.at(i).kind {
		case uExec, uQuery, uFunc, uGroup, uMany, uLost, uLogin:
			pending++
		}
	}
	if pending <= 1 {
		// One request in flight: the hidden bytes can only belong to its
		// response (which therefore started). Keep it, and resynchronise
		// on a later chunk.
		for i := 0; i < p.qLen; i++ {
			u := p.at(i)
			u.suspect = true
			if u.kind != uSync && !u.hasResp {
				u.hasResp, u.end = true, ts
			}
		}
		return
	}
	// Several in flight: which of their responses the gap held is unknown;
	// drop them rather than pair later responses with the wrong requests.
	p.qHead, p.qLen = 0, 0
	p.skipping = false
}

// Flush implements l7.Parser: requests still waiting for a response.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	p.out = out
	p.flushBuilding()
	p.settleSuspect()
	for p.qLen > 0 {
		u := p.pop()
		switch u.kind {
		case uExec, uQuery, uFunc:
			// A response that started counts (a FATAL error, then the
			// connection closed); one that never did is missing.
			p.emit(&u, u.hasResp)
		case uMany:
			for ; u.need > 0; u.need-- {
				p.emitMany(&u, false, 0, 0, l7.OK)
			}
		}
	}
	p.out, out = nil, p.out
	return out
}

// Queue of pending units.

func (p *Parser) at(i int) *unit { return &p.q[(p.qHead+i)%len(p.q)] }

func (p *Parser) front() *unit {
	if p.qLen == 0 {
		return nil
	}
	return p.at(0)
}

func (p *Parser) pop() unit {
	u := *p.at(0)
	*p.at(0) = unit{}
	p.qHead = (p.qHead + 1) % len(p.q)
	p.qLen--
	return u
}

func (p *Parser) push(u unit) {
	if u.kind != uSync {
		// A new request: a suspect one still in flight (its response lost
		// boundaries) was answered in full, or the client would not have
		// sent another.
		p.settleSuspect()
	}
	if p.qLen > 0 {
		if t := p.at(p.qLen - 1); t.kind == uMany {
			p.merge(t, &u)
			return
		}
	}
	if p.qLen == len(p.q) {
		if len(p.q) < MaxPending {
			q := make([]unit, 2*len(p.q))
			for i := 0; i < p.qLen; i++ {
				q[i] = *p.at(i)
			}
			p.q, p.qHead = q, 0
		} else {
			// Full: the last slot becomes an aggregate of everything
			// pushed from now on.
			t := p.at(p.qLen - 1)
			last := *t
			*t = unit{kind: uMany, start: last.start}
			p.merge(t, &last)
			p.merge(t, &u)
			return
		}
	}
	*p.at(p.qLen) = u
	p.qLen++
}

// merge adds u to the aggregate t: an Execute (or simple query) is an
// exchange due, a Sync (or simple query) a ReadyForQuery due.
func (p *Parser) merge(t *unit, u *unit) {
	switch u.kind {
	case uExec:
		t.need++
		p.overflow++
	case uQuery, uFunc:
		t.need++
		t.syncs++
		p.overflow++
	case uSync, uLost:
		t.syncs++
	default:
		return
	}
	if u.kind == uSync || u.kind == uLost {
		return
	}
	if !t.apiSet {
		t.api, t.apiSet = u.api, true
	} else if u.api != t.api {
		t.api = ""
	}
}

func (p *Parser) settleSuspect() {
	for p.qLen > 0 {
		f := p.front()
		if !f.suspect {
			return
		}
		u := p.pop()
		switch u.kind {
		case uExec, uQuery, uFunc:
			p.emit(&u, true)
		case uLost:
			if u.need == 0 && u.hasResp {
				p.emit(&u, true) // no outcome seen yet: take it as one request
			}
		case uMany:
			for ; u.need > 0; u.need-- {
				p.emitMany(&u, true, u.end, 0, l7.OK)
			}
		}
	}
}

// emit appends u's exchange.
func (p *Parser) emit(u *unit, hasResp bool) {
	e := l7.Exchange{HasRequest: true, Start: u.start, API: u.api, ReqBytes: u.req}
	if hasResp && u.hasResp {
		e.HasResponse, e.End, e.Class, e.RespBytes = true, u.end, u.class, u.resp
	}
	p.out = append(p.out, e)
}

func (p *Parser) emitMany(u *unit, hasResp bool, end uint64, resp int, class l7.Class) {
	e := l7.Exchange{HasRequest: true, Start: u.start, API: u.api}
	if hasResp {
		e.HasResponse, e.End, e.Class, e.RespBytes = true, end, class, resp
	}
	p.out = append(p.out, e)
}

// Frontend messages.

func (p *Parser) onClient(m *msg) {
	switch p.phase {
	case phStartup:
		if m.typ == 0 {
			p.startup(m)
			return
		}
		p.phase = phReady
	case phAuth:
		if m.typ == 'p' {
			// Password, SASL and GSS responses.
			if f := p.front(); f != nil && f.kind == uLogin {
				f.req += m.size
			}
			return
		}
		// A client sends queries only after ReadyForQuery: the end of the
		// authentication was lost in a gap.
		p.phase = phReady
		if f := p.front(); f != nil && f.kind == uLogin {
			p.pop()
		}
	case phDead:
		return
	}
	body := m.body()
	switch m.typ {
	case 'Q':
		p.flushBuilding()
		sql, rest := cut(body)
		p.push(unit{kind: uQuery, start: m.ts, req: m.size, api: p.tp.Template(sql, sqlapi.Postgres, rest == nil)})
	case 'P':
		p.add(m, 1)
		name, rest := cut(body)
		if rest == nil {
			// The gap cut the statement name: nothing more is known.
			p.building.api, p.bLast = "", 0
			break
		}
		sql, tail := cut(rest)
		api := p.tp.Template(sql, sqlapi.Postgres, tail == nil)
		if len(name) == 0 {
			p.unnamedStmt = api
		} else {
			p.stmts.Put(sqlapi.Key(name), api)
		}
		p.building.api = api
		p.bLast, p.bName = 'P', len(name)
	case 'B':
		p.add(m, 1)
		portalName, rest := cut(body)
		stmtName, _ := cut(rest)
		api := p.stmtAPI(stmtName)
		p.setPortal(portalName, api)
		p.building.api = api
		p.bLast = 0
		if len(portalName) == 0 && (!m.cut || len(rest) > 0) {
			p.bLast = 'B'
		}
	case 'D':
		kind := byte(0)
		if len(body) > 0 {
			kind = body[0]
		}
		need := int32(1)
		if kind == 'S' {
			need = 2 // ParameterDescription, then RowDescription or NoData
		}
		p.add(m, need)
		if p.building.api == "" && len(body) > 0 {
			name, _ := cut(body[1:])
			if kind == 'S' {
				p.building.api = p.stmtAPI(name)
			} else {
				p.building.api = p.portalAPI(name)
			}
		}
	case 'C':
		p.add(m, 1)
		if len(body) > 0 && body[0] == 'S' {
			if name, _ := cut(body[1:]); len(name) > 0 {
				p.stmts.Delete(sqlapi.Key(name))
			}
		}
	case 'E':
		p.add(m, 0)
		name, _ := cut(body)
		u := p.building
		u.kind = uExec
		u.api = p.portalAPI(name)
		p.building, p.bOps = unit{}, false
		p.push(u)
	case 'S':
		p.flushBuilding()
		p.push(unit{kind: uSync, start: m.ts, req: m.size})
	case 'H':
		p.flushBuilding()
	case 'X':
		// Terminate: the client has read every answer it wanted.
		p.settleSuspect()
	case 'F':
		p.flushBuilding()
		p.push(unit{kind: uFunc, start: m.ts, req: m.size, api: "FUNCTION CALL"})
	case 'd', 'c', 'f':
		// COPY FROM STDIN data belongs to the request that started it.
		if p.qLen > 0 {
			p.at(p.qLen - 1).req += m.size
		}
	}
}

// add adds an extended-protocol message to the unit being built.
func (p *Parser) add(m *msg, need int32) {
	if !p.bOps {
		p.building = unit{start: m.ts}
		p.bOps = true
	}
	p.building.req += m.size
	p.building.need += need
	p.bLast = 0
}

// flushBuilding queues messages sent without an Execute (a prepare, a
// close) as a group, answered by their intermediate responses.
func (p *Parser) flushBuilding() {
	if !p.bOps {
		return
	}
	u := p.building
	u.kind = uGroup
	p.building, p.bOps = unit{}, false
	p.push(u)
}

func (p *Parser) stmtAPI(name []byte) string {
	if len(name) == 0 {
		return p.unnamedStmt
	}
	api, _ := p.stmts.Get(sqlapi.Key(name))
	return api
}

func (p *Parser) setPortal(name []byte, api string) {
	if len(name) == 0 {
		p.unnamedPortal = api
		return
	}
	k := sqlapi.Key(name)
	for i := range p.portals {
		if p.portals[i].key == k {
			p.portals[i].api = api
			return
		}
	}
	p.portals[p.portalNext] = portal{key: k, api: api}
	p.portalNext = (p.portalNext + 1) % len(p.portals)
}

func (p *Parser) portalAPI(name []byte) string {
	if len(name) == 0 {
		return p.unnamedPortal
	}
	k := sqlapi.Key(name)
	for i := range p.portals {
		if p.portals[i].key == k {
			return p.portals[i].api
		}
	}
	return ""
}

// startup handles an untyped startup-phase message.
func (p *Parser) startup(m *msg) {
	b := m.body()
	if len(b) < 4 {
		p.phase = phDead
		return
	}
	code := binary.BigEndian.Uint32(b)
	switch {
	case code == codeSSL || code == codeGSSENC:
		p.sslWait = true
		p.srv.single = true
	case code>>16 == codeV3Major:
		p.phase = phAuth
		p.push(unit{kind: uLogin, start: m.ts, req: m.size, api: "CONNECT"})
	default:
		// CancelRequest (a connection that carries nothing else) or a
		// protocol version this parser does not speak.
		p.phase = phDead
	}
}

// Backend messages.

func (p *Parser) onServer(m *msg) {
	if p.sslWait && m.size == 1 {
		p.sslWait = false
		switch m.typ {
		case 'S':
			// TLS: the TLS uprobes feed the decrypted streams from their
			// first bytes, which start with the startup message.
			p.cli.untyped = true
		case 'N':
			p.cli.untyped = true // the client goes on in plaintext (or gives up)
		default:
			p.phase = phDead // 'G': GSSAPI encryption, no plaintext to see
		}
		return
	}
	if p.phase == phAuth {
		p.authMessage(m)
		return
	}
	f := p.front()
	if f == nil {
		if m.typ == 'E' || m.typ == 'Z' || m.typ == 'C' {
			p.orphans++
		}
		return
	}
	if m.typ == 'Z' {
		p.readyForQuery(m)
		return
	}
	// Notices, notifications and parameter changes complete nothing, but
	// they are sent while a request is served: part of its response.
	p.touch(f, m)
	switch f.kind {
	case uLost:
		switch m.typ {
		case 'C', 'I', 's', 'E':
			u := *f
			if m.typ == 'E' {
				u.class = errClass(m)
			}
			p.emit(&u, true)
			f.api, f.req, f.hasResp, f.resp = "", 0, false, 0
			f.need++ // outcomes seen
		}
		return
	case uMany:
		p.manyMessage(f, m)
		return
	case uSync:
		if m.typ == 'E' {
			// The Sync itself failed: the implicit transaction's COMMIT.
			u := unit{start: f.start, api: "COMMIT", req: f.req, hasResp: true, end: m.ts, resp: m.size, class: errClass(m)}
			p.emit(&u, true)
		}
		return
	case uQuery, uFunc, uLogin:
		if m.typ == 'E' && !f.failed {
			f.failed, f.class = true, errClass(m)
		}
		return
	}
	// uExec, uGroup
	switch m.typ {
	case '1', '2', '3', 't', 'T', 'n':
		f.need--
		if f.kind == uGroup && f.need <= 0 {
			p.pop()
		}
	case 'C', 'I', 's':
		if f.kind == uExec {
			u := p.pop()
			p.emit(&u, true)
		}
	case 'E':
		u := p.pop()
		u.class = errClass(m)
		p.emit(&u, true)
		p.skipping = true
	}
}

// touch records that m belongs to f's response.
func (p *Parser) touch(f *unit, m *msg) {
	if !f.hasResp {
		f.hasResp, f.end = true, m.ts
	}
	f.resp += m.size
}

// readyForQuery pops the units a ReadyForQuery completes: every unit up to
// and including the first Sync, simple query or function call (units
// before it were skipped after an error).
func (p *Parser) readyForQuery(m *msg) {
	for p.qLen > 0 {
		f := p.front()
		switch f.kind {
		case uSync:
			p.pop()
			p.skipping = false
			return
		case uLost:
			p.pop()
			p.skipping = false
			return
		case uQuery, uFunc:
			p.touch(f, m)
			u := p.pop()
			p.emit(&u, true)
			p.skipping = false
			return
		case uMany:
			p.touch(f, m)
			p.manyMessage(f, m)
			return
		case uExec:
			// Skipped by the server after an earlier error: never executed.
			u := p.pop()
			if !p.skipping {
				// A ReadyForQuery before this Execute's outcome: the
				// parser lost track somewhere. Do not guess.
				p.desyncs++
				continue
			}
			p.emit(&u, false)
		default:
			p.pop()
		}
	}
	p.orphans++
}

// manyMessage applies a backend message to the aggregate at the front.
func (p *Parser) manyMessage(f *unit, m *msg) {
	switch m.typ {
	case 'C', 'I', 's', 'E':
		if f.need > 0 {
			class := l7.OK
			if m.typ == 'E' {
				class = errClass(m)
				p.skipping = true
			}
			f.need--
			p.emitMany(f, true, f.end, f.resp, class)
			f.hasResp, f.resp = false, 0
		}
	case 'Z':
		f.syncs--
		f.hasResp, f.resp = false, 0
		if f.syncs <= 0 {
			// Executes still due were skipped after an error.
			for ; f.need > 0; f.need-- {
				p.emitMany(f, false, 0, 0, l7.OK)
			}
			p.pop()
		}
		p.skipping = false
	}
}

// authMessage handles a backend message between the startup message and
// the first ReadyForQuery.
func (p *Parser) authMessage(m *msg) {
	f := p.front()
	switch m.typ {
	case 'Z':
		p.phase = phReady
		if f != nil && f.kind == uLogin {
			p.pop()
		}
	case 'E':
		// A failed login (bad password, unknown database, too many
		// connections) is an exchange; a successful one is not.
		if f != nil && f.kind == uLogin {
			p.touch(f, m)
			u := p.pop()
			u.class = errClass(m)
			p.emit(&u, true)
		}
	default:
		if f != nil && f.kind == uLogin {
			p.touch(f, m)
		}
	}
}

// errClass is the class of an ErrorResponse message.
func errClass(m *msg) l7.Class {
	c, _ := Outcome(m.head)
	return c
}

// cut splits b at its first NUL: the C string and what follows it. With
// no NUL (a truncated head), the whole of b is the string.
func cut(b []byte) ([]byte, []byte) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}
