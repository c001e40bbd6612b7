package mysql

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/sqlapi"
)

// MaxPending bounds the commands a connection may have in flight that the
// parser tracks; MySQL clients send one command at a time, pipelining
// connectors a few.
const MaxPending = 64

// Commands.
const (
	comQuit             = 0x01
	comInitDB           = 0x02
	comQuery            = 0x03
	comFieldList        = 0x04
	comStatistics       = 0x09
	comProcessInfo      = 0x0a
	comChangeUser       = 0x11
	comBinlogDump       = 0x12
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comStmtReset        = 0x1a
	comStmtFetch        = 0x1c
	comBinlogDumpGTID   = 0x1e
	comResetConnection  = 0x1f
	comStmtBulkExecute  = 0xfa // MariaDB
)

// Capability flags (the client's, from its handshake response; MariaDB's
// extended ones in the upper 32 bits).
const (
	capMySQL                = 1 << 0 // MariaDB: clear when the extended capabilities are used
	capCompress             = 1 << 5
	capProtocol41           = 1 << 9
	capSSL                  = 1 << 11
	capDeprecateEOF         = 1 << 24
	capOptionalMetadata     = 1 << 25
	capZstd                 = 1 << 26
	capMariaDBProgress      = 1 << 32
	capMariaDBCacheMetadata = 1 << 36
)

// Server status flags.
const (
	statusMoreResults  = 0x0008
	statusCursorExists = 0x0040
)

type phase uint8

const (
	phStart     phase = iota // nothing seen yet
	phHandshake              // greeting seen: the client's handshake response is due
	phAuth                   // handshake response sent: authentication until OK
	phCommand                // command phase
	phDead                   // nothing more to parse (compression)
)

// unitKind says whether a command is an exchange.
type unitKind uint8

const (
	kExchange unitKind = iota // a statement or a server command: an exchange
	kBookkeep                 // COM_STMT_PREPARE, COM_STMT_RESET: an exchange only if it fails
	kLogin                    // the handshake: an exchange only if it fails
	kLost                     // commands a gap hid: the response that comes for them
)

// state is where a command's response is.
type state uint8

const (
	stFirst      state = iota // the first packet of a response, or of the next result set
	stColumns                 // column definitions to come
	stColEOF                  // after the column definitions: an EOF, or the rows
	stRows                    // rows, up to a terminator
	stPrepParams              // COM_STMT_PREPARE_OK's parameter definitions
	stPrepParamsEOF
	stPrepCols
	stPrepColsEOF
	stFieldList // COM_FIELD_LIST: column definitions up to an EOF
)

// unit is one pending command.
type unit struct {
	start, end uint64
	api        string
	req, resp  int
	code       byte
	kind       unitKind
	st         state
	class      l7.Class
	hasResp    bool
	suspect    bool
	n          uint32 // definitions still to come in this state
	cols       uint32 // COM_STMT_PREPARE_OK: column definitions after the parameters
}

// Parser is a MySQL/MariaDB client/server protocol parser for one
// connection; see the package doc.
type Parser struct {
	role     l7.Role
	cli, srv stream
	phase    phase
	caps     uint64
	capsSet  bool

	q    [MaxPending]unit
	qHd  int
	qLen int

	stmts    sqlapi.Statements
	tp       sqlapi.Templater
	longData int    // COM_STMT_SEND_LONG_DATA bytes, part of the next execute
	longAPI  string // the statement those bytes are for

	out      []l7.Exchange
	desyncs  uint64
	orphans  uint64
	overflow uint64
}

// NewParser returns a parser for a connection where the observed process
// has the given role, with its own template interner.
func NewParser(role l7.Role) *Parser { return NewParserWith(role, nil) }

// NewParserWith is NewParser with a shared template interner (nil: its
// own): the probe passes one per goroutine so that every connection's
// templates are stored once.
func NewParserWith(role l7.Role, in *l7.Interner) *Parser {
	p := &Parser{role: role, cli: newStream(cliHeadCap), srv: newStream(srvHeadCap)}
	p.cli.exp[0] = 0 // a client may always start a command
	p.tp.In = in
	return p
}

// Desyncs implements l7.Parser.
func (p *Parser) Desyncs() uint64 { return p.desyncs }

// Orphans counts the responses that answered no command the parser saw
// (the capture began mid-connection, or their command was lost): dropped.
func (p *Parser) Orphans() uint64 { return p.orphans }

// Overflows counts the commands dropped because MaxPending were already
// in flight (each also counts in Desyncs).
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
		off := resync(data, c.Size, client)
		if off < 0 {
			p.out, out = nil, p.out
			return out
		}
		data = data[off:]
		s.lost, s.cont = false, false
		s.exp = [3]int16{-1, -1, -1}
		if client {
			s.exp[0] = 0
		}
	}
	var ok bool
	if client {
		ok, _ = s.feed(data, gap, c.TS, p.onClient)
	} else {
		ok, _ = s.feed(data, gap, c.TS, p.onServer)
	}
	if !ok {
		p.desync(client, c.TS)
	}
	p.out, out = nil, p.out
	return out
}

// desync handles lost packet boundaries in one direction.
func (p *Parser) desync(client bool, ts uint64) {
	p.desyncs++
	if client {
		// Packets were hidden after the last whole one. A placeholder
		// takes the response that comes for them, parsed as a statement's
		// (after COM_STMT_SEND_LONG_DATA, the hidden packet is that
		// statement's COM_STMT_EXECUTE: it gets its API). If the client's
		// next command comes first, the hidden packets had no response
		// (more long data) and the placeholder goes.
		p.cli.lost = true
		u := unit{start: ts, kind: kLost, code: comStmtExecute}
		if p.longData > 0 {
			u.api, u.req = p.longAPI, p.longData
			p.longData = 0
		}
		p.push(u)
		return
	}
	p.srv.lost = true
	if p.qLen <= 1 {
		// One command in flight (the rule with MySQL): the hidden bytes
		// belong to its response, which therefore started. Keep it and
		// resynchronise on a later chunk.
		if f := p.front(); f != nil {
			f.suspect = true
			if !f.hasResp {
				f.hasResp, f.end = true, ts
			}
		}
		return
	}
	p.dropPending()
}

func (p *Parser) dropPending() {
	for p.qLen > 0 {
		p.pop()
	}
}

// Flush implements l7.Parser: commands still waiting for a response.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	p.out = out
	for p.qLen > 0 {
		u := p.pop()
		switch {
		case u.kind == kExchange:
			// A response that started counts (an error, then the
			// connection closed); one that never did is missing.
			p.emit(&u, u.hasResp)
		case u.class != l7.OK || (u.kind == kLost && u.hasResp):
			p.emit(&u, true)
		}
	}
	p.out, out = nil, p.out
	return out
}

// Queue.

func (p *Parser) front() *unit {
	if p.qLen == 0 {
		return nil
	}
	return &p.q[p.qHd]
}

func (p *Parser) pop() unit {
	u := p.q[p.qHd]
	p.q[p.qHd] = unit{}
	p.qHd = (p.qHd + 1) % MaxPending
	p.qLen--
	return u
}

func (p *Parser) push(u unit) {
	p.settleSuspect()
	if p.qLen > 0 {
		if t := &p.q[(p.qHd+p.qLen-1)%MaxPending]; t.kind == kLost && !t.hasResp {
			*t = unit{}
			p.qLen--
		}
	}
	if p.qLen == MaxPending {
		// Dropped: its response will find no command (an orphan). Counted
		// as a desync too, so that the probe reports it as lost.
		p.overflow++
		p.desyncs++
		return
	}
	p.q[(p.qHd+p.qLen)%MaxPending] = u
	p.qLen++
}

// settleSuspect: a new command (or COM_QUIT) while a command whose
// response lost boundaries is in flight means that response was complete,
// or the client would not have gone on.
func (p *Parser) settleSuspect() {
	for p.qLen > 0 && p.front().suspect {
		v := p.pop()
		p.finish(&v)
	}
}

func (p *Parser) emit(u *unit, hasResp bool) {
	e := l7.Exchange{HasRequest: true, Start: u.start, API: u.api, ReqBytes: u.req}
	if hasResp && u.hasResp {
		e.HasResponse, e.End, e.Class, e.RespBytes = true, u.end, u.class, u.resp
	}
	p.out = append(p.out, e)
}

// Client packets.

func (p *Parser) onClient(m *pkt) {
	size := 4 + m.size
	// Next from the client: a command (0), or the sequence going on, after
	// its own packet or the server's; from the server: the sequence going
	// on after this packet.
	p.cli.exp[0], p.cli.exp[1] = 0, int16(m.seq+1)
	p.srv.exp[1] = int16(m.seq + 1)
	if m.cont {
		p.addReq(size)
		return
	}
	switch p.phase {
	case phStart, phHandshake:
		if m.seq == 0 {
			// A command: the capture began after the handshake.
			p.phase = phCommand
			break
		}
		p.handshakeResponse(m, size)
		return
	case phAuth:
		if m.seq != 0 {
			p.addReq(size) // authentication data
			return
		}
		// A command: the end of the authentication was lost in a gap.
		p.phase = phCommand
		if f := p.front(); f != nil && f.kind == kLogin {
			p.pop()
		}
	}
	if m.seq != 0 {
		// LOCAL INFILE data, COM_CHANGE_USER authentication data: part of
		// the command under way.
		p.addReq(size)
		return
	}
	if len(m.head) == 0 {
		return
	}
	code := m.head[0]
	body := m.head[1:]
	u := unit{start: m.ts, req: size, code: code, api: commandAPI(code)}
	switch code {
	case comQuery:
		u.api = p.tp.Template(body, sqlapi.MySQL, m.cut || len(m.head) < m.size)
	case comStmtPrepare:
		u.kind = kBookkeep
		u.api = p.tp.Template(body, sqlapi.MySQL, m.cut || len(m.head) < m.size)
	case comStmtExecute, comStmtBulkExecute, comStmtFetch, comStmtReset:
		if len(body) >= 4 {
			u.api, _ = p.stmts.Get(uint64(binary.LittleEndian.Uint32(body)))
		}
		if code == comStmtReset {
			u.kind = kBookkeep
		} else if code != comStmtFetch {
			u.req += p.longData
			p.longData = 0
		}
	case comStmtSendLongData:
		p.longData += size
		if len(body) >= 4 {
			p.longAPI, _ = p.stmts.Get(uint64(binary.LittleEndian.Uint32(body)))
		}
		return
	case comStmtClose:
		if len(body) >= 4 {
			p.stmts.Delete(uint64(binary.LittleEndian.Uint32(body)))
		}
		return
	case comQuit:
		p.settleSuspect()
		return
	case comResetConnection, comChangeUser:
		p.stmts.Reset()
	}
	p.push(u)
}

func (p *Parser) addReq(n int) {
	if p.qLen > 0 {
		p.q[(p.qHd+p.qLen-1)%MaxPending].req += n
	}
}

// handshakeResponse handles the client's packet after the greeting: an
// SSLRequest (TLS follows: the TLS uprobes then feed the decrypted
// handshake response, sequence 2) or the HandshakeResponse41.
func (p *Parser) handshakeResponse(m *pkt, size int) {
	if !isHandshakeResponse(m.head) {
		// Not one (the capture began during an authentication exchange):
		// the commands to come will tell.
		p.phase = phCommand
		return
	}
	caps := uint64(binary.LittleEndian.Uint32(m.head))
	if caps&capMySQL == 0 && len(m.head) >= 32 {
		caps |= uint64(binary.LittleEndian.Uint32(m.head[28:])) << 32
	}
	p.caps, p.capsSet = caps, true
	if caps&capSSL != 0 && m.size == 32 {
		p.phase = phHandshake // the handshake response comes next, over TLS
		return
	}
	if caps&(capCompress|capZstd) != 0 {
		// The compressed protocol wraps packets in another framing.
		p.phase = phDead
		return
	}
	p.phase = phAuth
	p.push(unit{start: m.ts, req: size, kind: kLogin, api: "CONNECT"})
}

// isHandshakeResponse checks a payload for the HandshakeResponse41 (and
// SSLRequest) signature Detect checks: CLIENT_PROTOCOL_41, a character
// set, then 19 zero bytes of filler.
func isHandshakeResponse(h []byte) bool {
	if len(h) < 28 || binary.LittleEndian.Uint32(h)&capProtocol41 == 0 || h[8] == 0 {
		return false
	}
	for _, c := range h[9:28] {
		if c != 0 {
			return false
		}
	}
	return true
}

// commandAPI is the API of a command other than a statement.
func commandAPI(code byte) string {
	switch code {
	case comInitDB:
		return "USE"
	case comFieldList:
		return "FIELD LIST"
	case 0x05:
		return "CREATE DATABASE"
	case 0x06:
		return "DROP DATABASE"
	case 0x07:
		return "REFRESH"
	case 0x08:
		return "SHUTDOWN"
	case comStatistics:
		return "STATISTICS"
	case comProcessInfo:
		return "PROCESSLIST"
	case 0x0c:
		return "KILL"
	case 0x0d:
		return "DEBUG"
	case 0x0e:
		return "PING"
	case comChangeUser:
		return "CHANGE USER"
	case comBinlogDump, comBinlogDumpGTID:
		return "BINLOG DUMP"
	case 0x15:
		return "REGISTER SLAVE"
	case 0x1b:
		return "SET OPTION"
	case comResetConnection:
		return "RESET CONNECTION"
	}
	return ""
}

func isCommand(c byte) bool { return (c >= 0x01 && c <= 0x21) || c == comStmtBulkExecute }

// Server packets.

func (p *Parser) onServer(m *pkt) {
	size := 4 + m.size
	p.srv.exp[0] = int16(m.seq + 1)
	p.cli.exp[2] = int16(m.seq + 1)
	switch p.phase {
	case phStart, phHandshake:
		switch {
		case p.phase == phStart && m.seq == 0 && len(m.head) > 0 && m.head[0] == 10:
			p.phase = phHandshake // the greeting
			return
		case m.seq == 0 && len(m.head) > 0 && m.head[0] == 0xff:
			// An error instead of the greeting (too many connections, a
			// blocked host): the connection attempt failed before the
			// client could send anything.
			p.out = append(p.out, l7.Exchange{HasResponse: true, End: m.ts, Class: p.errClass(m), API: "CONNECT", RespBytes: size})
			p.phase = phDead
			return
		case p.phase == phHandshake:
			return
		}
		p.phase = phCommand // the capture began after the handshake
	case phAuth:
		p.authPacket(m, size)
		return
	}
	f := p.front()
	if f == nil {
		p.orphans++
		return
	}
	if p.endsBefore(f, m) {
		u := p.pop()
		p.finish(&u)
		if f = p.front(); f == nil {
			p.orphans++
			return
		}
	}
	if !f.hasResp {
		f.hasResp, f.end = true, m.ts
	}
	f.resp += size
	if m.cont {
		return
	}
	if p.response(f, m) {
		u := p.pop()
		p.finish(&u)
	}
}

// finish emits a completed command's exchange, if it is one.
func (p *Parser) finish(u *unit) {
	if u.kind == kExchange || u.kind == kLost || u.class != l7.OK {
		p.emit(u, true)
	}
	if u.code == comBinlogDump || u.code == comBinlogDumpGTID {
		// A replication stream follows: events, not responses.
		p.phase = phDead
	}
}

// endsBefore reports whether f's response ended before m: with the
// client's capabilities unknown, a COM_STMT_PREPARE_OK's definitions may
// or may not be followed by an EOF.
func (p *Parser) endsBefore(f *unit, m *pkt) bool {
	switch f.st {
	case stPrepColsEOF:
		return !isEOF(m)
	case stPrepParamsEOF:
		return f.cols == 0 && !isEOF(m)
	}
	return false
}

// authPacket handles a server packet between the handshake response and
// the end of the authentication.
func (p *Parser) authPacket(m *pkt, size int) {
	f := p.front()
	if f != nil && f.kind == kLogin {
		if !f.hasResp {
			f.hasResp, f.end = true, m.ts
		}
		f.resp += size
	}
	if len(m.head) == 0 {
		return
	}
	switch m.head[0] {
	case 0x00: // OK: authenticated; a successful login is no exchange
		p.phase = phCommand
		if f != nil && f.kind == kLogin {
			p.pop()
		}
	case 0xff:
		if f != nil && f.kind == kLogin {
			u := p.pop()
			u.class = p.errClass(m)
			p.emit(&u, true)
		}
		// 0xfe AuthSwitchRequest, 0x01 AuthMoreData: the exchange goes on.
	}
}

// response applies a packet to the command at the front; true when it
// ends the command's response.
func (p *Parser) response(f *unit, m *pkt) bool {
	h := m.head
	if len(h) == 0 {
		return false
	}
	first := h[0]
	if first == 0xff {
		// ERR: no row, column definition or OK starts with 0xff.
		if m.size >= 3 && binary.LittleEndian.Uint16(h[1:]) == 0xffff {
			return false // MariaDB progress report, not an error
		}
		f.class = p.errClass(m)
		return true
	}
	switch f.st {
	case stFirst:
		return p.firstPacket(f, m)
	case stColumns:
		if f.n--; f.n == 0 {
			f.st = stColEOF
			if p.capsSet && p.caps&capDeprecateEOF != 0 {
				f.st = stRows
			}
		}
	case stColEOF:
		if isEOF(m) {
			// The end of the column definitions. A cursor opened by
			// COM_STMT_EXECUTE ends the response here: the rows come
			// with COM_STMT_FETCH.
			f.st = stRows
			return eofStatus(h)&statusCursorExists != 0
		}
		f.st = stRows
		return p.rowPacket(f, m)
	case stRows:
		return p.rowPacket(f, m)
	case stPrepParams:
		if f.n--; f.n == 0 {
			if p.capsSet && p.caps&capDeprecateEOF != 0 {
				return p.prepColumns(f)
			}
			f.st = stPrepParamsEOF
		}
	case stPrepParamsEOF:
		if isEOF(m) {
			return p.prepColumns(f)
		}
		// No EOF (CLIENT_DEPRECATE_EOF with unknown capabilities): the
		// first column definition (endsBefore saw to the case of none).
		return p.prepColumns(f) || p.response(f, m)
	case stPrepCols:
		if f.n--; f.n == 0 {
			f.st = stPrepColsEOF
			return p.capsSet && p.caps&capDeprecateEOF != 0
		}
	case stPrepColsEOF:
		return true // the EOF (endsBefore saw to anything else)
	case stFieldList:
		return first == 0xfe && m.size < 9
	}
	return false
}

// firstPacket handles the first packet of a response (or of the next
// result set of a multi-result response).
func (p *Parser) firstPacket(f *unit, m *pkt) bool {
	h := m.head
	switch f.code {
	case comQuery, comStmtExecute, comStmtBulkExecute, comProcessInfo:
	case comStmtFetch:
		f.st = stRows
		return p.rowPacket(f, m)
	case comStmtPrepare:
		if h[0] != 0x00 || len(h) < 9 {
			return true
		}
		p.stmts.Put(uint64(binary.LittleEndian.Uint32(h[1:])), f.api)
		f.cols = uint32(binary.LittleEndian.Uint16(h[5:]))
		params := uint32(binary.LittleEndian.Uint16(h[7:]))
		if params > 0 {
			f.st, f.n = stPrepParams, params
			return false
		}
		return p.prepColumns(f)
	case comFieldList:
		f.st = stFieldList
		return p.response(f, m)
	case comChangeUser:
		return h[0] == 0x00 // AuthSwitchRequest and AuthMoreData go on
	default:
		return true // OK, ERR, EOF, a statistics string, the first binlog event
	}
	switch {
	case h[0] == 0x00 || (h[0] == 0xfe && m.size < 9):
		// OK (or EOF): the last result unless more follow.
		return okStatus(m)&statusMoreResults == 0
	case h[0] == 0xfb:
		// LOCAL INFILE: the client sends the file, then the server's
		// OK or ERR ends the response.
		return false
	}
	// A result set: its column count (MySQL's optional metadata flag
	// before it, MariaDB's cached metadata flag after it).
	b := h
	withMeta := true
	if p.caps&capOptionalMetadata != 0 && len(b) > 0 {
		withMeta = b[0] == 1
		b = b[1:]
	}
	n, k := lenenc(b)
	if k == 0 || n == 0 {
		return true
	}
	if p.caps&capMariaDBCacheMetadata != 0 && len(b) > k {
		withMeta = b[k] == 1
	}
	f.st, f.n = stColumns, uint32(min(n, 1<<16))
	if !withMeta {
		f.st = stColEOF
		if p.capsSet && p.caps&capDeprecateEOF != 0 {
			f.st = stRows
		}
	}
	return false
}

// rowPacket handles a packet where rows are due: a row, or the terminator
// (an EOF, or with CLIENT_DEPRECATE_EOF an OK with a 0xfe header: a 0xfe
// packet shorter than a maximal one, as a row starting with 0xfe holds a
// value of 16 MiB or more).
func (p *Parser) rowPacket(f *unit, m *pkt) bool {
	if m.head[0] != 0xfe || m.size >= maxPayload {
		return false
	}
	var status uint16
	if m.size < 9 && m.size >= 5 {
		status = eofStatus(m.head)
	} else {
		status = okStatus(m)
	}
	if status&statusMoreResults != 0 {
		f.st = stFirst
		return false
	}
	return true
}

func (p *Parser) prepColumns(f *unit) bool {
	if f.cols == 0 {
		return true
	}
	f.st, f.n = stPrepCols, f.cols
	return false
}

// isEOF reports whether m is an EOF packet (0xfe, 5 bytes: never a row,
// never an OK).
func isEOF(m *pkt) bool { return m.size == 5 && len(m.head) > 0 && m.head[0] == 0xfe }

// eofStatus is an EOF packet's status flags (after its warning count).
func eofStatus(h []byte) uint16 {
	if len(h) < 5 {
		return 0
	}
	return binary.LittleEndian.Uint16(h[3:])
}

// okStatus is an OK packet's status flags (after two length-encoded
// integers).
func okStatus(m *pkt) uint16 {
	h := m.head
	if len(h) == 0 {
		return 0
	}
	if h[0] == 0xfe && m.size < 9 {
		return eofStatus(h)
	}
	b := h[1:]
	for range 2 {
		_, k := lenenc(b)
		if k == 0 {
			return 0
		}
		b = b[k:]
	}
	if len(b) < 2 {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

// lenenc decodes a length-encoded integer: its value and size (0: cut or
// invalid).
func lenenc(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	switch c := b[0]; {
	case c < 0xfb:
		return uint64(c), 1
	case c == 0xfc && len(b) >= 3:
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3
	case c == 0xfd && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4
	case c == 0xfe && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), 9
	}
	return 0, 0
}

func (p *Parser) errClass(m *pkt) l7.Class {
	c, _ := errOutcome(m.head)
	return c
}
