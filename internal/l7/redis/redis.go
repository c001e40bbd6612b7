package redis

import (
	"bytes"

	"github.com/galago-project/galago/internal/l7"
)

// maxPending bounds the requests waiting for their replies on one
// connection (a pipeline deeper than this loses its pairing: see doc.go).
const maxPending = 1024

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a Redis request: a multibulk header
// "*<1-3 digits, first non-zero>\r\n$<non-zero digit>", or one of the
// inline commands typed first by hand (PING, AUTH, HELLO, SELECT, INFO,
// ECHO, QUIT, MONITOR, CLIENT, COMMAND, DBSIZE, FLUSHALL, FLUSHDB, KEYS,
// SUBSCRIBE, PSUBSCRIBE; upper case, followed by ' ', '\r' or '\n').
// Inline GET/SET are left out: "GET / HTTP/1.1" is HTTP and "get k\r\n"
// is memcached.
func Detect(b []byte) bool {
	if len(b) >= 6 && b[0] == '*' && b[1] >= '1' && b[1] <= '9' {
		i := 2
		for i < 4 && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return len(b) >= i+4 && b[i] == '\r' && b[i+1] == '\n' && b[i+2] == '$' && b[i+3] >= '1' && b[i+3] <= '9'
	}
	for _, w := range inlineFirst {
		if len(b) > len(w) && string(b[:len(w)]) == w {
			c := b[len(w)]
			return c == ' ' || c == '\r' || c == '\n'
		}
	}
	return false
}

var inlineFirst = [...]string{"PING", "AUTH", "HELLO", "SELECT", "INFO", "ECHO", "QUIT", "MONITOR", "CLIENT",
	"COMMAND", "DBSIZE", "FLUSHALL", "FLUSHDB", "KEYS", "SUBSCRIBE", "PSUBSCRIBE"}

// kind is what a request does to the conversation beyond its one reply.
type kind uint8

const (
	kNormal kind = iota
	// pub/sub commands get one reply per channel; replies of the same
	// names come for them (RESP2 arrays, RESP3 pushes)
	kSubscribe
	kPSubscribe
	kSSubscribe
	kUnsubscribe
	kPUnsubscribe
	kSUnsubscribe
	kMessage // a reply kind only: a published message (message, pmessage, smessage)
	kMonitor
	kHello
	kReset
	kReplyOn
	kReplyOff
	kReplySkip
	kBarrier  // not a request: a gap in which an unknown number of requests or replies went
	kOverflow // not a request: n requests beyond maxPending, known only by their number
)

func (k kind) pubsub() bool { return k >= kSubscribe && k <= kSUnsubscribe }

// pending is a request waiting for its reply (or a barrier).
type pending struct {
	ts, seq  uint64
	api      string
	size     int64
	expect   int64 // replies a pub/sub command still gets (-1: until its count reaches 0); kOverflow: requests
	kind     kind
	answered bool // a pub/sub command whose first reply came (its exchange is out)
	infer    bool // a barrier behind a gap in the requests: each reply to it stands for one
}

// Parser parses one connection's Redis conversation (see the package doc).
type Parser struct {
	reqDir    l7.Direction
	seq       uint64 // chunks fed
	req, resp stream
	q         []pending
	qh        int // index of the oldest pending entry in q
	desyncs   uint64

	resp3      bool // RESP3 replies seen: pub/sub replies are pushes, arrays are plain replies
	subscribed bool // RESP2 pub/sub mode: "message" arrays are not replies
	monitor    bool // MONITOR's +OK seen: "+<time> [...]" lines are not replies
	replyOff   bool // CLIENT REPLY OFF: no replies
	skipNext   bool // CLIENT REPLY SKIP: no reply for the next command

	in   *l7.Interner
	own  l7.Interner
	last string // the last template

	// The last multibulk request's bytes up to the end of its command
	// name, its template and kind (see template); lastCmdN 0 is none.
	lastCmd  [48]byte
	lastCmdN int
	lastAPI  string
	lastKind kind
}

var _ l7.Parser = (*Parser)(nil)

// NewParser returns a parser for one connection on which the observed
// process has the given role.
func NewParser(role l7.Role) *Parser {
	p := &Parser{reqDir: role.RequestDir()}
	p.in = &p.own
	return p
}

// SetInterner makes the parser intern the templates of commands it does
// not know (module commands, unknown names) in in, shared with other
// parsers fed from the same goroutine, instead of its own.
func (p *Parser) SetInterner(in *l7.Interner) {
	if in != nil {
		p.in = in
	}
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
		case evMessage:
			out = p.message(s, isReq, out)
		case evError:
			return p.desync(s, isReq, c.TS, out)
		}
	}
	if gap := int64(c.Size) - int64(len(c.Data)); gap > 0 {
		ev, ok := s.gap(gap)
		if !ok {
			return p.desync(s, isReq, c.TS, out)
		}
		if ev == evMessage {
			out = p.message(s, isReq, out)
		}
	}
	return out
}

// Flush implements l7.Parser: the requests still waiting for a reply (a
// reply cut short by the close answers the oldest).
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	if s := &p.resp; s.m.open && len(s.cur) > 0 {
		out = p.message(s, false, out)
	}
	for i := p.qh; i < len(p.q); i++ {
		e := &p.q[i]
		switch {
		case e.kind == kOverflow:
			for range e.expect {
				out = append(out, l7.Exchange{HasRequest: true, Start: e.ts, API: e.api})
			}
		case e.kind != kBarrier && !e.answered:
			out = append(out, l7.Exchange{HasRequest: true, Start: e.ts, API: e.api, ReqBytes: int(e.size)})
		}
	}
	p.q, p.qh = p.q[:0], 0
	p.req.reset()
	p.resp.reset()
	p.req.lost, p.resp.lost = false, false
	return out
}

// message handles the message s just completed (or, after a desync, the
// start of one).
func (p *Parser) message(s *stream, isReq bool, out []l7.Exchange) []l7.Exchange {
	s.m.open = false
	head := s.cur
	s.cur = nil
	if isReq {
		return p.request(s, head, out)
	}
	return p.reply(&s.m, head, out)
}

func (p *Parser) request(s *stream, head []byte, out []l7.Exchange) []l7.Exchange {
	m := &s.m
	nargs := m.count
	if s.inline {
		nargs = inlineWords(head)
	} else if m.top != '*' || m.count <= 0 {
		return out // "*0", "*-1": Redis reads no command and sends nothing
	}
	e := pending{ts: m.ts, seq: m.seq, size: m.size}
	e.api, e.kind = p.template(head)
	if e.kind.pubsub() {
		switch {
		case nargs > 1:
			e.expect = nargs - 1 // one reply per channel
		case e.kind >= kUnsubscribe && nargs == 1:
			e.expect = -1 // one per channel subscribed to, whose number is in each reply
		default:
			e.expect = 1 // an error
		}
	}
	// CLIENT REPLY OFF and SKIP are not answered, nor what they silence;
	// CLIENT REPLY ON is.
	switch {
	case e.kind == kReplyOn:
		p.replyOff, p.skipNext = false, false
	case e.kind == kReplyOff:
		p.replyOff = true
		return append(out, noReply(&e))
	case e.kind == kReplySkip:
		if !p.replyOff {
			p.skipNext = true
		}
		return append(out, noReply(&e))
	case p.replyOff:
		return append(out, noReply(&e))
	case p.skipNext:
		p.skipNext = false
		return append(out, noReply(&e))
	}
	if n := len(p.q); n-p.qh >= maxPending || n > p.qh && p.q[n-1].kind == kOverflow {
		// A pipeline deeper than maxPending: the requests beyond are
		// counted, not kept, so their replies still pair in order but
		// lose their start (the first one's), template (kept when they
		// all share it) and size. Counted once as a desync.
		if t := &p.q[n-1]; t.kind == kOverflow {
			t.expect++
			if t.api != e.api {
				t.api = ""
			}
			return out
		}
		p.desyncs++
		e.kind, e.expect, e.size = kOverflow, 1, 0
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

func noReply(e *pending) l7.Exchange {
	return l7.Exchange{HasRequest: true, Start: e.ts, API: e.api, ReqBytes: int(e.size)}
}

// template returns the template and kind of the request that head
// starts ("" when it has none). Clients send the same commands again and
// again: when a multibulk request's name alone makes its template (no
// subcommand), the bytes up to the name's end are kept, and a request
// that begins with the same bytes has the same template and kind.
func (p *Parser) template(head []byte) (string, kind) {
	if n := p.lastCmdN; n > 0 && len(head) >= n && string(head[:n]) == string(p.lastCmd[:n]) {
		return p.lastAPI, p.lastKind
	}
	var buf [2*maxName + 1]byte
	b, ok := AppendAPI(buf[:0], head)
	if !ok {
		return "", kNormal
	}
	api := p.intern(b)
	k := kindOf(api, head)
	// b is the upper-cased name alone unless a subcommand follows it (a
	// container command's: CONFIG GET), or would have, past the head.
	if n := nameEnd(head); n > 0 && n <= len(p.lastCmd) && bytes.IndexByte(b, ' ') < 0 && !container(b) {
		p.lastCmdN = copy(p.lastCmd[:], head[:n])
		p.lastAPI, p.lastKind = api, k
	}
	return api, k
}

func (p *Parser) intern(b []byte) string {
	if string(b) == p.last { // the same command again, as pipelines and loops send it
		return p.last
	}
	if s, ok := known[string(b)]; ok {
		p.last = s
		return s
	}
	p.last = p.in.Intern(b)
	return p.last
}

func kindOf(api string, head []byte) kind {
	switch api {
	case "SUBSCRIBE":
		return kSubscribe
	case "PSUBSCRIBE":
		return kPSubscribe
	case "SSUBSCRIBE":
		return kSSubscribe
	case "UNSUBSCRIBE":
		return kUnsubscribe
	case "PUNSUBSCRIBE":
		return kPUnsubscribe
	case "SUNSUBSCRIBE":
		return kSUnsubscribe
	case "MONITOR":
		return kMonitor
	case "HELLO":
		return kHello
	case "RESET":
		return kReset
	case "CLIENT REPLY":
		var buf [8]byte
		if a, ok := reqArg(head, 2); ok && len(a) <= len(buf) {
			switch string(appendUpper(buf[:0], a)) {
			case "ON":
				return kReplyOn
			case "OFF":
				return kReplyOff
			case "SKIP":
				return kReplySkip
			}
		}
	}
	return kNormal
}

// inlineWords counts the words of an inline command in its head.
func inlineWords(head []byte) int64 {
	var n int64
	in := false
	for _, c := range head {
		if c == '\r' || c == '\n' {
			break
		}
		w := c != ' ' && c != '\t'
		if w && !in {
			n++
		}
		in = w
	}
	return n
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

// reply pairs a complete reply with the oldest request waiting for one,
// unless it answers no request: a RESP3 push, a published message, a
// MONITOR line.
func (p *Parser) reply(m *msg, head []byte, out []l7.Exchange) []l7.Exchange {
	t := m.top
	switch t {
	case '%', '~', '>', '_', ',', '#', '(', '=', '!':
		p.resp3 = true
	}
	rk := kNormal
	if t == '>' || t == '*' && !p.resp3 {
		rk = pubsubKind(head)
	}
	e := p.front()
	for e != nil {
		switch {
		case e.answered && e.kind != rk:
			// A pub/sub command whose replies came is done once another
			// reply comes.
		case e.kind == kBarrier && p.qh+1 < len(p.q) && m.seq > p.q[p.qh+1].seq:
			// A reply that began after the first request that followed
			// the gap is not one to a request the gap hid.
		default:
			goto resolved
		}
		p.pop()
		e = p.front()
	}
resolved:
	switch {
	case rk == kMessage:
		if t == '>' || p.subscribed || e == nil {
			p.subscribed = p.subscribed || t == '*'
			return out
		}
	case rk.pubsub():
		if m.hasThird {
			p.subscribed = m.third > 0
		}
		if (e == nil || e.kind != rk) && (t == '>' || p.subscribed || e == nil) {
			return out // a server-initiated (un)subscription, e.g. a slot migration's sunsubscribe
		}
	case t == '>':
		return out // invalidation and other pushes
	case t == '+' && p.monitor && monitorLine(head):
		return out
	}
	switch {
	case e == nil:
		p.desyncs++ // a reply to no request seen: capture began mid-conversation
		return out
	case e.kind == kBarrier:
		// A reply to a request the gap hid. Where the gap was on the
		// request side and replies still parse, each reply stands for one
		// hidden request: it started in the chunk of the gap (or in one
		// skipped after it), its template is unknown.
		if e.infer {
			out = append(out, l7.Exchange{
				HasRequest: true, HasResponse: true, Start: e.ts, End: m.ts,
				Class: ReplyClass(head), RespBytes: int(m.size),
			})
		}
		return out
	case e.kind == kOverflow:
		out = append(out, l7.Exchange{
			HasRequest: true, HasResponse: true, Start: e.ts, End: m.ts,
			Class: ReplyClass(head), API: e.api, RespBytes: int(m.size),
		})
		if e.expect--; e.expect == 0 {
			p.pop()
		}
		return out
	case e.answered: // rk == e.kind: one more reply of the same command
		p.more(e, m)
		return out
	}
	// The exchange is written in place: built aside and copied, its
	// narrow field stores stall the copy's wide loads.
	out = append(out, l7.Exchange{})
	x := &out[len(out)-1]
	x.HasRequest, x.HasResponse, x.Start, x.End = true, true, e.ts, m.ts
	x.Class, x.API, x.ReqBytes, x.RespBytes = ReplyClass(head), e.api, int(e.size), int(m.size)
	switch e.kind {
	case kMonitor:
		p.monitor = p.monitor || t == '+'
	case kHello:
		switch t {
		case '%':
			p.resp3 = true
		case '*':
			p.resp3 = false
		}
	case kReset:
		if t == '+' {
			p.resp3, p.subscribed, p.monitor = false, false, false
		}
	}
	if e.kind.pubsub() && rk == e.kind {
		e.answered = true
		p.more(e, m)
		return out
	}
	p.pop()
	return out
}

// more counts one more reply of the pub/sub command e.
func (p *Parser) more(e *pending, m *msg) {
	if e.expect > 0 {
		e.expect--
		if e.expect == 0 {
			p.pop()
		}
		return
	}
	if m.hasThird && m.third == 0 {
		p.pop() // an argument-less UNSUBSCRIBE ends at the reply that leaves no subscription
	}
}

// desync handles lost boundaries in s: what was read of the message in
// progress still counts, then s waits for a chunk that starts a message,
// and a barrier in the queue keeps the replies to what the gap hid from
// being paired with later requests.
func (p *Parser) desync(s *stream, isReq bool, ts uint64, out []l7.Exchange) []l7.Exchange {
	p.desyncs++
	if s.m.open && len(s.cur) > 0 {
		out = p.message(s, isReq, out)
	}
	s.reset()
	s.lost = true
	if !isReq {
		// The gap may hold the replies to any of the pending requests.
		p.q, p.qh = p.q[:0], 0
	}
	if n := len(p.q); n == p.qh || p.q[n-1].kind != kBarrier {
		p.q = append(p.q, pending{kind: kBarrier, seq: p.seq, ts: ts, infer: isReq})
	}
	return out
}

// pubsubKind is the kind of a pub/sub reply from its head: an array or
// push whose first element names it.
func pubsubKind(head []byte) kind {
	_, rest, ok := header(head)
	if !ok || len(rest) == 0 {
		return kNormal
	}
	var w []byte
	switch rest[0] {
	case '$':
		l, body, ok := header(rest)
		if !ok || l < 0 || l > 12 || l > int64(len(body)) {
			return kNormal
		}
		w = body[:l]
	case '+':
		for i := 1; i < len(rest) && i < 14; i++ {
			if rest[i] == '\r' {
				w = rest[1:i]
				break
			}
		}
	}
	switch string(w) {
	case "message", "pmessage", "smessage":
		return kMessage
	case "subscribe":
		return kSubscribe
	case "psubscribe":
		return kPSubscribe
	case "ssubscribe":
		return kSSubscribe
	case "unsubscribe":
		return kUnsubscribe
	case "punsubscribe":
		return kPUnsubscribe
	case "sunsubscribe":
		return kSUnsubscribe
	}
	return kNormal
}

// monitorLine reports whether a simple string is a MONITOR feed line:
// "+<seconds>.<micros> [<db> <client>] ...".
func monitorLine(head []byte) bool {
	i := 1
	for i < len(head) && head[i] >= '0' && head[i] <= '9' {
		i++
	}
	if i == 1 || i >= len(head) || head[i] != '.' {
		return false
	}
	i++
	j := i
	for i < len(head) && head[i] >= '0' && head[i] <= '9' {
		i++
	}
	return i > j && i+1 < len(head) && head[i] == ' ' && head[i+1] == '['
}
