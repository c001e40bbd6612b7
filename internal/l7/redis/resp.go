package redis

import "bytes"

const (
	// headCap is how much of each message the parser keeps: enough for
	// the command and subcommand of a request, the error code of a reply,
	// the kind of a pub/sub message.
	headCap = 128
	// lineCap is how much of a line is kept to parse its integer; the
	// rest of a long line (a simple string, an inline command) is
	// scanned, not kept.
	lineCap = 24
	// maxDepth bounds the nesting of aggregates; deeper is taken for
	// garbage (Redis' own replies nest a handful of levels).
	maxDepth = 32
	// maxBulk bounds a declared length (Redis' proto-max-bulk-len can be
	// raised, 512 MiB by default; this is 1 TiB).
	maxBulk = 1 << 40
)

type event uint8

const (
	evNone    event = iota
	evMessage       // a top-level message completed
	evEmpty         // an inline line or "*0"/"*-1" that is no command: nothing to count
	evError         // the bytes do not parse: boundaries lost
)

type state uint8

const (
	stLine state = iota // reading a line: a type and its header, or an inline command
	stBulk              // stepping over a bulk payload and its CRLF
)

// frame is an aggregate being read.
type frame struct {
	left int64 // elements still to come; -1 for a streamed aggregate ("*?"), ended by "."
	attr bool  // an attribute ("|"): it precedes the element it annotates and is not one
	str  bool  // a streamed string ("$?"): ";<n>" parts until ";0"
}

// msg is what is known of the top-level message being read.
type msg struct {
	open     bool
	ts       uint64 // TS of the chunk of its first byte
	seq      uint64 // sequence number of that chunk
	size     int64  // bytes before the current chunk, gaps included
	top      byte   // type of the top-level value (after any attribute)
	count    int64  // element count of a top-level aggregate (pairs for maps)
	third    int64  // the integer third element of a top-level aggregate (pub/sub counts)
	hasThird bool
	nonBlank bool // an inline line has a non-blank byte
	headN    int  // bytes of head kept from earlier chunks
	headDone bool // the head is full or was cut by a gap: keep no more
	// headHere says the head starts in the current chunk (at headAt):
	// it is read there, without a copy, unless the message goes on past
	// the chunk.
	headHere  bool
	headReset bool // an attribute ended at the top level: the head starts again
	head      [headCap]byte
}

// stream frames one direction of a connection without keeping more than a
// message's head and a line's start.
type stream struct {
	st       state
	inline   bool // the current message is an inline command
	lost     bool // boundaries lost: wait for a chunk that starts a message
	depth    int
	lineN    int   // bytes of a line begun in an earlier chunk
	bulkLeft int64 // payload bytes and CRLF still to come in a bulk
	line     [lineCap]byte
	stack    [maxDepth]frame
	m        msg
	// cur is the head of the message next returned as complete: valid
	// until the next call.
	cur []byte
}

// reset forgets the message in progress and where the stream stands.
func (s *stream) reset() {
	s.st, s.inline, s.depth, s.lineN, s.bulkLeft = stLine, false, 0, 0, 0
	s.m.open = false
}

// next consumes data from its start until a message completes, data ends
// or the bytes do not parse, and says which. Once a message completes,
// s.cur is its head and s.m its description.
func (s *stream) next(data []byte, ts, seq uint64, isReq bool) (int, event) {
	hs := 0 // where the head starts in data (a message starts at data[0] or earlier)
	if !s.m.open {
		s.m.open, s.m.ts, s.m.seq, s.m.size = true, ts, seq, 0
		s.m.top, s.m.count, s.m.hasThird, s.m.nonBlank = 0, 0, false, false
		s.m.headN, s.m.headDone, s.m.headHere = 0, false, true
		s.st, s.depth, s.lineN = stLine, 0, 0
		s.inline = isReq && data[0] != '*'
		if s.inline {
			// An inline command is a line: the loop reads it.
		} else if n, ok := s.whole(data); ok {
			s.m.open, s.m.headHere, s.m.size = false, false, int64(n)
			s.cur = data[:min(n, headCap)]
			return n, evMessage
		}
	} else if !s.m.headDone {
		s.m.headHere = false
	}
	i := 0
	ev := evNone
	for i < len(data) && ev == evNone {
		if s.st == stBulk {
			k := int64(len(data) - i)
			if k > s.bulkLeft {
				k = s.bulkLeft
			}
			// The payload ends with CRLF; check it where it is in sight,
			// so that a wrong length is caught rather than followed.
			if cr := s.bulkLeft - 2; cr >= 0 && cr < k && data[i+int(cr)] != '\r' {
				ev = evError
			} else if lf := s.bulkLeft - 1; lf < k && data[i+int(lf)] != '\n' {
				ev = evError
			}
			i += int(k)
			if s.bulkLeft -= k; s.bulkLeft == 0 && ev == evNone {
				s.st = stLine
				ev = s.bulkDone()
			}
		} else {
			j := i
			for j < len(data) && j-i < 16 && data[j] != '\n' {
				j++
			}
			if j < len(data) && data[j] != '\n' {
				if k := bytes.IndexByte(data[j:], '\n'); k >= 0 {
					j += k
				} else {
					j = len(data)
				}
			}
			if s.inline && !s.m.nonBlank {
				s.m.nonBlank = !blank(data[i:j])
			}
			if j == len(data) { // the line goes on in the next chunk
				if s.lineN < lineCap {
					copy(s.line[s.lineN:], data[i:])
				}
				s.lineN += j - i
				i = j
				break
			}
			line := data[i : j+1]
			n := len(line)
			if s.lineN > 0 {
				if s.lineN < lineCap {
					copy(s.line[s.lineN:], line)
				}
				n += s.lineN
				line = s.line[:min(n, lineCap)]
				s.lineN = 0
			}
			i = j + 1
			if s.inline {
				ev = evMessage
				if !s.m.nonBlank {
					ev = evEmpty // a blank line is no command: Redis ignores it, without a reply
				}
			} else {
				ev = s.lineDone(line, n)
			}
		}
		if s.m.headReset {
			s.m.headReset = false
			hs, s.m.headN, s.m.headDone, s.m.headHere = i, 0, false, true
		}
	}
	// Keep the head where it must outlive data, or hand it over.
	done := ev == evMessage || ev == evEmpty
	switch {
	case s.m.headHere && done:
		s.cur = data[hs:min(i, hs+headCap)]
	case s.m.headHere:
		s.m.headN = copy(s.m.head[:], data[hs:i])
		s.m.headDone = s.m.headN == headCap
	case !s.m.headDone:
		n := copy(s.m.head[s.m.headN:], data[:i])
		s.m.headN += n
		s.m.headDone = s.m.headN == headCap
	}
	if !done || !s.m.headHere {
		s.cur = s.m.head[:s.m.headN]
	}
	s.m.headHere = false
	s.m.size += int64(i)
	if done {
		s.m.open = false
	}
	return i, ev
}

// whole reads a message that data holds from its first byte to its last,
// when it has the shape nearly all traffic has: a simple value, a bulk
// string, or an array of those (every request, most replies). It does
// what next's loop would, in one pass without the per-line state, and
// notes the message's top, count and third element; for anything else
// (a message that goes on past data, nested or RESP3 aggregates, bytes
// that do not parse) it reports false and changes nothing, and next's loop
// reads the message.
func (s *stream) whole(data []byte) (int, bool) {
	var (
		i                int
		top              byte
		count, left      int64 = 0, -1 // left: elements still to come in the top array; -1: not in one
		third            int64
		hasThird, saw3rd bool
	)
	for {
		if i == len(data) {
			return 0, false
		}
		t := data[i]
		// Most lines are a type and an integer: "$5\r\n".
		l, n, isInt := crlfInt(data[i+1:])
		var body []byte
		if isInt {
			i += 1 + n
		} else {
			j := lineLen(data[i:])
			if j < 1 {
				return 0, false // cut, or an empty line (an error)
			}
			body = data[i+1 : i+j]
			if len(body) > 0 && body[len(body)-1] == '\r' {
				body = body[:len(body)-1]
			}
			i += j + 1
		}
		if left < 0 {
			top = t
		}
		switch t {
		case '+', '-', ':', ',', '(', '#', '_':
			if t == ':' && left >= 0 && count-left == 2 {
				third, hasThird = l, true
				if !isInt {
					third, hasThird = parseInt(body)
				}
				saw3rd = true
			}
		case '$':
			ok := isInt
			if !ok {
				l, ok = parseInt(body)
			}
			switch {
			case !ok || l < -1 || l > maxBulk:
				return 0, false
			case l >= 0:
				if int64(len(data)-i) < l+2 || data[i+int(l)] != '\r' || data[i+int(l)+1] != '\n' {
					return 0, false
				}
				i += int(l) + 2
			}
		case '*':
			ok := isInt
			if !ok {
				l, ok = parseInt(body)
			}
			if left >= 0 || !ok || l < -1 || l > maxBulk {
				return 0, false
			}
			if l > 0 {
				count, left = l, l
				continue
			}
			// "*0" and the null array "*-1" are whole messages.
		default:
			return 0, false
		}
		if left > 0 {
			left--
		}
		if left <= 0 {
			break
		}
	}
	s.m.top, s.m.count = top, count
	if saw3rd {
		s.m.third, s.m.hasThird = third, hasThird
	}
	return i, true
}

// crlfInt reads "<integer>\r\n" from the start of b, in one pass: the
// integer, as parseInt reads it, and the bytes up to the line's end. ok is
// false for anything else.
func crlfInt(b []byte) (n int64, size int, ok bool) {
	if len(b) >= 3 && b[0]-'0' <= 9 && b[1] == '\r' && b[2] == '\n' {
		return int64(b[0] - '0'), 3, true // one digit: most counts and lengths
	}
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i = 1
	}
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	digits := i
	if neg {
		digits--
	}
	if digits == 0 || digits > 19 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, i + 2, true
}

// lineLen is bytes.IndexByte(b, '\n') for b that most often starts with
// a short line ("$5\r\n"): a byte loop finds those sooner than the call.
func lineLen(b []byte) int {
	for j := 0; j < len(b) && j < 16; j++ {
		if b[j] == '\n' {
			return j
		}
	}
	if len(b) <= 16 {
		return -1
	}
	if j := bytes.IndexByte(b[16:], '\n'); j >= 0 {
		return 16 + j
	}
	return -1
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// lineDone interprets a complete header line (line holds its first
// bytes, n is its length).
func (s *stream) lineDone(line []byte, n int) event {
	if n < 2 {
		return evError // an empty line: no type
	}
	t := line[0]
	var body []byte // the integer of a header line, when the whole line was kept
	if n <= len(line) {
		body = line[1 : n-1] // without the '\n'
		if len(body) > 0 && body[len(body)-1] == '\r' {
			body = body[:len(body)-1]
		}
	}
	if s.depth == 0 && t != '|' {
		s.m.top = t
	}
	switch t {
	case '+', '-', ':', ',', '(', '#', '_':
		if t == ':' && s.depth == 1 && !s.stack[0].attr && s.m.count-s.stack[0].left == 2 {
			s.m.third, s.m.hasThird = parseInt(body)
		}
		return s.elementDone()
	case '$', '!', '=':
		if t == '$' && len(body) == 1 && body[0] == '?' {
			return s.push(frame{str: true})
		}
		l, ok := parseInt(body)
		switch {
		case !ok || l < -1 || l > maxBulk:
			return evError
		case l == -1:
			if t != '$' {
				return evError
			}
			return s.elementDone() // RESP2 null bulk string
		}
		s.st, s.bulkLeft = stBulk, l+2
		return evNone
	case ';':
		if s.depth == 0 || !s.stack[s.depth-1].str {
			return evError
		}
		l, ok := parseInt(body)
		if !ok || l < 0 || l > maxBulk {
			return evError
		}
		if l == 0 {
			s.depth--
			return s.elementDone()
		}
		s.st, s.bulkLeft = stBulk, l+2
		return evNone
	case '*', '~', '>', '%', '|':
		if len(body) == 1 && body[0] == '?' {
			return s.push(frame{left: -1, attr: t == '|'})
		}
		l, ok := parseInt(body)
		if !ok || l < -1 || l > maxBulk {
			return evError
		}
		if l == -1 {
			if t != '*' {
				return evError
			}
			return s.elementDone() // RESP2 null array
		}
		if t == '%' || t == '|' {
			l *= 2
		}
		if s.depth == 0 && t != '|' {
			s.m.count = l
		}
		if l == 0 {
			if t == '|' {
				return s.attrDone()
			}
			return s.elementDone()
		}
		return s.push(frame{left: l, attr: t == '|'})
	case '.':
		if s.depth == 0 || s.stack[s.depth-1].left != -1 || n > 3 {
			return evError
		}
		s.depth--
		if s.stack[s.depth].attr {
			return s.attrDone()
		}
		return s.elementDone()
	}
	return evError
}

func (s *stream) push(f frame) event {
	if s.depth == maxDepth {
		return evError
	}
	s.stack[s.depth] = f
	s.depth++
	return evNone
}

// bulkDone ends a bulk payload: an element, or a part of a streamed string.
func (s *stream) bulkDone() event {
	if s.depth > 0 && s.stack[s.depth-1].str {
		return evNone
	}
	return s.elementDone()
}

// elementDone counts a complete element against the aggregates it closes.
func (s *stream) elementDone() event {
	for s.depth > 0 {
		f := &s.stack[s.depth-1]
		if f.left > 0 {
			f.left--
		}
		if f.left != 0 {
			return evNone
		}
		s.depth--
		if f.attr {
			return s.attrDone()
		}
	}
	return evMessage
}

// attrDone ends an attribute: it annotates the element that follows and
// does not count as one. At the top level the reply proper starts after
// it, so its head starts there too.
func (s *stream) attrDone() event {
	if s.depth == 0 {
		s.m.headReset, s.m.top = true, 0
	}
	return evNone
}

// gap steps over n bytes that were not captured. It fails when they may
// hold a message boundary: anywhere but inside a bulk payload.
func (s *stream) gap(n int64) (event, bool) {
	if !s.m.open || s.st != stBulk || n > s.bulkLeft {
		return evNone, false
	}
	s.m.size += n
	s.m.headDone = true
	s.bulkLeft -= n
	if s.bulkLeft > 0 {
		return evNone, true
	}
	s.st = stLine
	ev := s.bulkDone()
	if s.m.headReset { // an attribute ended in the gap: the reply's head is not in sight
		s.m.headReset, s.m.headN = false, 0
	}
	if ev == evMessage {
		s.m.open = false
		s.cur = s.m.head[:s.m.headN]
	}
	return ev, true
}

// startsMessage reports whether a chunk that follows lost boundaries
// plausibly starts a message, so parsing can resume there: a multibulk
// request ("*<digit>") or a reply type followed by what that type allows.
func startsMessage(b []byte, isReq bool) bool {
	if len(b) < 2 {
		return false
	}
	if isReq {
		return b[0] == '*' && b[1] >= '1' && b[1] <= '9'
	}
	switch b[0] {
	case '+', '-', '!', '=', '(', ',', '#', '_':
		return true
	case ':', '$', '*', '~', '>', '%', '|':
		return b[1] >= '0' && b[1] <= '9' || b[1] == '-' || b[1] == '?'
	}
	return false
}
