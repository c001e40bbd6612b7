package http2

import "golang.org/x/net/http2/hpack"

// staticStatus are the :status values of HPACK's static table, indexes 8
// to 14 (RFC 7541 appendix A).
var staticStatus = [...]int{200, 204, 206, 304, 400, 404, 500}

// ResponseStatus reads :status from a bounded prefix of a response's
// HEADERS frame (its 9-byte header, then the payload), for a fast path
// that sees only the first bytes of a write. It succeeds when the header
// block starts - after any dynamic table size updates - with :status as a
// static table entry (200, 204, 206, 304, 400, 404, 500) or as a literal
// named by a static :status entry, which is how encoders send it (pseudo-header
// fields come first). A :status that refers to the dynamic table, or a
// prefix too short, gives ok false: that needs the connection's HPACK
// state (Parser). gRPC outcomes need the trailers and that state too.
func ResponseStatus(frame []byte) (status int, ok bool) {
	if len(frame) < 10 || frame[3] != frameHeaders {
		return 0, false
	}
	flags, p := frame[4], frame[9:]
	if flags&flagPadded != 0 {
		p = p[1:]
	}
	if flags&flagPriority != 0 {
		if len(p) < 5 {
			return 0, false
		}
		p = p[5:]
	}
	for len(p) > 0 && p[0]&0xe0 == 0x20 { // size updates
		i := 1
		if p[0]&0x1f == 0x1f {
			for i < len(p) && i < 6 && p[i]&0x80 != 0 {
				i++
			}
			i++
		}
		if i > len(p) {
			return 0, false
		}
		p = p[i:]
	}
	if len(p) == 0 {
		return 0, false
	}
	switch b := p[0]; {
	case b >= 0x88 && b <= 0x8e:
		return staticStatus[b-0x88], true
	case b >= 0x48 && b <= 0x4e, b >= 0x08 && b <= 0x0e, b >= 0x18 && b <= 0x1e:
		// A literal named by any of the static :status entries (8 to 14;
		// encoders pick any of them).
	default:
		return 0, false
	}
	if len(p) < 2 || p[1]&0x7f > 8 || len(p) < 2+int(p[1]&0x7f) {
		return 0, false
	}
	v := p[2 : 2+int(p[1]&0x7f)]
	if p[1]&0x80 != 0 {
		var vb valueBuf
		if _, err := hpack.HuffmanDecode(&vb, v); err != nil || vb.over {
			return 0, false
		}
		v = vb.b[:vb.n]
	}
	if len(v) != 3 {
		return 0, false
	}
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, false
		}
		status = status*10 + int(d-'0')
	}
	return status, status >= 100
}
