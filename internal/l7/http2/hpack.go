package http2

import "golang.org/x/net/http2/hpack"

// HPACK bounds, per direction.
const (
	// MaxTable bounds the dynamic table an encoder may make the decoder
	// keep (RFC 7541 size units): a larger size update is clamped, which
	// only makes the oldest entries unknown, never wrong.
	MaxTable = 16 << 10
	// RepCap is the longest header field representation decoded; a longer
	// one (a huge cookie) is stepped over, and the field counts as
	// undecodable.
	RepCap = 4 << 10
	// initialTable is every HPACK table's size before a size update.
	initialTable = 4096
)

// Representation kinds (RFC 7541 section 6), by their first byte.
const (
	kIndexed  = iota // 1xxxxxxx
	kLitInc          // 01xxxxxx: literal, added to the table
	kSize            // 001xxxxx: dynamic table size update
	kLitNever        // 0001xxxx: literal never indexed
	kLitNo           // 0000xxxx: literal without indexing
)

// Scanner phases.
const (
	rpStart   = iota // a representation's first byte comes next
	rpInt            // continuation bytes of its prefix integer
	rpStrHead        // a string's first byte (H bit, length prefix)
	rpStrLen         // continuation bytes of a string's length
	rpStr            // string bytes
)

// Fields the parser reads, as codes kept per table entry.
const (
	fOther       = iota // a field the parser does not read
	fMethod             // :method
	fPath               // :path
	fStatus             // :status
	fContentType        // content-type
	fGRPCStatus         // grpc-status
	fUnknown            // a placeholder: its name is not known
)

var fieldNames = [...]string{fMethod: ":method", fPath: ":path", fStatus: ":status", fContentType: "content-type", fGRPCStatus: "grpc-status"}

func fieldOf(name string) uint8 {
	switch name {
	case ":method":
		return fMethod
	case ":path":
		return fPath
	case ":status":
		return fStatus
	case "content-type":
		return fContentType
	case "grpc-status":
		return fGRPCStatus
	case "":
		return fUnknown
	}
	return fOther
}

// entry is what the parser keeps of a table entry: its RFC 7541 size,
// which field it is, and for the fields read the value (the Decoder's own
// string, not a copy).
type entry struct {
	size  uint32
	field uint8
	value string
}

// staticTable is HPACK's static table (RFC 7541 appendix A), read once
// from the Decoder itself.
var staticTable = func() (t [62]entry) {
	d := hpack.NewDecoder(initialTable, nil)
	for i := 1; i < len(t); i++ {
		hf, err := d.DecodeFull([]byte{0x80 | byte(i)})
		if err != nil || len(hf) != 1 {
			panic("hpack static table entry " + string(rune('0'+i)) + " does not decode")
		}
		t[i] = entry{field: fieldOf(hf[0].Name), value: hf[0].Value}
	}
	return t
}()

// hpackDir decodes one direction's header blocks. It walks each block's
// representations itself, hands the literals to x/net's Decoder one at a
// time, and keeps a mirror of the dynamic table's bookkeeping (each
// entry's size, which field it is, the value of the fields read), fed by
// the Decoder's own callbacks for every entry it adds, and evicting as
// RFC 7541 (and the Decoder) do. With it:
//
//   - an indexed field - most fields once a connection is warm - is
//     resolved without calling the Decoder (an indexed field does not
//     change the table), and skipped unless the parser reads it;
//   - an index beyond the table (entries added before the capture began,
//     or cleared after lost bytes) makes that field unknown, and decoding
//     goes on with the next representation;
//   - a literal added to the table whose name is such an unknown entry,
//     or that is longer than RepCap, is added as a placeholder with an
//     empty name (and its value, or nothing) instead: no larger than the
//     real entry, so the table never evicts earlier than the encoder's, and
//     every index the encoder can use still points at the same entry (or
//     at a placeholder, which decodes as unknown);
//   - size updates are applied directly, clamped at MaxTable;
//   - literals not added to the table are decoded here, and only for the
//     fields the parser reads, without allocating.
type hpackDir struct {
	dec      *hpack.Decoder
	tableMax uint32

	// The dynamic table's mirror: a ring (its length a power of two),
	// oldest entry at head.
	ents []entry
	head int
	len  int
	size uint32
	// adding: the Decoder is decoding a literal it adds to the table;
	// its callback records the entry.
	adding bool
	// verify (tests): resolve every indexed field through the Decoder
	// too, and count disagreements with the mirror in mismatches.
	verify     bool
	probe      bool
	probed     hpack.HeaderField
	mismatches int

	phase   uint8
	kind    uint8
	v       uint64 // integer being read
	shift   uint
	nameIdx uint64
	str     uint8  // string being read: 0 name, 1 value
	huff    bool   // ... is Huffman-coded
	left    uint64 // its bytes still to come
	n       int    // the representation's bytes so far
	over    bool   // it outgrew RepCap: not kept
	rep     []byte // the representation (at most RepCap bytes)
	nameOff int    // offset of the literal name's first data byte
	nameLen int
	nameH   bool
	valHead int // offset of the value string's first byte (H bit, length), -1 before
	valOff  int // offset of its first data byte
	valLen  int
	valH    bool

	small [16]byte // a rewritten representation (verify)
}

func (h *hpackDir) init(emit func(hpack.HeaderField)) {
	h.dec = hpack.NewDecoder(initialTable, emit)
	h.dec.SetAllowedMaxDynamicTableSize(MaxTable)
	h.tableMax = initialTable
}

// clear forgets the dynamic table: after bytes were lost that may have
// added entries, every index into the old entries could point at the
// wrong one. Entries added from now on are tracked again.
func (h *hpackDir) clear() {
	h.dec.SetMaxDynamicTableSize(0)
	h.dec.SetMaxDynamicTableSize(h.tableMax)
	_ = h.dec.Close()
	h.head, h.len, h.size = 0, 0, 0
	clear(h.ents)
	h.abort()
}

// added records the entry the Decoder just added (from its callback).
func (h *hpackDir) added(f hpack.HeaderField) {
	e := entry{size: uint32(len(f.Name) + len(f.Value) + 32), field: fieldOf(f.Name)}
	if e.field != fOther && e.field != fUnknown {
		e.value = f.Value
	}
	if h.len == len(h.ents) {
		grown := make([]entry, max(2*len(h.ents), 16))
		for i := 0; i < h.len; i++ {
			grown[i] = h.ents[(h.head+i)&(len(h.ents)-1)]
		}
		h.ents, h.head = grown, 0
	}
	h.ents[(h.head+h.len)&(len(h.ents)-1)] = e
	h.len++
	h.size += e.size
	h.evict()
}

// evict drops the oldest entries while the table is over its size, as
// RFC 7541 section 4.4 (and the Decoder) do.
func (h *hpackDir) evict() {
	for h.size > h.tableMax && h.len > 0 {
		h.size -= h.ents[h.head].size
		h.ents[h.head] = entry{}
		h.head = (h.head + 1) & (len(h.ents) - 1)
		h.len--
	}
}

// at returns the entry at HPACK index i (static or dynamic), ok false
// past the table.
func (h *hpackDir) at(i uint64) (entry, bool) {
	if i < uint64(len(staticTable)) {
		return staticTable[i], i > 0
	}
	j := i - uint64(len(staticTable))
	if j >= uint64(h.len) {
		return entry{}, false
	}
	return h.ents[(h.head+h.len-1-int(j))&(len(h.ents)-1)], true
}

// abort drops the representation being scanned (its block is broken).
func (h *hpackDir) abort() {
	h.phase, h.n, h.over = rpStart, 0, false
	h.rep = h.rep[:0]
}

// fieldSink receives decoded fields: unknown counts a field that could
// not be decoded.
type fieldSink interface {
	unknown()
	field(name string, value string)
	fieldBytes(name string, value []byte)
}

// write scans block bytes, decoding every representation they complete.
// It reports false when the bytes cannot be HPACK (the block is broken).
func (h *hpackDir) write(b []byte, sink fieldSink) bool {
	for len(b) > 0 {
		if h.phase == rpStart {
			h.begin(b[0])
		}
		if h.phase == rpStr {
			k := int(min(h.left, uint64(len(b))))
			h.keep(b[:k])
			b = b[k:]
			h.left -= uint64(k)
			if h.left == 0 {
				h.strDone(sink)
			}
			continue
		}
		c := b[0]
		b = b[1:]
		h.keep([]byte{c}) // does not escape: keep copies
		switch h.phase {
		case rpStart:
			if !h.prefixInt(c, sink) {
				return false
			}
		case rpInt:
			done, ok := h.intByte(c)
			if !ok {
				return false
			}
			if done {
				h.intDone(sink)
			}
		case rpStrHead:
			if h.str == 1 {
				h.valHead = h.n - 1
			}
			h.huff = c&0x80 != 0
			h.v, h.shift = uint64(c&0x7f), 0
			if h.v < 0x7f {
				h.strLen(sink)
			} else {
				h.phase = rpStrLen
			}
		case rpStrLen:
			done, ok := h.intByte(c)
			if !ok {
				return false
			}
			if done {
				h.strLen(sink)
			}
		}
	}
	return true
}

func (h *hpackDir) begin(c byte) {
	h.n, h.over = 0, false
	h.rep = h.rep[:0]
	h.nameIdx, h.str = 0, 0
	switch {
	case c&0x80 != 0:
		h.kind = kIndexed
	case c&0xc0 == 0x40:
		h.kind = kLitInc
	case c&0xe0 == 0x20:
		h.kind = kSize
	case c&0xf0 == 0x10:
		h.kind = kLitNever
	default:
		h.kind = kLitNo
	}
}

// keep appends b to the representation while it fits in RepCap.
func (h *hpackDir) keep(b []byte) {
	h.n += len(b)
	if h.over {
		return
	}
	if h.n > RepCap {
		h.over = true
		return
	}
	if h.rep == nil {
		h.rep = make([]byte, 0, 64)
	}
	h.rep = append(h.rep, b...)
}

// prefixInt reads the integer in a representation's first byte.
func (h *hpackDir) prefixInt(c byte, sink fieldSink) bool {
	var bits uint
	switch h.kind {
	case kIndexed:
		bits = 7
	case kLitInc:
		bits = 6
	case kSize:
		bits = 5
	default:
		bits = 4
	}
	mask := byte(1)<<bits - 1
	h.v, h.shift = uint64(c&mask), 0
	if h.kind == kIndexed && h.v == 0 {
		return false // index 0 is a decoding error
	}
	if c&mask < mask {
		h.intDone(sink)
	} else {
		h.phase = rpInt
	}
	return true
}

// intByte adds a continuation byte to the integer being read.
func (h *hpackDir) intByte(c byte) (done, ok bool) {
	if h.shift > 28 {
		return false, false // no sane size or index needs more than 32 bits
	}
	h.v += uint64(c&0x7f) << h.shift
	h.shift += 7
	return c&0x80 == 0, true
}

// intDone: the prefix integer is read.
func (h *hpackDir) intDone(sink fieldSink) {
	switch h.kind {
	case kIndexed, kSize:
		h.done(sink)
		return
	}
	h.nameIdx = h.v
	h.str = 1
	if h.nameIdx == 0 {
		h.str = 0
		h.nameOff = -1
	}
	h.valHead = -1
	h.phase = rpStrHead
}

// strLen: a string's length is read; its data follows.
func (h *hpackDir) strLen(sink fieldSink) {
	h.left = h.v
	if h.str == 0 {
		h.nameOff, h.nameLen, h.nameH = h.n, int(h.v), h.huff
	} else {
		h.valOff, h.valLen, h.valH = h.n, int(h.v), h.huff
	}
	if h.left == 0 {
		h.strDone(sink)
		return
	}
	h.phase = rpStr
}

// strDone: a string's data is read.
func (h *hpackDir) strDone(sink fieldSink) {
	if h.str == 0 {
		h.str = 1
		h.phase = rpStrHead
		return
	}
	h.done(sink)
}

// done handles a complete representation.
func (h *hpackDir) done(sink fieldSink) {
	h.phase = rpStart
	switch h.kind {
	case kSize:
		size := uint32(min(h.v, MaxTable))
		h.tableMax = size
		h.dec.SetMaxDynamicTableSize(size)
		h.evict()
	case kIndexed:
		e, ok := h.at(h.v)
		if h.verify {
			h.check(h.rep, e, ok)
		}
		switch {
		case !ok || e.field == fUnknown:
			sink.unknown()
		case e.field != fOther:
			sink.field(fieldNames[e.field], e.value)
		}
	case kLitInc:
		if h.over {
			h.placeholder(nil)
			sink.unknown()
			return
		}
		h.adding = true
		_, err := h.dec.Write(h.rep)
		h.adding = false
		switch {
		case err == nil:
		case unknownIndex(err):
			// The name is an entry we cannot know: add the value under
			// an empty name.
			h.placeholder(h.rep[h.valHead:])
			sink.unknown()
		default:
			// Not HPACK the encoder's peer would accept: the table can
			// no longer be trusted.
			h.clear()
			sink.unknown()
		}
	case kLitNo, kLitNever:
		h.literal(sink)
	}
}

// check (verify) resolves the indexed field rep through the Decoder and
// counts a disagreement with the mirror's e (ok: within the table).
func (h *hpackDir) check(rep []byte, e entry, ok bool) {
	h.probe = true
	_, err := h.dec.Write(rep)
	h.probe = false
	switch {
	case err != nil:
		if ok {
			h.mismatches++
		}
	case !ok, fieldOf(h.probed.Name) != e.field,
		e.field != fOther && e.field != fUnknown && h.probed.Value != e.value:
		h.mismatches++
	}
}

// unknownIndex reports whether err is the Decoder's answer to an index
// past its table (hpack.DecodingError does not unwrap).
func unknownIndex(err error) bool {
	de, ok := err.(hpack.DecodingError) //nolint:errorlint // the Decoder returns it unwrapped; errors.As would allocate on a path mid-connection captures take often
	if !ok {
		return false
	}
	_, ok = de.Err.(hpack.InvalidIndexError) //nolint:errorlint // as above
	return ok
}

// placeholder adds an entry with an empty name and the given value string
// (its H bit, length and data as on the wire; nil: an empty value).
func (h *hpackDir) placeholder(value []byte) {
	h.adding = true
	defer func() { h.adding = false }()
	buf := append(h.small[:0], 0x40, 0x00)
	if value == nil {
		buf = append(buf, 0x00)
		_, _ = h.dec.Write(buf)
		return
	}
	// value may be long: write the three parts as one representation.
	rep := make([]byte, 0, len(buf)+len(value))
	rep = append(append(rep, buf...), value...)
	if _, err := h.dec.Write(rep); err != nil {
		h.clear()
	}
}

// literal handles a field not added to the table: it changes nothing in
// the table, so it is decoded here, and only if the parser reads it.
func (h *hpackDir) literal(sink fieldSink) {
	var field uint8
	if h.nameIdx == 0 {
		if h.nameOff+h.nameLen > len(h.rep) {
			return // a name longer than RepCap: not one the parser reads
		}
		name := h.rep[h.nameOff : h.nameOff+h.nameLen]
		if h.nameH {
			var nb nameBuf
			if !nb.huffman(name) {
				return // longer than any name the parser reads
			}
			name = nb.b[:nb.n]
		}
		field = fieldOf(canonical(name))
	} else {
		e, ok := h.at(h.nameIdx)
		if h.verify && h.valHead > 0 && h.valHead < len(h.small) {
			// The Decoder resolves the name of the same literal with an
			// empty value.
			h.check(append(append(h.small[:0], h.rep[:h.valHead]...), 0x00), entry{field: e.field}, ok)
		}
		if !ok {
			sink.unknown()
			return
		}
		field = e.field
	}
	switch field {
	case fOther:
	case fUnknown:
		sink.unknown()
	default:
		h.emitLiteral(sink, fieldNames[field])
	}
}

// emitLiteral passes the literal value of field name on.
func (h *hpackDir) emitLiteral(sink fieldSink, name string) {
	if h.over {
		sink.unknown()
		return
	}
	lit := h.rep[h.valOff : h.valOff+h.valLen]
	if !h.valH {
		sink.fieldBytes(name, lit)
		return
	}
	var vb valueBuf
	if _, err := hpack.HuffmanDecode(&vb, lit); err != nil || vb.over {
		sink.unknown()
		return
	}
	sink.fieldBytes(name, vb.b[:vb.n])
}

// nameBuf holds a decoded field name (the parser reads short ones only).
type nameBuf struct {
	b [32]byte
	n int
}

func (nb *nameBuf) huffman(v []byte) bool {
	if len(v) > len(nb.b) {
		return false // Huffman never shrinks text below 5/8: too long
	}
	var vb valueBuf
	if _, err := hpack.HuffmanDecode(&vb, v); err != nil || vb.over || vb.n > len(nb.b) {
		return false
	}
	nb.n = copy(nb.b[:], vb.b[:vb.n])
	return true
}

// valueBuf is an io.Writer into a fixed buffer, for Huffman decoding
// without allocating.
type valueBuf struct {
	b    [512]byte
	n    int
	over bool
}

func (vb *valueBuf) Write(p []byte) (int, error) {
	if vb.n+len(p) > len(vb.b) {
		vb.over = true
		p = p[:len(vb.b)-vb.n]
	}
	vb.n += copy(vb.b[vb.n:], p)
	return len(p), nil
}

// canonical returns the constant string of a field name the parser reads
// ("-", not a name read, for others), without allocating.
func canonical(name []byte) string {
	switch string(name) {
	case ":method":
		return ":method"
	case ":path":
		return ":path"
	case ":status":
		return ":status"
	case "content-type":
		return "content-type"
	case "grpc-status":
		return "grpc-status"
	}
	return "-"
}
