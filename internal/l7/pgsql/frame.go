package pgsql

import "encoding/binary"

const (
	// headCap bounds the bytes kept of one frontend message: a Parse's
	// statement name (≤ 63 bytes in PostgreSQL) and the start of its SQL
	// (sqlapi.MaxInput), a Bind's portal and statement names.
	headCap = 1 + 4 + 64 + 1024
	// srvHeadCap bounds the bytes kept of one backend message: an
	// ErrorResponse's severity and SQLSTATE fields come first.
	srvHeadCap = 96
	// maxMsg is PostgreSQL's largest message (1 GiB), beyond which a
	// length cannot be right.
	maxMsg = 1 << 30
	// maxResyncMsg bounds the lengths resync accepts, to keep random
	// bytes from looking like a header.
	maxResyncMsg = 1 << 24
	// maxStartup is PostgreSQL's limit on a startup packet.
	maxStartup = 10000
)

// msg is one complete message as the parser sees it.
type msg struct {
	typ  byte   // 0 for untyped startup-phase messages
	head []byte // its first bytes (type and length included), at most the stream's cap
	size int    // bytes on the wire, type and length included
	ts   uint64 // TS of the chunk holding its first byte
	cut  bool   // head is shorter than min(size, cap) because of a gap
}

// body returns the message's body bytes that were kept.
func (m *msg) body() []byte {
	h := 5
	if m.typ == 0 {
		h = 4
	}
	if len(m.head) < h {
		return nil
	}
	return m.head[h:]
}

// stream frames one direction of a connection.
type stream struct {
	buf     []byte // fixed backing array for head, allocated once
	n       int    // bytes of the current message in buf (header included)
	need    int    // bytes of the current message still to come (after buf's)
	size    int    // current message's total size (0 while the header is incomplete)
	typ     byte
	ts      uint64
	cut     bool
	untyped bool // the next message is untyped (startup phase)
	single  bool // the next "message" is one byte (SSLRequest/GSSENCRequest answer)
	lost    bool // message boundaries lost: resynchronise at a later chunk
	server  bool // which message types are valid
	m       msg  // the message being emitted (a field, so emitting does not allocate)
}

func newStream(capacity int, server bool) stream {
	return stream{buf: make([]byte, 0, capacity), server: server}
}

// hdrLen is the header length of the message being read.
func (s *stream) hdrLen() int {
	if s.untyped {
		return 4
	}
	return 5
}

// reset drops a partial message.
func (s *stream) reset() {
	s.n, s.need, s.size, s.cut = 0, 0, 0, false
	s.buf = s.buf[:0]
}

// feed consumes data (the visible bytes of a chunk) and then gap hidden
// bytes, calling emit for each complete message. It returns false when the
// stream lost the message boundaries (a bad header, or a gap over one),
// with tail, the hidden bytes after the last whole message (-1 when a
// partial header makes it unknown).
func (s *stream) feed(data []byte, gap int, ts uint64, emit func(*msg)) (ok bool, tail int) {
	for len(data) > 0 {
		if s.n == 0 && !s.single && !s.untyped && len(data) >= 5 {
			// Fast path: a whole message in data is read in place.
			t, n := data[0], int(binary.BigEndian.Uint32(data[1:]))
			if !validLen(t, n, s.server, maxMsg) {
				s.reset()
				return false, -1
			}
			if 1+n <= len(data) {
				s.m = msg{typ: t, head: data[:min(1+n, cap(s.buf))], size: 1 + n, ts: ts}
				data = data[1+n:]
				emit(&s.m)
				continue
			}
		}
		if s.single {
			s.single = false
			s.m = msg{typ: data[0], head: data[:1], size: 1, ts: ts}
			data = data[1:]
			emit(&s.m)
			continue
		}
		if s.size == 0 {
			// Reading the header.
			if s.n == 0 {
				s.ts = ts
				s.buf = s.buf[:0]
			}
			h := s.hdrLen()
			k := min(h-s.n, len(data))
			s.buf = append(s.buf, data[:k]...)
			s.n += k
			data = data[k:]
			if s.n < h {
				continue
			}
			if !s.header() {
				s.reset()
				return false, -1
			}
		}
		if s.need > 0 {
			k := min(s.need, len(data))
			if room := cap(s.buf) - len(s.buf); room > 0 && !s.cut {
				s.buf = append(s.buf, data[:min(k, room)]...)
			}
			s.need -= k
			data = data[k:]
		}
		if s.need == 0 {
			s.complete(emit)
		}
	}
	if gap <= 0 {
		return true, 0
	}
	if s.size == 0 || s.single {
		// The gap hides a header (or the one-byte answer).
		tail = gap
		if s.n > 0 {
			tail = -1
		}
		s.reset()
		return false, tail
	}
	if gap <= s.need {
		s.need -= gap
		s.cut = true
		if s.need == 0 {
			s.complete(emit)
		}
		return true, 0
	}
	// The message ends inside the gap, and what follows it is hidden.
	tail = gap - s.need
	s.cut = true
	s.need = 0
	s.complete(emit)
	return false, tail
}

// header validates the header in buf and sets size and need.
func (s *stream) header() bool {
	if s.untyped {
		n := int(binary.BigEndian.Uint32(s.buf))
		if n < 8 || n > maxStartup {
			return false
		}
		s.typ, s.size, s.need = 0, n, n-4
		return true
	}
	t := s.buf[0]
	n := int(binary.BigEndian.Uint32(s.buf[1:]))
	if !validLen(t, n, s.server, maxMsg) {
		return false
	}
	s.typ, s.size, s.need = t, n+1, n-4
	return true
}

func (s *stream) complete(emit func(*msg)) {
	s.m = msg{typ: s.typ, head: s.buf, size: s.size, ts: s.ts, cut: s.cut}
	s.reset()
	s.untyped = false
	emit(&s.m)
}

// validLen reports whether a message of type t may have length field n
// (which counts itself, not the type byte).
func validLen(t byte, n int, server bool, limit int) bool {
	if n < 4 || n > limit {
		return false
	}
	if server {
		switch t {
		case '1', '2', '3', 'n', 's', 'I', 'c':
			return n == 4
		case 'Z':
			return n == 5
		case 'K':
			return n >= 12 && n <= 264
		case 'R', 'V':
			return n >= 8
		case 'S', 'T', 'D', 't':
			return n >= 6
		case 'C', 'E', 'N':
			return n >= 5
		case 'A':
			return n >= 10
		case 'G', 'H', 'W':
			return n >= 7
		case 'v':
			return n >= 12
		case 'd':
			return true
		}
		return false
	}
	switch t {
	case 'S', 'H', 'X', 'c':
		return n == 4
	case 'Q', 'f', 'p':
		return n >= 5
	case 'P':
		return n >= 8
	case 'B':
		return n >= 12
	case 'E':
		return n >= 9
	case 'D', 'C':
		return n >= 6
	case 'F':
		return n >= 10
	case 'd':
		return true
	}
	return false
}

// resync returns the offset in data (the visible part of a chunk of size
// bytes) where a plausible run of messages starts, or -1. A chunk's start
// is where a syscall began, which for PostgreSQL's clients and server is
// nearly always a message boundary: one valid header there, for a message
// that ends within the chunk, is enough. Elsewhere it takes two whole
// valid headers in a row, or one message ending exactly at the chunk's end.
func resync(data []byte, size int, server bool) int {
	if len(data) >= 5 {
		n := int(binary.BigEndian.Uint32(data[1:]))
		if validLen(data[0], n, server, maxResyncMsg) && 1+n <= size {
			return 0
		}
	}
	for off := 0; off+5 <= len(data); off++ {
		if chain(data[off:], size-off, server) {
			return off
		}
	}
	return -1
}

func chain(b []byte, size int, server bool) bool {
	i, msgs := 0, 0
	for msgs < 4 {
		if i+5 > len(b) {
			return msgs >= 2 || (msgs == 1 && i == size)
		}
		t := b[i]
		n := int(binary.BigEndian.Uint32(b[i+1:]))
		if !validLen(t, n, server, maxResyncMsg) {
			return false
		}
		if server && t == 'Z' && i+5 < len(b) && !validTxStatus(b[i+5]) {
			return false
		}
		msgs++
		i += 1 + n
		if i >= len(b) {
			return msgs >= 2 || i == size
		}
	}
	return true
}

func validTxStatus(c byte) bool { return c == 'I' || c == 'T' || c == 'E' }
