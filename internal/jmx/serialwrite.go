package jmx

import (
	"encoding/binary"
	"fmt"
	"unicode/utf16"
)

// Encoder writes the little of the serialization protocol a JMX call
// sends: block data, strings, null and javax.management.ObjectName. Each
// class descriptor carries a null annotation, as RMI's
// MarshalOutputStream writes it (the codebase: none), which RMI's
// MarshalInputStream reads back and a plain ObjectInputStream skips.
type Encoder struct {
	buf   []byte
	block []byte // block data not yet written
}

// objectNameSUID is javax.management.ObjectName's serialVersionUID.
const objectNameSUID = 1081892073854801359

// NewEncoder starts a stream.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.buf = binary.BigEndian.AppendUint16(e.buf, streamMagic)
	e.buf = binary.BigEndian.AppendUint16(e.buf, streamVersion)
	return e
}

// Bytes ends the stream (its pending block data) and returns it.
func (e *Encoder) Bytes() []byte {
	e.flush()
	return e.buf
}

// Byte, Int, Long and Short append primitive data (block data).
func (e *Encoder) Byte(v byte)   { e.block = append(e.block, v) }
func (e *Encoder) Short(v int16) { e.block = binary.BigEndian.AppendUint16(e.block, uint16(v)) }
func (e *Encoder) Int(v int32)   { e.block = binary.BigEndian.AppendUint32(e.block, uint32(v)) }
func (e *Encoder) Long(v int64)  { e.block = binary.BigEndian.AppendUint64(e.block, uint64(v)) }

func (e *Encoder) flush() {
	for len(e.block) > 0 {
		n := len(e.block)
		if n <= 0xff {
			e.buf = append(e.buf, tcBlockData, byte(n))
		} else {
			n = min(n, 1<<20)
			e.buf = append(e.buf, tcBlockDataLong)
			e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
		}
		e.buf = append(e.buf, e.block[:n]...)
		e.block = e.block[n:]
	}
	e.block = nil
}

// Null writes a null reference.
func (e *Encoder) Null() {
	e.flush()
	e.buf = append(e.buf, tcNull)
}

// String writes a String object.
func (e *Encoder) String(s string) error {
	e.flush()
	b := encodeModifiedUTF8(s)
	if len(b) > 0xffff {
		e.buf = append(e.buf, tcLongString)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(len(b)))
	} else {
		e.buf = append(e.buf, tcString)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(b)))
	}
	e.buf = append(e.buf, b...)
	return nil
}

// ObjectName writes a javax.management.ObjectName: its class (no
// serializable fields) and, from its writeObject, the name as a String.
func (e *Encoder) ObjectName(name string) error {
	if err := checkObjectName(name); err != nil {
		return err
	}
	e.flush()
	const cls = "javax.management.ObjectName"
	e.buf = append(e.buf, tcObject, tcClassDesc)
	e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(cls)))
	e.buf = append(e.buf, cls...)
	e.buf = binary.BigEndian.AppendUint64(e.buf, objectNameSUID)
	e.buf = append(e.buf, scSerializable|scWriteMethod, 0, 0, // flags, no fields
		tcNull, tcEndBlockData, // annotation: no codebase
		tcNull) // superclass: none serializable
	if err := e.String(name); err != nil {
		return err
	}
	e.buf = append(e.buf, tcEndBlockData)
	return nil
}

// checkObjectName rejects what cannot be an ObjectName ("domain:key=value[,...]").
func checkObjectName(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] == ':' {
			if i+1 < len(name) {
				return nil
			}
			break
		}
	}
	return fmt.Errorf("jmx: %q is not an ObjectName (domain:key=value,...)", name)
}

// encodeModifiedUTF8 is Java's DataOutput.writeUTF encoding.
func encodeModifiedUTF8(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, c := range utf16.Encode([]rune(s)) {
		switch {
		case c != 0 && c < 0x80:
			out = append(out, byte(c))
		case c < 0x800:
			out = append(out, 0xc0|byte(c>>6), 0x80|byte(c&0x3f))
		default:
			out = append(out, 0xe0|byte(c>>12), 0x80|byte(c>>6&0x3f), 0x80|byte(c&0x3f))
		}
	}
	return out
}
