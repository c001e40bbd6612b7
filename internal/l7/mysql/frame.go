package mysql

const (
	// cliHeadCap bounds the payload bytes kept of a client packet: the
	// command byte and the first sqlapi.MaxInput bytes of SQL; a
	// handshake response's capability flags.
	cliHeadCap = 1 + 1024
	// srvHeadCap bounds the payload bytes kept of a server packet: an OK
	// packet's two length-encoded integers and status flags, an ERR
	// packet's code and SQLSTATE, a COM_STMT_PREPARE_OK.
	srvHeadCap = 32
	// maxPayload is the largest payload of one packet; a packet that long
	// is continued by the next one.
	maxPayload = 1<<24 - 1
)

// pkt is one packet as the parser sees it.
type pkt struct {
	seq  byte
	head []byte // the first bytes of its payload
	size int    // payload length
	ts   uint64 // TS of the chunk holding its first byte
	cut  bool   // head is shorter than min(size, cap) because of a gap
	cont bool   // it continues the previous packet (which was maxPayload long)
}

// stream frames one direction of a connection.
type stream struct {
	buf  []byte // payload head, fixed capacity
	hdr  [4]byte
	n    int // header bytes read
	need int // payload bytes still to come
	size int // payload length (valid once n == 4)
	ts   uint64
	cut  bool
	cont bool // the next packet continues a maxPayload one
	lost bool // boundaries lost: resynchronise at a later chunk
	// exp are the sequence ids the next packet may have (-1: unused; all
	// unused: any). A header with another is not a header: the boundaries
	// were lost (a length read from the middle of a payload would
	// otherwise swallow the stream).
	exp [3]int16
	m   pkt // the packet being emitted (a field, so emitting does not allocate)
}

func newStream(capacity int) stream {
	return stream{buf: make([]byte, 0, capacity), exp: [3]int16{-1, -1, -1}}
}

func (s *stream) seqValid(seq byte) bool {
	if s.exp == [3]int16{-1, -1, -1} {
		return true
	}
	for _, e := range s.exp {
		if e == int16(seq) {
			return true
		}
	}
	return false
}

func (s *stream) reset() {
	s.n, s.need, s.size, s.cut = 0, 0, 0, false
	s.buf = s.buf[:0]
}

// feed consumes data (the visible bytes of a chunk) and then gap hidden
// bytes, calling emit for each complete packet. It returns false when the
// message boundaries were lost (a gap over a header), with tail, the
// hidden bytes after the last whole packet (-1: unknown).
func (s *stream) feed(data []byte, gap int, ts uint64, emit func(*pkt)) (ok bool, tail int) {
	for len(data) > 0 {
		if s.n == 0 && len(data) >= 4 {
			// Fast path: a whole packet in data is read in place.
			n := plen(data)
			if 4+n <= len(data) {
				if !s.seqValid(data[3]) {
					return false, -1
				}
				s.m = pkt{seq: data[3], head: data[4 : 4+min(n, cap(s.buf))], size: n, ts: ts, cont: s.cont}
				s.cont = n == maxPayload
				data = data[4+n:]
				emit(&s.m)
				continue
			}
		}
		if s.n < 4 {
			if s.n == 0 {
				s.ts = ts
				s.buf = s.buf[:0]
			}
			k := copy(s.hdr[s.n:], data)
			s.n += k
			data = data[k:]
			if s.n < 4 {
				continue
			}
			if !s.seqValid(s.hdr[3]) {
				s.reset()
				return false, -1
			}
			s.size = int(s.hdr[0]) | int(s.hdr[1])<<8 | int(s.hdr[2])<<16
			s.need = s.size
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
	if s.n < 4 {
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
	tail = gap - s.need
	s.cut, s.need = true, 0
	s.complete(emit)
	return false, tail
}

func (s *stream) complete(emit func(*pkt)) {
	s.m = pkt{seq: s.hdr[3], head: s.buf, size: s.size, ts: s.ts, cut: s.cut, cont: s.cont}
	s.cont = s.size == maxPayload
	s.reset()
	emit(&s.m)
}

// resync returns the offset in data (the visible part of a chunk of size
// bytes) where packets plausibly start again, or -1: for the client, a
// command (sequence 0, a known command byte) at the start of the chunk
// (clients write whole commands); otherwise two whole headers whose
// sequence ids follow each other, or one packet ending exactly at the
// chunk's end.
func resync(data []byte, size int, client bool) int {
	if client && len(data) >= 5 && data[3] == 0 && isCommand(data[4]) && 4+plen(data) <= size && plen(data) > 0 {
		return 0
	}
	for off := 0; off+4 <= len(data); off++ {
		if chain(data[off:], size-off) {
			return off
		}
	}
	return -1
}

func plen(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }

func chain(b []byte, size int) bool {
	i, pkts := 0, 0
	var seq byte
	for pkts < 3 {
		if i+4 > len(b) {
			return pkts >= 2 || (pkts == 1 && i == size)
		}
		n := plen(b[i:])
		if n == 0 || n >= maxPayload || (pkts > 0 && b[i+3] != seq+1) {
			return false
		}
		seq = b[i+3]
		pkts++
		i += 4 + n
		if i >= len(b) {
			return pkts >= 2 || i == size
		}
	}
	return true
}
