package mongo

import (
	"encoding/binary"
	"math"
)

// A minimal BSON reader: what the parser needs and nothing more. Requests
// are read from a bounded prefix held in memory (the command is the body's
// first element); replies are walked as they stream (replyWalker), since
// the fields that decide the outcome ("ok", "code", "writeErrors",
// "writeConcernError") may come after a cursor batch of megabytes.

// BSON element types.
const (
	tDouble     = 0x01
	tString     = 0x02
	tDocument   = 0x03
	tArray      = 0x04
	tBinary     = 0x05
	tUndefined  = 0x06
	tObjectID   = 0x07
	tBool       = 0x08
	tDatetime   = 0x09
	tNull       = 0x0a
	tRegex      = 0x0b
	tDBPointer  = 0x0c
	tJavaScript = 0x0d
	tSymbol     = 0x0e
	tCodeScope  = 0x0f
	tInt32      = 0x10
	tTimestamp  = 0x11
	tInt64      = 0x12
	tDecimal    = 0x13
	tMinKey     = 0xff
	tMaxKey     = 0x7f
)

// fixedSize is the size of a fixed-size value, or -1.
func fixedSize(t byte) int {
	switch t {
	case tUndefined, tNull, tMinKey, tMaxKey:
		return 0
	case tBool:
		return 1
	case tInt32:
		return 4
	case tDouble, tDatetime, tTimestamp, tInt64:
		return 8
	case tObjectID:
		return 12
	case tDecimal:
		return 16
	}
	return -1
}

// elem is one element of a document in memory; val may be cut short when
// the document is a prefix.
type elem struct {
	typ  byte
	name []byte
	val  []byte
	full bool // val is whole
}

// nextElem reads the element at b[off:]. ok is false at the document's end
// (type 0) and when the prefix ends before the element's name does.
func nextElem(b []byte, off int) (e elem, next int, ok bool) {
	if off >= len(b) || b[off] == 0 {
		return e, off, false
	}
	e.typ = b[off]
	i := off + 1
	for i < len(b) && b[i] != 0 {
		i++
	}
	if i >= len(b) {
		return e, off, false
	}
	e.name = b[off+1 : i]
	v := i + 1
	n := valueLen(e.typ, b[v:])
	if n < 0 {
		// the prefix ends inside the value: what there is of it
		e.val = b[v:]
		return e, len(b), true
	}
	e.val, e.full = b[v:v+n], true
	return e, v + n, true
}

// valueLen is the length of the value of type t starting b, or -1 when b
// does not hold it all (or t is not a BSON type).
func valueLen(t byte, b []byte) int {
	n := fixedSize(t)
	if n < 0 {
		switch t {
		case tString, tJavaScript, tSymbol:
			if len(b) < 4 {
				return -1
			}
			n = 4 + int(int32(binary.LittleEndian.Uint32(b)))
		case tDocument, tArray, tCodeScope:
			if len(b) < 4 {
				return -1
			}
			n = int(int32(binary.LittleEndian.Uint32(b)))
		case tBinary:
			if len(b) < 4 {
				return -1
			}
			n = 5 + int(int32(binary.LittleEndian.Uint32(b)))
		case tDBPointer:
			if len(b) < 4 {
				return -1
			}
			n = 4 + int(int32(binary.LittleEndian.Uint32(b))) + 12
		case tRegex:
			z := 0
			for i, c := range b {
				if c == 0 {
					z++
					if z == 2 {
						return i + 1
					}
				}
			}
			return -1
		default:
			return -1
		}
	}
	if n < 0 || n > len(b) {
		return -1
	}
	return n
}

// str returns a string element's value (without its NUL), if whole.
func (e elem) str() ([]byte, bool) {
	if e.typ != tString || !e.full || len(e.val) < 5 {
		return nil, false
	}
	return e.val[4 : len(e.val)-1], true
}

// Container kinds of the reply walk.
const (
	cTop       = iota // the reply document
	cWriteErrs        // its writeErrors array
	cWriteErr         // one write error
	cWCE              // its writeConcernError
	cSkip             // a sub-document of no interest (never pushed: skipped by length)
)

// Reply walk states.
const (
	sPrefix  = iota // skipping bytes before the document (pre > 0)
	sDocLen         // a document's int32 length, then into it
	sType           // an element's type, or 0: the document's end
	sName           // an element's name, up to its NUL
	sValue          // an element's value
	sSkipLen        // the int32 length of a value skipped by it
	sCString        // a NUL-terminated string to skip (regex)
	sDone
)

// replyWalker reads a reply document as it streams, for the fields that
// decide the outcome.
type replyWalker struct {
	st   uint8
	fix  [8]byte
	nfix int
	skip int
	// for sSkipLen: what the length covers beyond itself
	lenAdd int
	// for sCString: how many strings are left
	cstrs int

	stack [4]uint8
	depth int

	typ   byte
	name  [24]byte
	nname int
	long  bool

	dead bool

	okSeen   bool
	ok       float64
	code     int32
	codeSeen bool
	weCode   int32
	weSeen   bool
	wceCode  int32
	wceSeen  bool
}

func (w *replyWalker) reset(pre int) {
	*w = replyWalker{}
	if pre > 0 {
		w.st, w.skip = sPrefix, pre
	} else {
		w.st = sDocLen
	}
}

// fixed gathers n bytes; it returns them when complete.
func (w *replyWalker) fixed(b []byte, n int) (v []byte, used int, ok bool) {
	if w.nfix == 0 && len(b) >= n {
		return b[:n], n, true
	}
	used = copy(w.fix[w.nfix:n], b)
	w.nfix += used
	if w.nfix < n {
		return nil, used, false
	}
	w.nfix = 0
	return w.fix[:n], used, true
}

// gap steps over n uncaptured bytes: only inside a value skipped by its
// length; anywhere else the walk is lost.
func (w *replyWalker) gap(n int) {
	if w.st == sDone || w.dead {
		return
	}
	if w.skip >= n && w.nfix == 0 && (w.st == sPrefix || w.st == sType) {
		w.skip -= n
		return
	}
	w.dead = true
}

func (w *replyWalker) feed(b []byte) {
	for len(b) > 0 && !w.dead && w.st != sDone {
		if w.skip > 0 {
			k := min(w.skip, len(b))
			w.skip -= k
			b = b[k:]
			if w.skip == 0 && w.st == sPrefix {
				w.st = sDocLen
			}
			continue
		}
		switch w.st {
		case sPrefix:
			w.st = sDocLen
		case sDocLen:
			v, u, ok := w.fixed(b, 4)
			b = b[u:]
			if !ok {
				return
			}
			if int32(binary.LittleEndian.Uint32(v)) < 5 || w.depth == len(w.stack) {
				w.dead = true
				return
			}
			w.stack[w.depth] = w.pushing()
			w.depth++
			w.st = sType
		case sType:
			w.typ = b[0]
			b = b[1:]
			if w.typ == 0 {
				w.depth--
				if w.depth == 0 {
					w.st = sDone
					return
				}
				continue
			}
			w.st, w.nname, w.long = sName, 0, false
		case sName:
			i := 0
			for i < len(b) && b[i] != 0 {
				i++
			}
			if w.nname+i <= len(w.name) {
				w.nname += copy(w.name[w.nname:], b[:i])
			} else {
				w.long = true
			}
			if i == len(b) {
				return
			}
			b = b[i+1:]
			w.st = sValue
		case sValue:
			b = w.value(b)
		case sSkipLen:
			v, u, ok := w.fixed(b, 4)
			b = b[u:]
			if !ok {
				return
			}
			n := int(int32(binary.LittleEndian.Uint32(v))) + w.lenAdd
			if n < 0 {
				w.dead = true
				return
			}
			w.skip, w.st = n, sType
		case sCString:
			i := 0
			for i < len(b) && b[i] != 0 {
				i++
			}
			if i == len(b) {
				return
			}
			b = b[i+1:]
			w.cstrs--
			if w.cstrs == 0 {
				w.st = sType
			}
		}
	}
}

// pushing is the kind of the container whose length was just read.
func (w *replyWalker) pushing() uint8 {
	if w.depth == 0 {
		return cTop
	}
	switch w.stack[w.depth-1] {
	case cTop:
		if w.is("writeErrors") {
			return cWriteErrs
		}
		return cWCE
	case cWriteErrs:
		return cWriteErr
	}
	return cSkip
}

func (w *replyWalker) is(name string) bool {
	return !w.long && string(w.name[:w.nname]) == name
}

// value handles the value of the element just named.
func (w *replyWalker) value(b []byte) []byte {
	ctx := w.stack[w.depth-1]
	switch {
	case ctx == cTop && (w.is("ok") || w.is("code")),
		(ctx == cWriteErr || ctx == cWCE) && w.is("code"):
		if n := fixedSize(w.typ); n > 0 && n <= 8 {
			v, u, ok := w.fixed(b, n)
			if !ok {
				return b[u:]
			}
			w.number(ctx, number(w.typ, v))
			w.st = sType
			return b[u:]
		}
	case ctx == cTop && w.typ == tArray && w.is("writeErrors"),
		ctx == cTop && w.typ == tDocument && w.is("writeConcernError"),
		ctx == cWriteErrs && w.typ == tDocument:
		w.st = sDocLen
		return b
	}
	// anything else is skipped by its size
	if n := fixedSize(w.typ); n >= 0 {
		w.skip, w.st = n, sType
		return b
	}
	switch w.typ {
	case tString, tJavaScript, tSymbol:
		w.lenAdd, w.st = 0, sSkipLen
	case tDocument, tArray, tCodeScope:
		w.lenAdd, w.st = -4, sSkipLen
	case tBinary:
		w.lenAdd, w.st = 1, sSkipLen
	case tDBPointer:
		w.lenAdd, w.st = 12, sSkipLen
	case tRegex:
		w.cstrs, w.st = 2, sCString
	default:
		w.dead = true
	}
	return b
}

func number(t byte, v []byte) float64 {
	switch t {
	case tDouble:
		return math.Float64frombits(binary.LittleEndian.Uint64(v))
	case tInt32:
		return float64(int32(binary.LittleEndian.Uint32(v)))
	case tInt64:
		return float64(int64(binary.LittleEndian.Uint64(v)))
	case tBool:
		if v[0] != 0 {
			return 1
		}
	}
	return 0
}

func (w *replyWalker) number(ctx uint8, v float64) {
	switch {
	case ctx == cTop && w.is("ok"):
		w.okSeen, w.ok = true, v
	case ctx == cTop:
		w.code, w.codeSeen = int32(v), true
	case ctx == cWriteErr && !w.weSeen:
		w.weCode, w.weSeen = int32(v), true
	case ctx == cWCE && !w.wceSeen:
		w.wceCode, w.wceSeen = int32(v), true
	}
}
