package libconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting of groups, lists and arrays, so that hostile
// input cannot make the recursive parser use unbounded stack.
const MaxDepth = 256

// Error is a parse error at a line of a file.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Parse reads a libconfig document. filename is used only in error messages.
// The result is the root group, whose members are the top-level settings.
func Parse(filename string, data []byte) (*Setting, error) {
	p := &parser{lex: lexer{file: filename, src: data, line: 1}}
	root := &Setting{Kind: KindGroup}
	if err := p.next(); err != nil {
		return nil, err
	}
	if err := p.settings(root, tokEOF, 0); err != nil {
		return nil, err
	}
	return root, nil
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokName
	tokString
	tokInt   // val: int64, hex flag, int64 flag
	tokFloat // fval
	tokBool
	tokEquals // = or :
	tokComma
	tokSemicolon
	tokGroupStart
	tokGroupEnd
	tokArrayStart
	tokArrayEnd
	tokListStart
	tokListEnd
)

type token struct {
	kind  tokKind
	line  int
	text  string // name, or decoded string
	ival  int64
	is64  bool
	hex   bool
	fval  float64
	bval  bool
	lexed string // source text, for messages
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of file"
	case tokName:
		return fmt.Sprintf("name %q", t.text)
	case tokString:
		return "string " + quote(t.text)
	case tokInt, tokFloat, tokBool:
		return t.lexed
	}
	return "'" + t.lexed + "'"
}

type lexer struct {
	file string
	src  []byte
	pos  int
	line int
}

func (l *lexer) errorf(line int, format string, args ...any) error {
	return &Error{File: l.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func isNameStart(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*'
}

func isNameChar(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// atLineStart reports whether only spaces and tabs precede pos on its line
// (libconfig's @include must start a line).
func (l *lexer) atLineStart(pos int) bool {
	for i := pos - 1; i >= 0; i-- {
		switch l.src[i] {
		case ' ', '\t':
			continue
		case '\n':
			return true
		default:
			return false
		}
	}
	return true
}

// skip passes over whitespace and comments.
func (l *lexer) skip() error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			l.pos++
		case c == '#' || c == '/' && l.peek(1) == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.peek(1) == '*':
			start := l.line
			l.pos += 2
			for {
				if l.pos >= len(l.src) {
					return l.errorf(start, "unterminated /* comment")
				}
				if l.src[l.pos] == '*' && l.peek(1) == '/' {
					l.pos += 2
					break
				}
				if l.src[l.pos] == '\n' {
					l.line++
				}
				l.pos++
			}
		default:
			return nil
		}
	}
	return nil
}

func (l *lexer) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

var punct = map[byte]tokKind{
	'=': tokEquals, ':': tokEquals, ',': tokComma, ';': tokSemicolon,
	'{': tokGroupStart, '}': tokGroupEnd, '[': tokArrayStart, ']': tokArrayEnd,
	'(': tokListStart, ')': tokListEnd,
}

func (l *lexer) next() (token, error) {
	if err := l.skip(); err != nil {
		return token{}, err
	}
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, line: l.line}, nil
	}
	c := l.src[l.pos]
	if k, ok := punct[c]; ok {
		l.pos++
		return token{kind: k, line: l.line, lexed: string(c)}, nil
	}
	switch {
	case c == '"':
		return l.str()
	case isNameStart(c):
		start := l.pos
		for l.pos < len(l.src) && isNameChar(l.src[l.pos]) {
			l.pos++
		}
		name := string(l.src[start:l.pos])
		// As in libconfig's scanner, a word that is exactly true/false is a
		// boolean, so it cannot name a setting.
		if strings.EqualFold(name, "true") || strings.EqualFold(name, "false") {
			return token{kind: tokBool, line: l.line, bval: strings.EqualFold(name, "true"), lexed: name}, nil
		}
		return token{kind: tokName, line: l.line, text: name, lexed: name}, nil
	case isDigit(c) || c == '-' || c == '+' || c == '.':
		return l.number()
	case c == '@':
		if l.atLineStart(l.pos) && strings.HasPrefix(string(l.src[l.pos:min(len(l.src), l.pos+8)]), "@include") {
			return token{}, l.errorf(l.line, "@include is not supported")
		}
	}
	return token{}, l.errorf(l.line, "unexpected character %q", rune(c))
}

// str scans a string literal; the opening quote is at l.pos.
func (l *lexer) str() (token, error) {
	startLine := l.line
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return token{}, l.errorf(startLine, "unterminated string")
		}
		c := l.src[l.pos]
		switch c {
		case '"':
			l.pos++
			s := b.String()
			return token{kind: tokString, line: startLine, text: s}, nil
		case '\n':
			l.line++
		case '\\':
			e := l.peek(1)
			switch e {
			case 'n', 'r', 't', 'f', '\\', '"':
				b.WriteByte(unescape(e))
				l.pos += 2
				continue
			case 'x', 'X':
				if isHexDigit(l.peek(2)) && isHexDigit(l.peek(3)) {
					v, _ := strconv.ParseUint(string(l.src[l.pos+2:l.pos+4]), 16, 8)
					b.WriteByte(byte(v))
					l.pos += 4
					continue
				}
			}
			// Any other backslash stands for itself, as in libconfig.
		}
		b.WriteByte(c)
		l.pos++
	}
}

func unescape(e byte) byte {
	switch e {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'f':
		return '\f'
	}
	return e
}

// number scans an integer or float with the longest match among libconfig's
// integer, integer64, hex, hex64 and float patterns.
func (l *lexer) number() (token, error) {
	start, line := l.pos, l.line
	i := l.pos
	signed := false
	if l.src[i] == '-' || l.src[i] == '+' {
		signed = true
		i++
	}
	digits := func(j int, ok func(byte) bool) int {
		for j < len(l.src) && ok(l.src[j]) {
			j++
		}
		return j
	}
	intEnd := digits(i, isDigit)
	hasInt := intEnd > i

	// Hex: 0[Xx][0-9A-Fa-f]+ without a sign.
	if !signed && intEnd == i+1 && l.src[i] == '0' && i+1 < len(l.src) && (l.src[i+1] == 'x' || l.src[i+1] == 'X') {
		if hexEnd := digits(i+2, isHexDigit); hexEnd > i+2 {
			l.pos = hexEnd
			is64 := l.suffixL()
			lexed := string(l.src[start:l.pos])
			u, err := strconv.ParseUint(string(l.src[i+2:hexEnd]), 16, 64)
			if err != nil {
				return token{}, l.errorf(line, "hex integer %s does not fit in 64 bits", lexed)
			}
			if u > math.MaxInt32 {
				is64 = true
			}
			return token{kind: tokInt, line: line, ival: int64(u), hex: true, is64: is64, lexed: lexed}, nil
		}
	}

	// Float: mantissa with a dot, or digits with an exponent.
	end := intEnd
	isFloat := false
	if end < len(l.src) && l.src[end] == '.' {
		isFloat = true
		end = digits(end+1, isDigit)
	}
	if expEnd := l.exponent(end); expEnd > end && (isFloat || hasInt) {
		isFloat = true
		end = expEnd
	}
	if isFloat {
		l.pos = end
		lexed := string(l.src[start:end])
		if !strings.ContainsAny(lexed[:strings.IndexAny(lexed+"e", "eE")], "0123456789") {
			return token{}, l.errorf(line, "malformed number %q", lexed)
		}
		f, err := strconv.ParseFloat(lexed, 64)
		if err != nil {
			return token{}, l.errorf(line, "float %s out of range", lexed)
		}
		return token{kind: tokFloat, line: line, fval: f, lexed: lexed}, nil
	}
	if !hasInt {
		return token{}, l.errorf(line, "unexpected character %q", rune(l.src[start]))
	}
	l.pos = intEnd
	is64 := l.suffixL()
	lexed := string(l.src[start:l.pos])
	v, err := strconv.ParseInt(string(l.src[start:intEnd]), 10, 64)
	if err != nil {
		return token{}, l.errorf(line, "integer %s does not fit in 64 bits", lexed)
	}
	if v > math.MaxInt32 || v < math.MinInt32 {
		is64 = true
	}
	return token{kind: tokInt, line: line, ival: v, is64: is64, lexed: lexed}, nil
}

// suffixL consumes an L or LL suffix at l.pos.
func (l *lexer) suffixL() bool {
	if l.peek(0) != 'L' {
		return false
	}
	l.pos++
	if l.peek(0) == 'L' {
		l.pos++
	}
	return true
}

// exponent returns the end of [eE][-+]?[0-9]+ starting at j, or j if there
// is none.
func (l *lexer) exponent(j int) int {
	if j >= len(l.src) || (l.src[j] != 'e' && l.src[j] != 'E') {
		return j
	}
	k := j + 1
	if k < len(l.src) && (l.src[k] == '-' || l.src[k] == '+') {
		k++
	}
	d := k
	for d < len(l.src) && isDigit(l.src[d]) {
		d++
	}
	if d == k {
		return j
	}
	return d
}

type parser struct {
	lex lexer
	tok token
}

func (p *parser) next() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errorf(format string, args ...any) error {
	return p.lex.errorf(p.tok.line, format, args...)
}

// settings parses `name = value [;,]` until the end token and appends the
// settings to group.
func (p *parser) settings(group *Setting, end tokKind, depth int) error {
	seen := map[string]bool{}
	for p.tok.kind != end {
		if p.tok.kind != tokName {
			if end == tokEOF && p.tok.kind == tokGroupEnd {
				return p.errorf("unexpected '}' with no group open")
			}
			if p.tok.kind == tokEOF {
				return p.errorf("unexpected end of file: missing '}'")
			}
			return p.errorf("expected a setting name, found %s", p.tok.describe())
		}
		s := &Setting{Name: p.tok.text, Line: p.tok.line}
		if seen[s.Name] {
			return p.errorf("duplicate setting name %q", s.Name)
		}
		seen[s.Name] = true
		if err := p.next(); err != nil {
			return err
		}
		if p.tok.kind != tokEquals {
			return p.errorf("expected '=' or ':' after %q, found %s", s.Name, p.tok.describe())
		}
		if err := p.next(); err != nil {
			return err
		}
		if err := p.value(s, depth); err != nil {
			return err
		}
		group.Elems = append(group.Elems, s)
		if p.tok.kind == tokSemicolon || p.tok.kind == tokComma {
			if err := p.next(); err != nil {
				return err
			}
		}
	}
	return p.next()
}

// value parses one value into s, which already has its name and line.
func (p *parser) value(s *Setting, depth int) error {
	if depth >= MaxDepth {
		return p.errorf("nesting deeper than %d levels", MaxDepth)
	}
	switch p.tok.kind {
	case tokGroupStart:
		s.Kind = KindGroup
		if err := p.next(); err != nil {
			return err
		}
		return p.settings(s, tokGroupEnd, depth+1)
	case tokListStart:
		s.Kind = KindList
		return p.elements(s, tokListEnd, depth)
	case tokArrayStart:
		s.Kind = KindArray
		return p.elements(s, tokArrayEnd, depth)
	case tokInt:
		s.Kind, s.Int, s.Hex = KindInt, p.tok.ival, p.tok.hex
		if p.tok.is64 {
			s.Kind = KindInt64
		}
	case tokFloat:
		s.Kind, s.Float = KindFloat, p.tok.fval
	case tokBool:
		s.Kind, s.Bool = KindBool, p.tok.bval
	case tokString:
		var b strings.Builder
		for p.tok.kind == tokString {
			b.WriteString(p.tok.text)
			if err := p.next(); err != nil {
				return err
			}
		}
		s.Kind, s.Str = KindString, b.String()
		return nil
	case tokEOF:
		return p.errorf("unexpected end of file: missing value")
	default:
		return p.errorf("expected a value, found %s", p.tok.describe())
	}
	return p.next()
}

// elements parses the values of a list or array; the opening bracket is the
// current token. As in libconfig, commas may trail or repeat after the first
// element.
func (p *parser) elements(s *Setting, end tokKind, depth int) error {
	open := p.tok.lexed
	if err := p.next(); err != nil {
		return err
	}
	for p.tok.kind != end {
		if len(s.Elems) > 0 {
			if p.tok.kind != tokComma {
				if p.tok.kind == tokEOF {
					return p.errorf("unexpected end of file: missing closing bracket for '%s'", open)
				}
				return p.errorf("expected ',' or closing bracket, found %s", p.tok.describe())
			}
			for p.tok.kind == tokComma {
				if err := p.next(); err != nil {
					return err
				}
			}
			if p.tok.kind == end {
				break
			}
		}
		e := &Setting{Line: p.tok.line}
		if err := p.value(e, depth+1); err != nil {
			return err
		}
		if s.Kind == KindArray {
			if !e.Kind.IsScalar() {
				return p.lex.errorf(e.Line, "array elements must be scalars, found a %s", e.Kind)
			}
			if len(s.Elems) > 0 && !sameScalarKind(s.Elems[0].Kind, e.Kind) {
				return p.lex.errorf(e.Line, "mismatched element type in array: %s after %s", e.Kind, s.Elems[0].Kind)
			}
		}
		s.Elems = append(s.Elems, e)
	}
	return p.next()
}

func sameScalarKind(a, b Kind) bool {
	return a == b || a.IsInteger() && b.IsInteger()
}
