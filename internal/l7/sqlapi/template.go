package sqlapi

import (
	"hash/maphash"
	"unicode/utf8"

	"github.com/galago-project/galago/internal/l7"
)

// Dialect selects the lexical rules that differ between the servers:
// comments, quoting and string escapes.
type Dialect uint8

const (
	// Postgres: nested /* */ comments, "quoted" identifiers, standard
	// strings ('' escapes only), E'...' strings with backslash escapes,
	// $tag$ dollar-quoted strings.
	Postgres Dialect = iota
	// MySQL (and MariaDB): # comments, executable /*! */ comments,
	// `quoted` identifiers, backslash escapes in every string.
	MySQL
)

const (
	// MaxInput is how many bytes of a statement Append reads.
	MaxInput = 1024
	// MaxTemplate bounds a template's length in bytes.
	MaxTemplate = 128
	// MaxName bounds one (possibly qualified) name in a template.
	MaxName = 96
	// maxKeyword is the longest keyword compared; longer words are not
	// keywords we know.
	maxKeyword = 24
	// maxDepth bounds how deep FROM (subquery) is followed.
	maxDepth = 4
)

type tokKind uint8

const (
	tEnd    tokKind = iota
	tWord           // unquoted identifier or keyword
	tQuoted         // "x" or `x`
	tString         // a string literal (MySQL "x" is reported as tQuoted: a name where a name is expected)
	tOpen           // (
	tClose          // )
	tSemi           // ;
	tDot            // .
	tOther          // numbers, operators, parameters, commas
)

type token struct {
	kind       tokKind
	start, end int // the token's bytes (for tQuoted without the quotes)
}

// lexer walks a statement prefix. Every step advances pos, so a scan over
// at most MaxInput bytes ends.
type lexer struct {
	s     []byte
	pos   int
	d     Dialect
	xcmt  int // open MySQL executable comments whose "*/" is still ahead
	peekd bool
	peekt token
	// prefix: s may end inside a token, so a token reaching the end of s
	// may be cut short and must not reach a template.
	prefix bool
}

// cutShort reports whether t may have been cut by the end of a prefix.
func (l *lexer) cutShort(t token) bool {
	if !l.prefix {
		return false
	}
	end := t.end
	if t.kind == tQuoted {
		end++ // the closing quote
	}
	return end >= len(l.s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isIdentStart(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$'
}

// skip passes whitespace and comments.
func (l *lexer) skip() {
	s := l.s
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case isSpace(c):
			l.pos++
		case c == '-' && l.pos+1 < len(s) && s[l.pos+1] == '-':
			l.lineComment()
		case c == '#' && l.d == MySQL:
			l.lineComment()
		case c == '/' && l.pos+1 < len(s) && s[l.pos+1] == '*':
			if l.d == MySQL && l.pos+2 < len(s) && (s[l.pos+2] == '!' || (s[l.pos+2] == 'M' && l.pos+3 < len(s) && s[l.pos+3] == '!')) {
				// An executable comment: its content is SQL.
				l.pos += 3
				if s[l.pos-1] == 'M' {
					l.pos++
				}
				for n := 0; n < 6 && l.pos < len(s) && s[l.pos] >= '0' && s[l.pos] <= '9'; n++ {
					l.pos++
				}
				l.xcmt++
				continue
			}
			l.blockComment()
		case c == '*' && l.xcmt > 0 && l.pos+1 < len(s) && s[l.pos+1] == '/':
			l.xcmt--
			l.pos += 2
		default:
			return
		}
	}
}

func (l *lexer) lineComment() {
	for l.pos < len(l.s) && l.s[l.pos] != '\n' {
		l.pos++
	}
}

func (l *lexer) blockComment() {
	s := l.s
	depth := 0
	for l.pos < len(s) {
		switch {
		case s[l.pos] == '/' && l.pos+1 < len(s) && s[l.pos+1] == '*':
			if depth == 0 || l.d == Postgres {
				depth++
			}
			l.pos += 2
		case s[l.pos] == '*' && l.pos+1 < len(s) && s[l.pos+1] == '/':
			depth--
			l.pos += 2
			if depth == 0 {
				return
			}
		default:
			l.pos++
		}
	}
}

// quoted passes a run quoted by q starting at pos (on the opening quote),
// with doubled quotes as escapes and, if bs, backslash escapes.
func (l *lexer) quoted(q byte, bs bool) (start, end int) {
	s := l.s
	l.pos++
	start = l.pos
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case bs && c == '\\':
			l.pos += 2
		case c == q:
			if l.pos+1 < len(s) && s[l.pos+1] == q {
				l.pos += 2
				continue
			}
			end = l.pos
			l.pos++
			return start, end
		default:
			l.pos++
		}
	}
	l.pos = len(s)
	return start, len(s)
}

// dollar passes a PostgreSQL dollar-quoted string if one starts at pos
// ($tag$...$tag$); false for anything else ($1 parameters).
func (l *lexer) dollar() bool {
	s := l.s
	i := l.pos + 1
	if i < len(s) && s[i] >= '0' && s[i] <= '9' {
		return false
	}
	for i < len(s) && s[i] != '$' {
		if !isIdentChar(s[i]) {
			return false
		}
		i++
	}
	if i >= len(s) {
		return false
	}
	tag := s[l.pos : i+1]
	for j := i + 1; j+len(tag) <= len(s); j++ {
		if s[j] == '$' && string(s[j:j+len(tag)]) == string(tag) {
			l.pos = j + len(tag)
			return true
		}
	}
	l.pos = len(s)
	return true
}

func (l *lexer) peek() token {
	if !l.peekd {
		l.peekt = l.scan()
		l.peekd = true
	}
	return l.peekt
}

func (l *lexer) next() token {
	if l.peekd {
		l.peekd = false
		return l.peekt
	}
	return l.scan()
}

func (l *lexer) scan() token {
	l.skip()
	s := l.s
	if l.pos >= len(s) {
		return token{kind: tEnd, start: len(s), end: len(s)}
	}
	c := s[l.pos]
	start := l.pos
	switch {
	case c == '\'':
		l.quoted('\'', l.d == MySQL)
		return token{kind: tString, start: start, end: l.pos}
	case c == '"':
		a, b := l.quoted('"', l.d == MySQL)
		return token{kind: tQuoted, start: a, end: b}
	case c == '`' && l.d == MySQL:
		a, b := l.quoted('`', false)
		return token{kind: tQuoted, start: a, end: b}
	case c == '$' && l.d == Postgres && l.dollar():
		return token{kind: tString, start: start, end: l.pos}
	case (c == 'E' || c == 'e') && l.d == Postgres && l.pos+1 < len(s) && s[l.pos+1] == '\'':
		l.pos++
		l.quoted('\'', true)
		return token{kind: tString, start: start, end: l.pos}
	case isIdentStart(c):
		for l.pos < len(s) && isIdentChar(s[l.pos]) {
			l.pos++
		}
		return token{kind: tWord, start: start, end: l.pos}
	case c == '(':
		l.pos++
		return token{kind: tOpen, start: start, end: l.pos}
	case c == ')':
		l.pos++
		return token{kind: tClose, start: start, end: l.pos}
	case c == ';':
		l.pos++
		return token{kind: tSemi, start: start, end: l.pos}
	case c == '.':
		l.pos++
		if l.pos < len(s) && s[l.pos] >= '0' && s[l.pos] <= '9' {
			l.number()
			return token{kind: tOther, start: start, end: l.pos}
		}
		return token{kind: tDot, start: start, end: l.pos}
	case c >= '0' && c <= '9':
		l.number()
		return token{kind: tOther, start: start, end: l.pos}
	default:
		l.pos++
		return token{kind: tOther, start: start, end: l.pos}
	}
}

// number passes a numeric literal, including 1e10, 0x1F and MySQL's 1abc
// identifiers (which only matter as something to skip).
func (l *lexer) number() {
	for l.pos < len(l.s) && (isIdentChar(l.s[l.pos]) || l.s[l.pos] == '.') {
		l.pos++
	}
}

// kw is a token's text upper-cased in a fixed buffer, for keyword
// comparisons (string(kw) comparisons do not allocate).
type kwbuf struct {
	b [maxKeyword]byte
	n int
}

func (l *lexer) keyword(t token, k *kwbuf) []byte {
	k.n = 0
	if t.kind != tWord || t.end-t.start > maxKeyword {
		return k.b[:0]
	}
	for i := t.start; i < t.end; i++ {
		c := l.s[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if (c < 'A' || c > 'Z') && (c != '_' || k.n == 0) {
			// Keywords are ASCII letters: this is a name, not a keyword.
			k.n = 0
			return k.b[:0]
		}
		k.b[k.n] = c
		k.n++
	}
	return k.b[:k.n]
}

// is reports whether t is the keyword w (upper case).
func (l *lexer) is(t token, w string) bool {
	if t.kind != tWord || t.end-t.start != len(w) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := l.s[t.start+i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// out is a template being written into dst, bounded by MaxTemplate.
type out struct {
	dst  []byte
	base int
}

func (o *out) room() int { return MaxTemplate - (len(o.dst) - o.base) }

func (o *out) str(s string) {
	if len(s) > o.room() {
		s = s[:max(o.room(), 0)]
	}
	o.dst = append(o.dst, s...)
}

func (o *out) bytes(b []byte) {
	if len(b) > o.room() {
		b = b[:max(o.room(), 0)]
	}
	o.dst = append(o.dst, b...)
}

// Append appends the template of the SQL text sql (see the package doc)
// to dst; it appends nothing when sql does not start with a keyword.
func Append(dst []byte, sql []byte, d Dialect) []byte {
	return appendTemplate(dst, sql, d, false)
}

// AppendPrefix is Append for a prefix of a statement (what a capture
// kept): a keyword or name that reaches the end of sql may be cut short,
// so it does not reach the template.
func AppendPrefix(dst []byte, sql []byte, d Dialect) []byte {
	return appendTemplate(dst, sql, d, true)
}

func appendTemplate(dst []byte, sql []byte, d Dialect, prefix bool) []byte {
	if len(sql) > MaxInput {
		sql, prefix = sql[:MaxInput], true
	}
	l := lexer{s: sql, d: d, prefix: prefix}
	o := out{dst: dst, base: len(dst)}
	for {
		var k kwbuf
		t := l.next()
		for t.kind == tOpen || t.kind == tSemi {
			t = l.next()
		}
		if t.kind != tWord {
			return o.dst
		}
		kw := l.keyword(t, &k)
		if len(kw) == 0 || l.cutShort(t) {
			return o.dst
		}
		if string(kw) == "BEGIN" || string(kw) == "START" {
			// A transaction opener followed by the statements it wraps:
			// template the first of those.
			mark := l.pos
			if skipStatement(&l) && startsStatement(&l) {
				continue
			}
			l.pos, l.peekd = mark, false
		}
		statement(&l, &o, kw, 0)
		return o.dst
	}
}

// skipStatement advances past the current statement's terminating ';' at
// nesting level 0; false when the text ends first.
func skipStatement(l *lexer) bool {
	depth := 0
	for {
		t := l.next()
		switch t.kind {
		case tEnd:
			return false
		case tOpen:
			depth++
		case tClose:
			depth--
		case tSemi:
			if depth <= 0 {
				return true
			}
		}
	}
}

// startsStatement reports whether a keyword follows (without consuming it).
func startsStatement(l *lexer) bool {
	for l.peek().kind == tSemi {
		l.next()
	}
	return l.peek().kind == tWord
}

// statement writes the template of a statement whose leading keyword kw
// was just read.
func statement(l *lexer, o *out, kw []byte, depth int) {
	switch string(kw) {
	case "SELECT":
		o.str("SELECT")
		fromTable(l, o, depth)
	case "WITH":
		withMain(l, o, depth)
	case "INSERT", "REPLACE":
		o.bytes(kw)
		skipWords(l, "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO")
		name(l, o)
	case "UPDATE":
		o.str("UPDATE")
		skipWords(l, "LOW_PRIORITY", "IGNORE", "ONLY")
		name(l, o)
	case "DELETE":
		o.str("DELETE")
		skipWords(l, "LOW_PRIORITY", "QUICK", "IGNORE", "FROM", "ONLY")
		name(l, o)
	case "MERGE":
		o.str("MERGE")
		skipWords(l, "INTO", "ONLY")
		name(l, o)
	case "TRUNCATE":
		o.str("TRUNCATE")
		skipWords(l, "TABLE", "ONLY")
		name(l, o)
	case "LOCK":
		o.str("LOCK")
		skipWords(l, "TABLE", "TABLES", "ONLY")
		name(l, o)
	case "COPY", "CALL", "EXECUTE", "PREPARE", "TABLE":
		o.bytes(kw)
		name(l, o)
	case "CREATE", "ALTER", "DROP":
		ddl(l, o, kw)
	case "START":
		o.str("START")
		if l.is(l.peek(), "TRANSACTION") {
			o.str(" TRANSACTION")
		}
	default:
		o.bytes(kw)
	}
}

// skipWords consumes any of the given keywords, in any order.
func skipWords(l *lexer, words ...string) {
	for {
		t := l.peek()
		found := false
		for _, w := range words {
			if l.is(t, w) {
				found = true
				break
			}
		}
		if !found {
			return
		}
		l.next()
	}
}

// fromTable finds the FROM at this statement's level and writes the first
// table after it; false when there is none.
func fromTable(l *lexer, o *out, depth int) bool {
	level := 0
	for {
		t := l.next()
		switch t.kind {
		case tEnd:
			return false
		case tOpen:
			level++
		case tClose:
			level--
			if level < 0 {
				return false
			}
		case tSemi:
			if level == 0 {
				return false
			}
		case tWord:
			if level != 0 || !l.is(t, "FROM") {
				continue
			}
			skipWords(l, "ONLY", "LATERAL")
			if l.peek().kind == tOpen {
				// FROM (subquery): the subquery's first table.
				if depth >= maxDepth {
					return false
				}
				for l.peek().kind == tOpen {
					l.next()
				}
				var k kwbuf
				st := l.next()
				kw := l.keyword(st, &k)
				if string(kw) == "SELECT" || string(kw) == "WITH" {
					return subTable(l, o, kw, depth+1)
				}
				return false
			}
			if l.is(l.peek(), "DUAL") {
				return false
			}
			return name(l, o)
		}
	}
}

// subTable writes the first table of a nested SELECT or WITH.
func subTable(l *lexer, o *out, kw []byte, depth int) bool {
	if string(kw) == "WITH" {
		var k kwbuf
		main := withSkip(l, &k)
		if string(main) != "SELECT" {
			return false
		}
	}
	return fromTable(l, o, depth)
}

// withSkip passes a WITH clause's CTE definitions and returns the main
// statement's keyword (upper case, in k), or nil.
func withSkip(l *lexer, k *kwbuf) []byte {
	level := 0
	for {
		t := l.next()
		switch t.kind {
		case tEnd, tSemi:
			if t.kind == tEnd || level == 0 {
				return nil
			}
		case tOpen:
			level++
		case tClose:
			level--
		case tWord:
			if level != 0 {
				continue
			}
			kw := l.keyword(t, k)
			switch string(kw) {
			case "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "VALUES", "TABLE":
				return kw
			}
		}
	}
}

func withMain(l *lexer, o *out, depth int) {
	var k kwbuf
	kw := withSkip(l, &k)
	if kw == nil {
		o.str("WITH")
		return
	}
	statement(l, o, kw, depth)
}

// ddl writes CREATE/ALTER/DROP with the object type, and the name for
// tables, views and sequences.
func ddl(l *lexer, o *out, verb []byte) {
	o.bytes(verb)
	for n := 0; n < 8; n++ {
		t := l.peek()
		if t.kind != tWord {
			return
		}
		var k kwbuf
		kw := l.keyword(t, &k)
		if l.cutShort(t) {
			return
		}
		switch string(kw) {
		case "OR", "REPLACE", "TEMP", "TEMPORARY", "UNLOGGED", "GLOBAL", "LOCAL", "UNIQUE",
			"ONLINE", "OFFLINE", "IGNORE", "RECURSIVE", "ALGORITHM", "SQL", "SECURITY", "DEFINER",
			"INVOKER", "UNDEFINED", "MERGE", "TEMPTABLE", "AGGREGATE", "CONSTRAINT", "TRUSTED", "PROCEDURAL":
			l.next()
			// DEFINER = user@host, ALGORITHM = x, SQL SECURITY y: skip the value.
			if l.peek().kind == tOther && l.s[l.peek().start] == '=' {
				l.next()
				skipValue(l)
			}
			continue
		case "TABLE", "VIEW", "SEQUENCE":
			l.next()
			o.str(" ")
			o.bytes(kw)
			skipWords(l, "IF", "NOT", "EXISTS", "ONLY")
			name(l, o)
			return
		case "MATERIALIZED":
			l.next()
			o.str(" MATERIALIZED")
			continue
		default:
			l.next()
			o.str(" ")
			o.bytes(kw)
			return
		}
	}
}

// skipValue passes a DEFINER-style value: name, 'user'@'host', CURRENT_USER.
func skipValue(l *lexer) {
	for n := 0; n < 4; n++ {
		t := l.next()
		switch t.kind {
		case tWord, tQuoted, tString:
		default:
			return
		}
		if p := l.peek(); p.kind != tOther || l.s[p.start] != '@' {
			return
		}
		l.next()
	}
}

// name writes " <name>" for the (possibly qualified) name that follows;
// false when no name follows.
func name(l *lexer, o *out) bool {
	t := l.peek()
	if t.kind != tWord && t.kind != tQuoted {
		return false
	}
	var buf [MaxName]byte
	n := 0
	for part := 0; part < 4; part++ {
		t = l.next()
		var q byte
		if t.kind == tQuoted {
			q = l.s[t.start-1]
		}
		n = appendPart(buf[:], n, l.s[t.start:t.end], q)
		if l.peek().kind != tDot {
			break
		}
		l.next()
		if p := l.peek(); p.kind != tWord && p.kind != tQuoted {
			break
		}
		if n < len(buf) {
			buf[n] = '.'
			n++
		}
	}
	if n == 0 || l.cutShort(t) {
		// Nothing, or a name whose last part the end of a prefix may have
		// cut: none of it is written.
		return false
	}
	o.str(" ")
	o.bytes(cutUTF8(buf[:min(n, max(o.room(), 0))]))
	return true
}

// appendPart appends one name part to buf[:n], collapsing ids and hashes,
// undoubling the quote q, replacing control bytes, and returns the new
// length (at most len(buf)).
func appendPart(buf []byte, n int, p []byte, q byte) int {
	if q == 0 && !hasDigitOrCtl(p) {
		// Most names: nothing to collapse or replace.
		return n + copy(buf[n:], p)
	}
	for i := 0; i < len(p) && n < len(buf); {
		c := p[i]
		if q != 0 && c == q && i+1 < len(p) && p[i+1] == q {
			i++
		}
		if isHex(c) || c == '-' {
			j, digits, allDigits := i, 0, true
			for j < len(p) && (isHex(p[j]) || p[j] == '-') {
				if p[j] >= '0' && p[j] <= '9' {
					digits++
				} else {
					allDigits = false
				}
				j++
			}
			switch {
			case allDigits && digits >= 4:
				n = appendCap(buf, n, "{n}")
				i = j
				continue
			case j-i >= 16 && digits > 0:
				n = appendCap(buf, n, "{id}")
				i = j
				continue
			}
			for ; i < j && n < len(buf); i++ {
				buf[n] = p[i]
				n++
			}
			continue
		}
		if c < 0x20 || c == 0x7f {
			c = '_'
		}
		buf[n] = c
		n++
		i++
	}
	return n
}

func hasDigitOrCtl(p []byte) bool {
	for _, c := range p {
		if (c >= '0' && c <= '9') || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

func appendCap(buf []byte, n int, s string) int {
	if n+len(s) > len(buf) {
		return n
	}
	return n + copy(buf[n:], s)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

// cutUTF8 drops a trailing incomplete UTF-8 sequence left by a cut.
func cutUTF8(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// Templater interns templates: Template of a statement seen before returns
// the same string without allocating. It also remembers the templates of
// the last texts it saw (a small cache keyed by a hash of the text), so a
// statement sent again and again (an extended-protocol Parse, an ORM's
// query) is not read again. Not safe for concurrent use.
type Templater struct {
	// In is the interner; one per goroutine can be shared by every
	// connection's parser so that a template is stored once.
	In    *l7.Interner
	own   l7.Interner
	buf   [MaxTemplate]byte
	cache [cacheSlots]cached
}

const cacheSlots = 32

type cached struct {
	h   uint64 // 0: empty
	api string
}

// seed keys the text hashes; set once, never changed.
var seed = maphash.MakeSeed()

// Template returns the interned template of sql ("" when it has none);
// prefix says sql may be cut short (see AppendPrefix).
func (t *Templater) Template(sql []byte, d Dialect, prefix bool) string {
	if len(sql) > MaxInput {
		sql, prefix = sql[:MaxInput], true
	}
	h := maphash.Bytes(seed, sql)<<2 | uint64(d)<<1 | 1
	if prefix {
		h ^= 2 << 1
	}
	c := &t.cache[h>>59%cacheSlots]
	if c.h == h {
		return c.api
	}
	b := appendTemplate(t.buf[:0], sql, d, prefix)
	api := ""
	if len(b) > 0 {
		api = t.Intern(b)
	}
	*c = cached{h: h, api: api}
	return api
}

// Intern interns an already built template.
func (t *Templater) Intern(b []byte) string {
	in := t.In
	if in == nil {
		in = &t.own
	}
	return in.Intern(b)
}
