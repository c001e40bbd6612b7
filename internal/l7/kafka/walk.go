package kafka

import (
	"encoding/binary"

	"github.com/galago-project/galago/internal/l7"
)

// A message body is read by a walker running a small program that
// describes its layout: the walker is fed the message's bytes as they
// arrive, in any pieces, keeps only the few bytes of the field it is in,
// and skips strings, byte blobs and record sets by their declared
// lengths, through capture gaps too. What it extracts: error codes,
// Produce's acks, the topic names (or ids), and the record counts of
// Produce requests and Fetch responses.

type op uint8

const (
	opSkip     op = iota // arg bytes
	opErr                // int16 error code
	opAcks               // int16 acks
	opStr                // int16-length nullable string
	opCStr               // uvarint(length+1) compact nullable string
	opName               // opStr captured as the element's topic name
	opCName              // opCStr captured as the element's topic name
	opID                 // 16-byte topic id of the element
	opBytes              // int32-length nullable bytes
	opCBytes             // uvarint(length+1) compact nullable bytes
	opRecs               // int32-length record set
	opCRecs              // uvarint(length+1) compact record set
	opArr                // int32-count nullable array; arg = index of its opEnd
	opCArr               // uvarint(count+1) compact nullable array; arg = index of its opEnd
	opEnd                // end of one array element
	opTags               // tagged fields: uvarint count, then (uvarint tag, uvarint size, data)
	opTopic              // a topic element starts
	opTopicEnd           // a topic element ends: report it
	opStop               // nothing more of interest
)

type instr struct {
	op  op
	arg int16
}

// maxDepth bounds array nesting (Kafka's layouts nest at most 3 deep
// where this package reads them).
const maxDepth = 4

// maxName is the longest topic name kept (Kafka allows 249 bytes).
const maxName = 249

type frame struct {
	left  int32 // elements left, the current one included
	begin int16 // pc of the array's first element instruction
}

// walker runs one program over one message.
type walker struct {
	prog []instr
	pc   int

	// the fixed-size field being read across pieces
	fix  [8]byte
	nfix int
	// the uvarint being read across pieces
	vval   uint64
	vshift uint
	vact   bool

	skip    int  // bytes left of a string, blob or tagged field value
	capture bool // the skipped bytes are the topic name
	sub     uint8

	tagsLeft int

	stack [maxDepth]frame
	sp    int

	// record set state
	inRecs   bool
	recLeft  int
	recHdr   [61]byte
	recN     int
	recSkip  int
	recExact bool

	done, dead bool

	// results
	class     l7.Class
	errCode   int16
	acks      int16
	acksSeen  bool
	topics    int // topic elements seen
	name      [maxName]byte
	nname     int
	nameOK    bool
	id        [16]byte
	idOK      bool
	records   int  // records of the current topic element
	recsExact bool // records counts every batch of the element

	// first topic, kept for the API template
	first     [maxName]byte
	nfirst    int
	firstID   [16]byte
	firstHas  uint8 // 0 none, 1 name, 2 id
	topicsArr int   // declared length of the topic array, -1 before it

	onTopic func(w *walker) // called at opTopicEnd
}

func (w *walker) reset(prog []instr) {
	// Field by field: the name buffers need no clearing, and clearing
	// them costs more than the rest of a small message's parse.
	w.prog, w.pc = prog, 0
	w.nfix, w.vval, w.vshift, w.vact = 0, 0, 0, false
	w.skip, w.capture, w.sub, w.tagsLeft, w.sp = 0, false, 0, 0, 0
	w.inRecs, w.recLeft, w.recN, w.recSkip, w.recExact = false, 0, 0, 0, false
	w.done, w.dead = len(prog) == 0, false
	w.class, w.errCode, w.acks, w.acksSeen = 0, 0, -1, false
	w.topics, w.nname, w.nameOK, w.idOK, w.records, w.recsExact = 0, 0, false, false, 0, false
	w.nfirst, w.firstHas, w.topicsArr = 0, 0, -1
}

func (w *walker) setErr(code int16) {
	if code == 0 {
		return
	}
	// ServerError outranks ClientError; the first code of the worst class
	// is the one kept.
	if c := ErrorClass(code); c > w.class {
		w.class, w.errCode = c, code
	} else if w.errCode == 0 {
		w.errCode = code
	}
}

// fixed reads an n-byte field from b; it returns the field and how many
// bytes of b it used, or ok false when b ran out first.
func (w *walker) fixed(b []byte, n int) (v []byte, used int, ok bool) {
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

// uvarint reads an unsigned varint (at most 5 bytes: Kafka's are 32-bit).
func (w *walker) uvarint(b []byte) (v uint64, used int, ok bool) {
	for used < len(b) {
		c := b[used]
		used++
		w.vval |= uint64(c&0x7f) << w.vshift
		w.vshift += 7
		if c < 0x80 {
			v = w.vval
			w.vval, w.vshift, w.vact = 0, 0, false
			return v, used, true
		}
		if w.vshift >= 35 {
			w.dead = true
			return 0, used, false
		}
	}
	w.vact = true
	return 0, used, false
}

// feed runs the program over the next bytes of the message.
func (w *walker) feed(b []byte) {
	for !w.done && !w.dead {
		if w.skip > 0 {
			if len(b) == 0 {
				return
			}
			n := min(w.skip, len(b))
			if w.capture {
				w.nname += copy(w.name[w.nname:], b[:n])
			}
			w.skip -= n
			b = b[n:]
			if w.skip == 0 {
				w.skipped()
			}
			continue
		}
		if w.inRecs {
			if w.recLeft == 0 {
				w.recsDone()
				continue
			}
			if len(b) == 0 {
				return
			}
			b = b[w.recs(b):]
			continue
		}
		if w.pc >= len(w.prog) {
			w.done = true
			return
		}
		used, more := w.step(b)
		b = b[used:]
		if more && len(b) == 0 {
			return
		}
	}
}

// gap steps over n uncaptured bytes of the message.
func (w *walker) gap(n int) {
	for n > 0 && !w.done && !w.dead {
		switch {
		case w.skip > 0 && w.nfix == 0 && !w.vact:
			k := min(w.skip, n)
			if w.capture {
				w.nameOK = false // part of the name is in the gap
			}
			w.skip -= k
			n -= k
			if w.skip == 0 {
				w.skipped()
			}
		case w.inRecs && w.recLeft > 0:
			k := min(w.recLeft, n)
			if w.recSkip >= k {
				w.recSkip -= k
			} else {
				// a batch header is in the gap: the batches after it
				// cannot be found, only the set's end
				w.recExact = false
				w.recSkip = 0
				w.recN = 0
			}
			w.recLeft -= k
			n -= k
			if w.recLeft == 0 {
				w.recsDone()
			}
		case w.pc >= len(w.prog):
			w.done = true
		case w.skip == 0 && !w.inRecs && w.prog[w.pc].op == opSkip:
			k := min(int(w.prog[w.pc].arg)-w.nfix, n)
			w.nfix += k
			n -= k
			if w.nfix == int(w.prog[w.pc].arg) {
				w.nfix = 0
				w.pc++
			}
		default:
			// a structural field is in the gap: the rest of the layout is
			// unknown (the message's end is still known to the framer)
			w.dead = true
		}
	}
}

// skipped finishes the instruction whose skip just ended.
func (w *walker) skipped() {
	switch w.prog[w.pc].op {
	case opTags:
		w.tagsLeft--
		w.sub = 1
		if w.tagsLeft == 0 {
			w.sub = 0
			w.pc++
		}
		return
	case opName, opCName:
		w.capture = false
		w.nameDone()
	}
	w.sub = 0
	w.pc++
}

func (w *walker) nameDone() {
	if !w.nameOK || w.nname == 0 || w.nname > maxName {
		w.nameOK = false
		return
	}
	for _, c := range w.name[:w.nname] {
		if !topicChar(c) {
			w.nameOK = false
			return
		}
	}
}

// startSkip begins skipping a string or blob of n bytes (n <= 0: empty).
func (w *walker) startSkip(n int) {
	if n <= 0 {
		if w.capture {
			w.capture = false
			w.nameDone()
		}
		w.sub = 0
		w.pc++
		return
	}
	w.skip = n
	w.sub = 1
}

// step runs the instruction at pc on b; it returns the bytes used and
// whether it needs more bytes to go on.
func (w *walker) step(b []byte) (used int, more bool) {
	in := w.prog[w.pc]
	switch in.op {
	case opSkip:
		n := int(in.arg) - w.nfix
		if w.nfix == 0 && len(b) >= int(in.arg) {
			w.pc++
			return int(in.arg), false
		}
		k := min(n, len(b))
		w.nfix += k
		if w.nfix == int(in.arg) {
			w.nfix = 0
			w.pc++
			return k, false
		}
		return k, true
	case opErr, opAcks:
		v, u, ok := w.fixed(b, 2)
		if !ok {
			return u, true
		}
		code := int16(binary.BigEndian.Uint16(v))
		if in.op == opErr {
			w.setErr(code)
		} else {
			w.acks, w.acksSeen = code, true
		}
		w.pc++
		return u, false
	case opStr, opName:
		v, u, ok := w.fixed(b, 2)
		if !ok {
			return u, true
		}
		n := int(int16(binary.BigEndian.Uint16(v)))
		if in.op == opName {
			w.capture, w.nname, w.nameOK = true, 0, true
		}
		w.startSkip(n)
		return u, false
	case opCStr, opCName, opCBytes:
		v, u, ok := w.uvarint(b)
		if !ok {
			return u, !w.dead
		}
		if in.op == opCName {
			w.capture, w.nname, w.nameOK = true, 0, true
		}
		w.startSkip(int(v) - 1)
		return u, false
	case opBytes:
		v, u, ok := w.fixed(b, 4)
		if !ok {
			return u, true
		}
		w.startSkip(int(int32(binary.BigEndian.Uint32(v))))
		return u, false
	case opID:
		v, u, ok := w.fixedID(b)
		if !ok {
			return u, true
		}
		w.id, w.idOK = v, true
		w.pc++
		return u, false
	case opRecs, opCRecs:
		var n int
		if in.op == opRecs {
			v, u, ok := w.fixed(b, 4)
			if !ok {
				return u, true
			}
			n, used = int(int32(binary.BigEndian.Uint32(v))), u
		} else {
			v, u, ok := w.uvarint(b)
			if !ok {
				return u, !w.dead
			}
			n, used = int(v)-1, u
		}
		if n < 0 {
			n = 0
		}
		w.inRecs, w.recLeft, w.recN, w.recSkip, w.recExact = true, n, 0, 0, true
		return used, false
	case opArr, opCArr:
		var n int
		if in.op == opArr {
			v, u, ok := w.fixed(b, 4)
			if !ok {
				return u, true
			}
			n, used = int(int32(binary.BigEndian.Uint32(v))), u
		} else {
			v, u, ok := w.uvarint(b)
			if !ok {
				return u, !w.dead
			}
			n, used = int(v)-1, u
		}
		if w.topicsArr < 0 && w.pc+1 < len(w.prog) && w.prog[w.pc+1].op == opTopic {
			w.topicsArr = n
		}
		if n <= 0 {
			w.pc = int(in.arg) + 1
			return used, false
		}
		if w.sp == maxDepth {
			w.dead = true
			return used, false
		}
		w.stack[w.sp] = frame{left: int32(n), begin: int16(w.pc + 1)}
		w.sp++
		w.pc++
		return used, false
	case opEnd:
		f := &w.stack[w.sp-1]
		f.left--
		if f.left > 0 {
			w.pc = int(f.begin)
		} else {
			w.sp--
			w.pc++
		}
		return 0, false
	case opTags:
		if w.sub == 0 {
			v, u, ok := w.uvarint(b)
			if !ok {
				return u, !w.dead
			}
			if v == 0 {
				w.pc++
				return u, false
			}
			w.tagsLeft, w.sub = int(v), 1
			return u, false
		}
		// sub 1: the field's tag; sub 2: its size
		v, u, ok := w.uvarint(b)
		if !ok {
			return u, !w.dead
		}
		if w.sub == 1 {
			w.sub = 2
			return u, false
		}
		if v == 0 {
			w.tagsLeft--
			w.sub = 1
			if w.tagsLeft == 0 {
				w.sub = 0
				w.pc++
			}
			return u, false
		}
		w.skip = int(v)
		return u, false
	case opTopic:
		w.topics++
		w.nname, w.nameOK, w.idOK = 0, false, false
		w.records, w.recsExact = 0, true
		w.pc++
		return 0, false
	case opTopicEnd:
		w.topicEnd()
		w.pc++
		return 0, false
	case opStop:
		w.done = true
		return 0, false
	}
	w.dead = true
	return 0, false
}

func (w *walker) fixedID(b []byte) (id [16]byte, used int, ok bool) {
	// 16 bytes do not fit the 8-byte field buffer: gather them in the
	// record header buffer, unused outside record sets.
	if w.recN == 0 && len(b) >= 16 {
		copy(id[:], b)
		return id, 16, true
	}
	used = copy(w.recHdr[w.recN:16], b)
	w.recN += used
	if w.recN < 16 {
		return id, used, false
	}
	w.recN = 0
	copy(id[:], w.recHdr[:16])
	return id, used, true
}

// topicEnd records the first topic and reports the element.
func (w *walker) topicEnd() {
	if w.topics == 1 {
		switch {
		case w.nameOK:
			w.nfirst = copy(w.first[:], w.name[:w.nname])
			w.firstHas = 1
		case w.idOK:
			w.firstID = w.id
			w.firstHas = 2
		}
	}
	if w.onTopic != nil {
		w.onTopic(w)
	}
}

// recs reads a record set's bytes: each batch's header is gathered up to
// its record count (magic 2: offset 57, 4 bytes) and the rest is skipped;
// legacy message sets (magic 0 and 1) count one record per message.
func (w *walker) recs(b []byte) int {
	used := 0
	for used < len(b) && w.recLeft > 0 {
		if w.recSkip > 0 {
			k := min(w.recSkip, len(b)-used, w.recLeft)
			w.recSkip -= k
			w.recLeft -= k
			used += k
			continue
		}
		if !w.recExact {
			// batches were lost in a gap: skip to the set's end
			k := min(len(b)-used, w.recLeft)
			w.recLeft -= k
			used += k
			continue
		}
		need := 17 // baseOffset 8, length 4, leader epoch / crc 4, magic 1
		if w.recN >= 17 && w.recHdr[16] >= 2 {
			need = 61
		}
		k := min(need-w.recN, len(b)-used, w.recLeft)
		copy(w.recHdr[w.recN:], b[used:used+k])
		w.recN += k
		w.recLeft -= k
		used += k
		if w.recN < need {
			continue
		}
		if need == 17 && w.recHdr[16] >= 2 {
			continue // read on to the record count
		}
		total := 12 + int(int32(binary.BigEndian.Uint32(w.recHdr[8:12])))
		n := 1
		if need == 61 {
			n = int(int32(binary.BigEndian.Uint32(w.recHdr[57:61])))
		}
		switch {
		case n < 0:
			// no batch has a negative record count: garbage, and the
			// element's count is no longer exact
			w.recSkip, w.recsExact = w.recLeft, false
		case total < need || total-need > w.recLeft:
			// a partial batch at the end of a fetch (the broker cuts at
			// max_bytes) or garbage: not counted
			w.recSkip = w.recLeft
		default:
			w.records += n
			w.recSkip = total - need
		}
		w.recN = 0
	}
	return used
}

func (w *walker) recsDone() {
	if !w.recExact {
		w.recsExact = false
	}
	w.inRecs, w.recN = false, 0
	w.pc++
}

// topicChar says c may be in a topic name: Kafka allows [a-zA-Z0-9._-];
// anything else means the bytes are not a topic name.
func topicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
