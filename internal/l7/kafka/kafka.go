package kafka

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/ident"
	"github.com/galago-project/galago/internal/l7/internal/lenframe"
)

const (
	// maxMessage bounds a declared message length (Kafka's own defaults:
	// socket.request.max.bytes 100 MiB, fetch responses up to
	// fetch.max.bytes 50 MiB); a larger one is taken for garbage.
	maxMessage = 1 << 30
	// maxPending bounds the requests awaiting a response on a connection;
	// past it the oldest is given up (HasResponse false).
	maxPending = 256
	// versionSlack lets versions newer than this package knows through the
	// framer (their bodies are not read).
	versionSlack = 16
	// maxAPI is the longest API template.
	maxAPI = 128
)

// Detect reports whether b, the first bytes a client sent on a
// connection, starts a Kafka request. See the package doc for the exact
// signature; it reads at most the first 32 bytes.
func Detect(b []byte) bool {
	if len(b) < 14 {
		return false
	}
	n := binary.BigEndian.Uint32(b)
	key := int16(binary.BigEndian.Uint16(b[4:]))
	ver := int16(binary.BigEndian.Uint16(b[6:]))
	corr := int32(binary.BigEndian.Uint32(b[8:]))
	cid := int(int16(binary.BigEndian.Uint16(b[12:])))
	if n < 10 || n > 64<<20 || !knownVersion(key, ver) || corr < 0 || cid < -1 || cid > int(n)-10 {
		return false
	}
	for i := 14; i < 14+cid && i < 32 && i < len(b); i++ {
		if b[i] < 0x20 || b[i] > 0x7e {
			return false
		}
	}
	return true
}

// Kind is what gala-gopher's kafkaprobe calls msg_type: a topic produced
// to, or fetched (consumed) from.
type Kind uint8

const (
	Produce Kind = 1
	Fetch   Kind = 2
)

// String returns kafkaprobe's msg_type value.
func (k Kind) String() string {
	switch k {
	case Produce:
		return "Producer"
	case Fetch:
		return "Consumer"
	}
	return "Unknown"
}

// TopicRecords is one topic of a Produce request or of a Fetch response:
// what gala-gopher's kafkaprobe counts (msg_type, topic, num).
type TopicRecords struct {
	Kind Kind
	// Topic is the topic's name (interned); "" when the message gave only
	// a topic id that no Metadata response on the shared TopicNames named.
	Topic string
	// TopicID is the topic id of versions that use ids (Produce v13+,
	// Fetch v13+), zero otherwise.
	TopicID [16]byte
	// Records counts the records of the topic's complete record batches
	// (a v2 batch's record count; one per legacy message).
	Records int
	// Exact is false when a capture gap hid a batch header, or a batch
	// claimed a negative record count (garbage), so that Records misses
	// the batches from there on.
	Exact bool
}

// TopicNames maps topic ids to names, learnt from Metadata responses
// (v10+). Fetch and Produce use ids from v13 on, and clients ask for
// metadata on another connection than the one they fetch on, so the probe
// should share one TopicNames among the parsers of a process (or a
// service). Not safe for concurrent use.
type TopicNames struct {
	// Max bounds the entries (default 4096); past it new ids are not kept.
	Max int
	m   map[[16]byte]string
}

// Name returns the name of topic id.
func (t *TopicNames) Name(id [16]byte) (string, bool) {
	s, ok := t.m[id]
	return s, ok
}

func (t *TopicNames) learn(id [16]byte, name []byte, in *l7.Interner) {
	if s, ok := t.m[id]; ok && s == string(name) {
		return
	}
	limit := t.Max
	if limit <= 0 {
		limit = 4096
	}
	if t.m == nil {
		t.m = make(map[[16]byte]string)
	}
	if _, ok := t.m[id]; ok || len(t.m) < limit {
		t.m[id] = in.Intern(name)
	}
}

type pending struct {
	corr      int32
	key, ver  int16
	ts        uint64
	size      int
	api       string
	responded bool
}

// Parser frames and pairs one Kafka connection. Responses are paired with
// requests by correlation id; Kafka answers in request order on a
// connection, so requests passed over by a response are given up
// (HasResponse false). Produce requests with acks=0 get no response and
// come out at once with HasResponse false. A response to a request that was
// not seen (capture began mid-connection) comes out with HasRequest false
// and class OK: its body cannot be read without the request's version.
type Parser struct {
	// OnTopic, if set, is called for every topic of every Produce request
	// and Fetch response: the kafkaprobe's view.
	OnTopic func(TopicRecords)

	role       l7.Role
	reqF, resF lenframe.Framer
	reqS       reqSink
	resS       respSink
	reqW, resW walker

	// the request being read
	rKey, rVer int16
	rCorr      int32
	rTS        uint64
	rSize      int
	// the response being read
	sCorr    int32
	sMatched bool // a request waits for sCorr
	sTS      uint64
	sSize    int
	sKey     int16

	q  []pending
	qh int

	names     *TopicNames
	own       TopicNames
	in        l7.Interner
	tmpl      [maxAPI + 8]byte
	lastFetch string // the template of the connection's last Fetch naming a topic
	// the last Produce or Fetch template built from a topic name
	lastKey    int16
	lastMulti  bool
	lastTopic  [maxName]byte
	nLastTopic int
	lastAPI    string
	out        []l7.Exchange
	// hidden counts, with OnTopic set, the Produce requests and Fetch
	// responses whose layout a capture gap hid before their end.
	hidden uint64
}

type reqSink struct{ p *Parser }
type respSink struct{ p *Parser }

// NewParser returns a parser for one connection seen from role's side.
func NewParser(role l7.Role) *Parser {
	p := &Parser{role: role}
	p.names = &p.own
	p.reqS.p, p.resS.p = p, p
	p.reqF.HeaderLen, p.reqF.Length = 12, reqLength
	p.resF.HeaderLen, p.resF.Length = 8, p.respLength
	p.reqW.onTopic = p.reqTopic
	p.resW.onTopic = p.respTopic
	return p
}

// SetTopicNames makes the parser learn and resolve topic ids in t (shared
// with other parsers) instead of its own table.
func (p *Parser) SetTopicNames(t *TopicNames) {
	if t != nil {
		p.names = t
	}
}

// Hidden is how many Produce requests and Fetch responses, while OnTopic
// is set, had a capture gap over a field other than record bytes: the
// topics after it were not reported, their records not counted.
func (p *Parser) Hidden() uint64 { return p.hidden }

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

// Flush implements l7.Parser: the requests still waiting for a response.
func (p *Parser) Flush(out []l7.Exchange) []l7.Exchange {
	for i := p.qh; i < len(p.q); i++ {
		if !p.q[i].responded {
			out = append(out, p.unanswered(&p.q[i]))
		}
	}
	p.q, p.qh = p.q[:0], 0
	return out
}

func reqLength(h []byte) int {
	n := int(binary.BigEndian.Uint32(h))
	key := int16(binary.BigEndian.Uint16(h[4:]))
	ver := int16(binary.BigEndian.Uint16(h[6:]))
	corr := int32(binary.BigEndian.Uint32(h[8:]))
	if n < 8 || n > maxMessage || key < 0 || ver < 0 || corr < 0 {
		return -1
	}
	switch {
	case int(key) < len(apis):
		if ver > apis[key].maxVer+versionSlack {
			return -1
		}
	case int(key) >= len(apis)+versionSlack || ver > versionSlack:
		// API keys newer than this package are framed (their template is
		// empty) if close to the known ones, with small versions
		return -1
	}
	return n + 4
}

func (p *Parser) respLength(h []byte) int {
	n := int(binary.BigEndian.Uint32(h))
	if n < 4 || n > maxMessage {
		return -1
	}
	if p.resF.Lost() {
		// resynchronising: a length alone is too weak a signature, the
		// correlation id must be one a request is waiting for
		if p.find(int32(binary.BigEndian.Uint32(h[4:]))) < 0 {
			return -1
		}
	}
	return n + 4
}

func (p *Parser) find(corr int32) int {
	for i := p.qh; i < len(p.q); i++ {
		if p.q[i].corr == corr && !p.q[i].responded {
			return i
		}
	}
	return -1
}

func (s *reqSink) Start(h []byte, total int, ts uint64) {
	p := s.p
	p.rKey = int16(binary.BigEndian.Uint16(h[4:]))
	p.rVer = int16(binary.BigEndian.Uint16(h[6:]))
	p.rCorr = int32(binary.BigEndian.Uint32(h[8:]))
	p.rTS, p.rSize = ts, total
	var prog []instr
	switch {
	case !knownVersion(p.rKey, p.rVer):
	case p.OnTopic != nil:
		prog = reqProgsRecords[p.rKey][p.rVer]
	default:
		prog = reqProgs[p.rKey][p.rVer]
	}
	p.reqW.reset(prog)
}

func (s *reqSink) Data(b []byte) { s.p.reqW.feed(b) }
func (s *reqSink) Gap(n int)     { s.p.reqW.gap(n) }

func (s *reqSink) End() {
	p := s.p
	w := &p.reqW
	w.feed(nil) // run what needs no bytes (array ends, topic reports)
	if w.dead && p.OnTopic != nil && p.rKey == keyProduce {
		p.hidden++
	}
	api := p.template(p.rKey, w)
	if p.rKey == keyProduce && w.acksSeen && w.acks == 0 {
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
	p.q = append(p.q, pending{corr: p.rCorr, key: p.rKey, ver: p.rVer, ts: p.rTS, size: p.rSize, api: api})
}

func (p *Parser) unanswered(q *pending) l7.Exchange {
	return l7.Exchange{HasRequest: true, Start: q.ts, API: q.api, ReqBytes: q.size}
}

func (s *respSink) Start(h []byte, total int, ts uint64) {
	p := s.p
	corr := int32(binary.BigEndian.Uint32(h[4:]))
	p.sTS, p.sSize, p.sCorr = ts, total, corr
	i := p.find(corr)
	p.sMatched, p.sKey = i >= 0, -1
	var prog []instr
	if i >= 0 {
		// Kafka answers a connection's requests in order: the ones this
		// response passed over will not be answered.
		for j := p.qh; j < i; j++ {
			if !p.q[j].responded {
				p.out = append(p.out, p.unanswered(&p.q[j]))
				p.q[j].responded = true
			}
		}
		q := &p.q[i]
		p.sKey = q.key
		if knownVersion(q.key, q.ver) {
			prog = respProgs[q.key][q.ver]
		}
	}
	p.resW.reset(prog)
}

func (s *respSink) Data(b []byte) { s.p.resW.feed(b) }
func (s *respSink) Gap(n int)     { s.p.resW.gap(n) }

func (s *respSink) End() {
	p := s.p
	w := &p.resW
	w.feed(nil)
	if w.dead && p.OnTopic != nil && p.sKey == keyFetch {
		p.hidden++
	}
	i := -1
	if p.sMatched {
		// found again: requests read meanwhile may have moved the queue
		i = p.find(p.sCorr)
	}
	if i < 0 {
		p.out = append(p.out, l7.Exchange{HasResponse: true, End: p.sTS, RespBytes: p.sSize})
		return
	}
	q := &p.q[i]
	p.out = append(p.out, l7.Exchange{
		HasRequest: true, HasResponse: true, Start: q.ts, End: p.sTS,
		Class: w.class, API: q.api, ReqBytes: q.size, RespBytes: p.sSize,
	})
	q.responded = true
	for p.qh < len(p.q) && p.q[p.qh].responded {
		p.qh++
	}
	if p.qh == len(p.q) {
		p.q, p.qh = p.q[:0], 0
	}
}

// template builds the API template of a request of key whose body w read.
func (p *Parser) template(key int16, w *walker) string {
	name := APIName(key)
	if name == "" {
		return ""
	}
	if (key == keyProduce || key == keyFetch) && w.firstHas == 1 && key == p.lastKey && w.topicsArr > 1 == p.lastMulti &&
		string(w.first[:w.nfirst]) == string(p.lastTopic[:p.nLastTopic]) {
		// the same topic as the request before: skip collapsing and
		// interning, the bulk of a template's cost
		return p.lastAPI
	}
	b := append(p.tmpl[:0], name...)
	if key == keyProduce || key == keyFetch {
		switch {
		case w.firstHas == 0 && key == keyFetch && w.topicsArr == 0 && p.lastFetch != "":
			// an incremental fetch of a fetch session (v7+) that lists
			// no topic fetches the session's topics
			return p.lastFetch
		case w.firstHas != 0:
			b = appendTopic(b, w, p.names)
		}
	}
	api := p.in.Intern(b)
	if key == keyFetch && w.firstHas != 0 {
		p.lastFetch = api
	}
	if w.firstHas == 1 {
		p.lastKey, p.lastMulti, p.lastAPI = key, w.topicsArr > 1, api
		p.nLastTopic = copy(p.lastTopic[:], w.first[:w.nfirst])
	}
	return api
}

func appendTopic(b []byte, w *walker, names *TopicNames) []byte {
	b = append(b, ' ')
	switch w.firstHas {
	case 1:
		b = ident.AppendCollapsed(b, w.first[:w.nfirst])
	case 2:
		if s, ok := names.Name(w.firstID); ok {
			b = ident.AppendCollapsed(b, s)
		} else {
			b = append(b, "{topic_id}"...)
		}
	}
	if len(b) > maxAPI-1 {
		b = b[:maxAPI-1]
	}
	if w.topicsArr > 1 {
		b = append(b, '+')
	}
	return b
}

func (p *Parser) reqTopic(w *walker) {
	if p.OnTopic == nil || p.rKey != keyProduce {
		return
	}
	p.OnTopic(p.topicRecords(Produce, w))
}

func (p *Parser) respTopic(w *walker) {
	switch p.sKey {
	case keyMetadata:
		if w.nameOK && w.idOK && w.id != ([16]byte{}) {
			p.names.learn(w.id, w.name[:w.nname], &p.in)
		}
	case keyFetch:
		if p.OnTopic != nil {
			p.OnTopic(p.topicRecords(Fetch, w))
		}
	}
}

func (p *Parser) topicRecords(k Kind, w *walker) TopicRecords {
	t := TopicRecords{Kind: k, Records: w.records, Exact: w.recsExact && !w.dead}
	if w.idOK {
		t.TopicID = w.id
		t.Topic, _ = p.names.Name(w.id)
	} else if w.nameOK {
		t.Topic = p.in.Intern(w.name[:w.nname])
	}
	return t
}

// AppendAPI appends to dst the API template of the request that req (a
// prefix of a request, its length field included) starts: the API name,
// and for Produce and Fetch the first topic (a topic id, which Produce and
// Fetch use from v13 on, becomes "{topic_id}"). It returns dst unchanged
// when req does not start a Kafka request.
func AppendAPI(dst, req []byte) []byte {
	if len(req) < 12 || reqLength(req[:12]) < 0 {
		return dst
	}
	key := int16(binary.BigEndian.Uint16(req[4:]))
	ver := int16(binary.BigEndian.Uint16(req[6:]))
	name := APIName(key)
	dst = append(dst, name...)
	if (key != keyProduce && key != keyFetch) || !knownVersion(key, ver) {
		return dst
	}
	var w walker
	w.reset(reqProgs[key][ver])
	w.feed(req[12:min(len(req), int(binary.BigEndian.Uint32(req))+4)])
	if w.firstHas == 0 {
		return dst
	}
	var names TopicNames
	start := len(dst) - len(name)
	return append(dst[:start], appendTopic(dst[start:], &w, &names)...)
}

// ResponseClass returns the outcome of the response that resp (a prefix of
// a response, its length field included) starts, for a request of apiKey
// at apiVersion, with the error code that decided it: the worst class of
// the error codes found in the prefix (see ErrorClass). A response whose
// outcome this package does not decode, or whose prefix holds no error
// code, is OK.
func ResponseClass(apiKey, apiVersion int16, resp []byte) (l7.Class, int16) {
	if len(resp) < 8 || !knownVersion(apiKey, apiVersion) {
		return l7.OK, 0
	}
	var w walker
	w.reset(respProgs[apiKey][apiVersion])
	end := int(binary.BigEndian.Uint32(resp)) + 4
	if end < 8 {
		return l7.OK, 0
	}
	w.feed(resp[8:min(len(resp), end)])
	return w.class, w.errCode
}
