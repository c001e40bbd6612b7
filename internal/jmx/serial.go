package jmx

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf16"
)

// A reader of the Java Object Serialization Stream Protocol (the Java
// Object Serialization Specification, chapter 6), in Go: it yields a
// generic tree (Object, Array, Enum, ClassDesc, strings, block data)
// without knowing any Java class. Every length is bounded: a stream is
// read through a byte budget, the handle table and the nesting are
// capped, and nothing is preallocated from a length the stream claims.

// Stream constants (java.io.ObjectStreamConstants).
const (
	streamMagic   = 0xaced
	streamVersion = 5

	tcNull          = 0x70
	tcReference     = 0x71
	tcClassDesc     = 0x72
	tcObject        = 0x73
	tcString        = 0x74
	tcArray         = 0x75
	tcClass         = 0x76
	tcBlockData     = 0x77
	tcEndBlockData  = 0x78
	tcReset         = 0x79
	tcBlockDataLong = 0x7a
	tcException     = 0x7b
	tcLongString    = 0x7c
	tcProxyClassDsc = 0x7d
	tcEnum          = 0x7e

	baseWireHandle = 0x7e0000

	scWriteMethod    = 0x01
	scSerializable   = 0x02
	scExternalizable = 0x04
	scBlockData      = 0x08
)

// Bounds of one stream.
const (
	maxHandles = 1 << 16
	maxDepth   = 64
	// maxPrealloc caps what is allocated ahead of reading elements.
	maxPrealloc = 1024
)

var (
	// ErrStream is the error of bytes that are not a valid serialization
	// stream (or exceed a bound).
	ErrStream = errors.New("java serialization stream")
	// errEndBlock is the TC_ENDBLOCKDATA marker read where contents end.
	errEndBlock = errors.New("end of block data")
)

// ClassDesc is a class descriptor.
type ClassDesc struct {
	Name       string
	SUID       int64
	Flags      byte
	Fields     []FieldDesc
	Proxy      []string // a proxy class's interfaces
	Annotation []any
	Super      *ClassDesc
}

// FieldDesc is one serializable field: Type is its type code (B, C, D,
// F, I, J, S, Z, L, [); ClassName the field's type for L and [.
type FieldDesc struct {
	Type      byte
	Name      string
	ClassName string
}

// ClassData is one class's part of an object: its fields' values by name
// and what its writeObject (or writeExternal) wrote after them.
type ClassData struct {
	Class      *ClassDesc
	Fields     map[string]any
	Annotation []any
}

// Object is a serialized object: its classes' data, the top superclass
// first.
type Object struct {
	Class *ClassDesc
	Data  []ClassData
}

// Array is a serialized array; a byte array's elements are in Bytes.
type Array struct {
	Class *ClassDesc
	Elems []any
	Bytes []byte
}

// Enum is a serialized enum constant.
type Enum struct {
	Class *ClassDesc
	Name  string
}

// BlockData is primitive data written outside an object's fields.
type BlockData []byte

// Field is the value of the field name, searched from the object's
// class up.
func (o *Object) Field(name string) (any, bool) {
	for i := len(o.Data) - 1; i >= 0; i-- {
		if v, ok := o.Data[i].Fields[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// Annotation is what class's writeObject wrote, nil if the object has no
// such class.
func (o *Object) Annotation(class string) []any {
	for _, d := range o.Data {
		if d.Class.Name == class {
			return d.Annotation
		}
	}
	return nil
}

// Decoder reads one serialization stream.
type Decoder struct {
	r       *bufio.Reader
	budget  int64 // bytes left
	handles []any
	depth   int
	// block is the unread rest of the current top-level block data.
	block []byte
}

// NewDecoder reads the stream header from r and returns a decoder that
// reads at most limit bytes in all.
func NewDecoder(r io.Reader, limit int64) (*Decoder, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	d := &Decoder{r: br, budget: limit}
	var h [4]byte
	if err := d.full(h[:]); err != nil {
		return nil, err
	}
	if m, v := binary.BigEndian.Uint16(h[:]), binary.BigEndian.Uint16(h[2:]); m != streamMagic || v != streamVersion {
		return nil, fmt.Errorf("%w: header %#04x %d, want %#04x %d", ErrStream, m, v, streamMagic, streamVersion)
	}
	return d, nil
}

func (d *Decoder) full(b []byte) error {
	if int64(len(b)) > d.budget {
		return fmt.Errorf("%w: longer than its bound", ErrStream)
	}
	d.budget -= int64(len(b))
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: %w", ErrStream, err)
	}
	return nil
}

func (d *Decoder) u8() (byte, error) {
	var b [1]byte
	err := d.full(b[:])
	return b[0], err
}

func (d *Decoder) u16() (uint16, error) {
	var b [2]byte
	err := d.full(b[:])
	return binary.BigEndian.Uint16(b[:]), err
}

func (d *Decoder) u32() (uint32, error) {
	var b [4]byte
	err := d.full(b[:])
	return binary.BigEndian.Uint32(b[:]), err
}

func (d *Decoder) u64() (uint64, error) {
	var b [8]byte
	err := d.full(b[:])
	return binary.BigEndian.Uint64(b[:]), err
}

// bytes reads n bytes, n checked against the budget before allocating.
func (d *Decoder) bytes(n int64) ([]byte, error) {
	if n < 0 || n > d.budget {
		return nil, fmt.Errorf("%w: %d bytes claimed, beyond its bound", ErrStream, n)
	}
	b := make([]byte, n)
	return b, d.full(b)
}

// utf reads a modified UTF-8 string of the given length size (2 or 8).
func (d *Decoder) utf(long bool) (string, error) {
	var n int64
	if long {
		v, err := d.u64()
		if err != nil {
			return "", err
		}
		if v > math.MaxInt64 {
			return "", fmt.Errorf("%w: string length %d", ErrStream, v)
		}
		n = int64(v)
	} else {
		v, err := d.u16()
		if err != nil {
			return "", err
		}
		n = int64(v)
	}
	b, err := d.bytes(n)
	if err != nil {
		return "", err
	}
	return decodeModifiedUTF8(b)
}

// decodeModifiedUTF8 decodes Java's modified UTF-8 (NUL as two bytes,
// supplementary characters as surrogate pairs).
func decodeModifiedUTF8(b []byte) (string, error) {
	ascii := true
	for _, c := range b {
		if c == 0 || c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return string(b), nil
	}
	u := make([]uint16, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c != 0 && c < 0x80:
			u = append(u, uint16(c))
			i++
		case c&0xe0 == 0xc0 && i+1 < len(b) && b[i+1]&0xc0 == 0x80:
			u = append(u, uint16(c&0x1f)<<6|uint16(b[i+1]&0x3f))
			i += 2
		case c&0xf0 == 0xe0 && i+2 < len(b) && b[i+1]&0xc0 == 0x80 && b[i+2]&0xc0 == 0x80:
			u = append(u, uint16(c&0x0f)<<12|uint16(b[i+1]&0x3f)<<6|uint16(b[i+2]&0x3f))
			i += 3
		default:
			return "", fmt.Errorf("%w: malformed modified UTF-8 at byte %d", ErrStream, i)
		}
	}
	return string(utf16.Decode(u)), nil
}

func (d *Decoder) newHandle(v any) (int, error) {
	if len(d.handles) >= maxHandles {
		return 0, fmt.Errorf("%w: more than %d handles", ErrStream, maxHandles)
	}
	d.handles = append(d.handles, v)
	return len(d.handles) - 1, nil
}

func (d *Decoder) reference() (any, error) {
	h, err := d.u32()
	if err != nil {
		return nil, err
	}
	i := int64(h) - baseWireHandle
	if i < 0 || i >= int64(len(d.handles)) {
		return nil, fmt.Errorf("%w: reference %#x to no handle", ErrStream, h)
	}
	return d.handles[i], nil
}

// ReadObject reads the next object of the stream's top level; block
// data left unread before it is an error.
func (d *Decoder) ReadObject() (any, error) {
	if len(d.block) > 0 {
		return nil, fmt.Errorf("%w: %d bytes of block data before an object", ErrStream, len(d.block))
	}
	v, err := d.content(false)
	if errors.Is(err, errEndBlock) {
		return nil, fmt.Errorf("%w: end of block data at the top level", ErrStream)
	}
	return v, err
}

// ReadBlock reads n bytes of the top level's block data, across blocks.
func (d *Decoder) ReadBlock(n int) ([]byte, error) {
	out := make([]byte, 0, min(n, maxPrealloc))
	for len(out) < n {
		if len(d.block) == 0 {
			v, err := d.content(true)
			if err != nil {
				return nil, err
			}
			b, ok := v.(BlockData)
			if !ok {
				return nil, fmt.Errorf("%w: %T where block data was expected", ErrStream, v)
			}
			d.block = b
		}
		k := min(n-len(out), len(d.block))
		out = append(out, d.block[:k]...)
		d.block = d.block[k:]
	}
	return out, nil
}

// content reads one content item: an object, or block data where
// blockOK.
func (d *Decoder) content(blockOK bool) (any, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrStream, maxDepth)
	}
	for {
		tc, err := d.u8()
		if err != nil {
			return nil, err
		}
		switch tc {
		case tcReset:
			d.handles = d.handles[:0]
			continue
		case tcNull:
			return nil, nil
		case tcReference:
			return d.reference()
		case tcString, tcLongString:
			return d.newString(tc == tcLongString)
		case tcClassDesc, tcProxyClassDsc:
			return d.classDescAfter(tc)
		case tcClass:
			cd, err := d.classDesc()
			if err != nil {
				return nil, err
			}
			_, err = d.newHandle(cd)
			return cd, err
		case tcObject:
			return d.object()
		case tcArray:
			return d.array()
		case tcEnum:
			return d.enum()
		case tcException:
			d.handles = d.handles[:0]
			v, err := d.content(false)
			if err != nil {
				return nil, err
			}
			d.handles = d.handles[:0]
			return nil, &ExceptionError{Throwable: v}
		case tcBlockData, tcBlockDataLong:
			if !blockOK {
				return nil, fmt.Errorf("%w: block data where an object was expected", ErrStream)
			}
			var n int64
			if tc == tcBlockData {
				b, err := d.u8()
				if err != nil {
					return nil, err
				}
				n = int64(b)
			} else {
				v, err := d.u32()
				if err != nil {
					return nil, err
				}
				n = int64(int32(v))
			}
			b, err := d.bytes(n)
			return BlockData(b), err
		case tcEndBlockData:
			return nil, errEndBlock
		default:
			return nil, fmt.Errorf("%w: unknown type code %#x", ErrStream, tc)
		}
	}
}

// ExceptionError is a TC_EXCEPTION: the writer failed while writing and
// sent the exception instead.
type ExceptionError struct{ Throwable any }

func (e *ExceptionError) Error() string {
	return fmt.Sprintf("java serialization stream: the writer failed: %s", Describe(e.Throwable))
}

func (d *Decoder) newString(long bool) (string, error) {
	h, err := d.newHandle(nil)
	if err != nil {
		return "", err
	}
	s, err := d.utf(long)
	d.handles[h] = s
	return s, err
}

// stringObject reads a String object (a field's class name, an enum
// constant's name): TC_STRING or a reference to one.
func (d *Decoder) stringObject() (string, error) {
	v, err := d.content(false)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %T where a string was expected", ErrStream, v)
	}
	return s, nil
}

// classDesc reads a class descriptor: new, null or a reference.
func (d *Decoder) classDesc() (*ClassDesc, error) {
	tc, err := d.u8()
	if err != nil {
		return nil, err
	}
	switch tc {
	case tcNull:
		return nil, nil
	case tcReference:
		v, err := d.reference()
		if err != nil {
			return nil, err
		}
		cd, ok := v.(*ClassDesc)
		if !ok {
			return nil, fmt.Errorf("%w: reference to a %T where a class descriptor was expected", ErrStream, v)
		}
		return cd, nil
	case tcClassDesc, tcProxyClassDsc:
		return d.classDescAfter(tc)
	default:
		return nil, fmt.Errorf("%w: type code %#x where a class descriptor was expected", ErrStream, tc)
	}
}

func (d *Decoder) classDescAfter(tc byte) (*ClassDesc, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrStream, maxDepth)
	}
	cd := &ClassDesc{}
	if tc == tcProxyClassDsc {
		if _, err := d.newHandle(cd); err != nil {
			return nil, err
		}
		n, err := d.u32()
		if err != nil {
			return nil, err
		}
		if n > 65535 {
			return nil, fmt.Errorf("%w: proxy class of %d interfaces", ErrStream, n)
		}
		for range n {
			s, err := d.utf(false)
			if err != nil {
				return nil, err
			}
			cd.Proxy = append(cd.Proxy, s)
		}
	} else {
		name, err := d.utf(false)
		if err != nil {
			return nil, err
		}
		suid, err := d.u64()
		if err != nil {
			return nil, err
		}
		cd.Name, cd.SUID = name, int64(suid)
		if _, err := d.newHandle(cd); err != nil {
			return nil, err
		}
		if cd.Flags, err = d.u8(); err != nil {
			return nil, err
		}
		n, err := d.u16()
		if err != nil {
			return nil, err
		}
		cd.Fields = make([]FieldDesc, 0, min(int(n), maxPrealloc))
		for range n {
			var f FieldDesc
			if f.Type, err = d.u8(); err != nil {
				return nil, err
			}
			if f.Name, err = d.utf(false); err != nil {
				return nil, err
			}
			switch f.Type {
			case 'B', 'C', 'D', 'F', 'I', 'J', 'S', 'Z':
			case 'L', '[':
				if f.ClassName, err = d.stringObject(); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("%w: class %s field %s of type code %q", ErrStream, cd.Name, f.Name, f.Type)
			}
			cd.Fields = append(cd.Fields, f)
		}
	}
	ann, err := d.annotation()
	if err != nil {
		return nil, err
	}
	cd.Annotation = ann
	if cd.Super, err = d.classDesc(); err != nil {
		return nil, err
	}
	return cd, nil
}

// annotation reads contents up to TC_ENDBLOCKDATA.
func (d *Decoder) annotation() ([]any, error) {
	var out []any
	for {
		v, err := d.content(true)
		if errors.Is(err, errEndBlock) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

func (d *Decoder) object() (*Object, error) {
	cd, err := d.classDesc()
	if err != nil {
		return nil, err
	}
	if cd == nil {
		return nil, fmt.Errorf("%w: object of a null class", ErrStream)
	}
	o := &Object{Class: cd}
	if _, err := d.newHandle(o); err != nil {
		return nil, err
	}
	var chain []*ClassDesc
	for c := cd; c != nil; c = c.Super {
		if len(chain) >= maxDepth {
			return nil, fmt.Errorf("%w: class hierarchy deeper than %d", ErrStream, maxDepth)
		}
		chain = append(chain, c)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c := chain[i]
		cdata := ClassData{Class: c}
		switch {
		case c.Flags&scExternalizable != 0:
			if c.Flags&scBlockData == 0 {
				return nil, fmt.Errorf("%w: %s externalized in protocol version 1", ErrStream, c.Name)
			}
			if cdata.Annotation, err = d.annotation(); err != nil {
				return nil, err
			}
		case c.Flags&scSerializable != 0:
			cdata.Fields = make(map[string]any, min(len(c.Fields), maxPrealloc))
			for _, f := range c.Fields {
				v, err := d.value(f.Type)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", c.Name, f.Name, err)
				}
				cdata.Fields[f.Name] = v
			}
			if c.Flags&scWriteMethod != 0 {
				if cdata.Annotation, err = d.annotation(); err != nil {
					return nil, err
				}
			}
		}
		o.Data = append(o.Data, cdata)
	}
	return o, nil
}

// value reads one field or array element of type code t.
func (d *Decoder) value(t byte) (any, error) {
	switch t {
	case 'B':
		b, err := d.u8()
		return int8(b), err
	case 'Z':
		b, err := d.u8()
		return b != 0, err
	case 'C':
		v, err := d.u16()
		return v, err
	case 'S':
		v, err := d.u16()
		return int16(v), err
	case 'I':
		v, err := d.u32()
		return int32(v), err
	case 'F':
		v, err := d.u32()
		return math.Float32frombits(v), err
	case 'J':
		v, err := d.u64()
		return int64(v), err
	case 'D':
		v, err := d.u64()
		return math.Float64frombits(v), err
	case 'L', '[':
		return d.content(false)
	}
	return nil, fmt.Errorf("%w: type code %q", ErrStream, t)
}

func (d *Decoder) array() (*Array, error) {
	cd, err := d.classDesc()
	if err != nil {
		return nil, err
	}
	if cd == nil || len(cd.Name) < 2 || cd.Name[0] != '[' {
		return nil, fmt.Errorf("%w: array of class %v", ErrStream, cd)
	}
	a := &Array{Class: cd}
	if _, err := d.newHandle(a); err != nil {
		return nil, err
	}
	n, err := d.u32()
	if err != nil {
		return nil, err
	}
	if int32(n) < 0 || int64(n) > d.budget {
		return nil, fmt.Errorf("%w: array of %d elements, beyond its bound", ErrStream, int32(n))
	}
	if cd.Name[1] == 'B' {
		a.Bytes, err = d.bytes(int64(n))
		return a, err
	}
	a.Elems = make([]any, 0, min(int(n), maxPrealloc))
	for range n {
		v, err := d.value(cd.Name[1])
		if err != nil {
			return nil, err
		}
		a.Elems = append(a.Elems, v)
	}
	return a, nil
}

func (d *Decoder) enum() (*Enum, error) {
	cd, err := d.classDesc()
	if err != nil {
		return nil, err
	}
	e := &Enum{Class: cd}
	h, err := d.newHandle(e)
	if err != nil {
		return nil, err
	}
	if e.Name, err = d.stringObject(); err != nil {
		return nil, err
	}
	d.handles[h] = e
	return e, nil
}

// Describe names a value for messages: a class name and, for a
// Throwable, its message.
func Describe(v any) string {
	switch x := v.(type) {
	case *Object:
		if m, ok := x.Field("detailMessage"); ok && m != nil {
			return fmt.Sprintf("%s: %v", x.Class.Name, m)
		}
		return x.Class.Name
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}
