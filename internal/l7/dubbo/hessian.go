package dubbo

import "encoding/binary"

// readString reads one hessian2 string (or null, as "") at the start of
// b: its UTF-8 bytes and what follows; ok false when b does not start
// with a whole one. Lengths count UTF-16 code units. A chunked string
// ('R' chunks), 32 K units or more, is refused: no service or method name
// is that long.
func readString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	var n int
	switch c := b[0]; {
	case c == 'N':
		return nil, b[1:], true
	case c <= 0x1f:
		n, b = int(c), b[1:]
	case c >= 0x30 && c <= 0x33:
		if len(b) < 2 {
			return nil, nil, false
		}
		n, b = int(c-0x30)<<8|int(b[1]), b[2:]
	case c == 'S':
		if len(b) < 3 {
			return nil, nil, false
		}
		n, b = int(binary.BigEndian.Uint16(b[1:])), b[3:]
	default:
		return nil, nil, false
	}
	i := 0
	for units := 0; units < n; units++ {
		if i >= len(b) {
			return nil, nil, false
		}
		switch c := b[i]; {
		case c < 0x80:
			i++
		case c&0xe0 == 0xc0:
			i += 2
		case c&0xf0 == 0xe0:
			i += 3
		case c&0xf8 == 0xf0: // a supplementary character: two UTF-16 units
			i += 4
			units++
		default:
			return nil, nil, false
		}
	}
	if i > len(b) {
		return nil, nil, false
	}
	return b[:i], b[i:], true
}

// readInt reads a hessian2 int at the start of b.
func readInt(b []byte) (int32, bool) {
	if len(b) == 0 {
		return 0, false
	}
	switch c := b[0]; {
	case c >= 0x80 && c <= 0xbf:
		return int32(c) - 0x90, true
	case c >= 0xc0 && c <= 0xcf:
		if len(b) < 2 {
			return 0, false
		}
		return (int32(c)-0xc8)<<8 | int32(b[1]), true
	case c >= 0xd0 && c <= 0xd7:
		if len(b) < 3 {
			return 0, false
		}
		return (int32(c)-0xd4)<<16 | int32(b[1])<<8 | int32(b[2]), true
	case c == 'I':
		if len(b) < 5 {
			return 0, false
		}
		return int32(binary.BigEndian.Uint32(b[1:])), true
	}
	return 0, false
}
