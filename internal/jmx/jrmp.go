package jmx

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// JRMP, the Java RMI wire protocol (Java RMI specification, chapter 10),
// client side, stream protocol only: a handshake, then Call messages,
// each answered by a ReturnData message on the same connection.
const (
	jrmpMagic      = 0x4a524d49 // "JRMI"
	jrmpVersion    = 2
	streamProtocol = 0x4b
	protocolAck    = 0x4e
	msgCall        = 0x50
	msgReturnData  = 0x51
	msgDGCAck      = 0x54

	returnNormal    = 1
	returnException = 2

	// maxReturn bounds one ReturnData's serialization stream (a
	// CompositeData with its type is a few KiB).
	maxReturn = 1 << 20
)

// ObjID names a remote object in its JVM (java.rmi.server.ObjID).
type ObjID struct {
	Num int64
	UID UID
}

// UID is a java.rmi.server.UID.
type UID struct {
	Unique int32
	Time   int64
	Count  int16
}

func (u UID) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(u.Unique))
	b = binary.BigEndian.AppendUint64(b, uint64(u.Time))
	return binary.BigEndian.AppendUint16(b, uint16(u.Count))
}

func parseUID(b []byte) UID {
	return UID{Unique: int32(binary.BigEndian.Uint32(b)), Time: int64(binary.BigEndian.Uint64(b[4:])), Count: int16(binary.BigEndian.Uint16(b[12:]))}
}

// MethodHash is RMI's hash of a method: the first 8 bytes, little-endian,
// of the SHA-1 of its name and descriptor as DataOutput.writeUTF writes
// them.
func MethodHash(nameAndDescriptor string) int64 {
	b := encodeModifiedUTF8(nameAndDescriptor)
	h := sha1.Sum(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...))
	return int64(binary.LittleEndian.Uint64(h[:8]))
}

// RemoteError is an exception a remote method threw.
type RemoteError struct {
	Class, Message string
	// Cause is the class of the exception's cause, if any.
	Cause string
}

func (e *RemoteError) Error() string {
	s := "jmx: remote " + e.Class
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Cause != "" {
		s += " (cause " + e.Cause + ")"
	}
	return s
}

func remoteError(v any) error {
	o, ok := v.(*Object)
	if !ok {
		return fmt.Errorf("%w: exception return of %s", ErrStream, Describe(v))
	}
	e := &RemoteError{Class: o.Class.Name}
	if m, ok := o.Field("detailMessage"); ok {
		e.Message, _ = m.(string)
	}
	if c, ok := o.Field("cause"); ok && c != o {
		if co, ok := c.(*Object); ok {
			e.Cause = co.Class.Name
		}
	}
	return e
}

// jrmpConn is one stream-protocol connection.
type jrmpConn struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// handshake opens the stream protocol on c.
func handshake(c net.Conn, timeout time.Duration) (*jrmpConn, error) {
	j := &jrmpConn{c: c, r: bufio.NewReader(c), timeout: timeout}
	_ = c.SetDeadline(time.Now().Add(timeout))
	hello := binary.BigEndian.AppendUint32(nil, jrmpMagic)
	hello = binary.BigEndian.AppendUint16(hello, jrmpVersion)
	hello = append(hello, streamProtocol)
	if _, err := c.Write(hello); err != nil {
		return nil, fmt.Errorf("jrmp handshake: %w", err)
	}
	ack, err := j.r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("jrmp handshake: %w", err)
	}
	if ack != protocolAck {
		return nil, fmt.Errorf("jrmp handshake: answer %#x, want ProtocolAck %#x", ack, protocolAck)
	}
	// The endpoint the server sees the client as: its host is sent back
	// as the client's own (the client listens on no port).
	host, err := readUTF(j.r)
	if err != nil {
		return nil, fmt.Errorf("jrmp handshake: %w", err)
	}
	var port [4]byte
	if _, err := io.ReadFull(j.r, port[:]); err != nil {
		return nil, fmt.Errorf("jrmp handshake: %w", err)
	}
	reply := appendUTF(nil, host)
	reply = binary.BigEndian.AppendUint32(reply, 0)
	if _, err := c.Write(reply); err != nil {
		return nil, fmt.Errorf("jrmp handshake: %w", err)
	}
	return j, nil
}

func readUTF(r io.Reader) (string, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return decodeModifiedUTF8(b)
}

func appendUTF(b []byte, s string) []byte {
	u := encodeModifiedUTF8(s)
	b = binary.BigEndian.AppendUint16(b, uint16(len(u)))
	return append(b, u...)
}

// call invokes method hash on obj with the arguments args writes, and
// returns the result's value (nil for a void method when void).
func (j *jrmpConn) call(obj ObjID, hash int64, void bool, args func(*Encoder) error) (any, error) {
	e := NewEncoder()
	e.Long(obj.Num)
	e.Int(obj.UID.Unique)
	e.Long(obj.UID.Time)
	e.Short(obj.UID.Count)
	e.Int(-1) // op: a method hash follows (stubs of protocol 1.2)
	e.Long(hash)
	if args != nil {
		if err := args(e); err != nil {
			return nil, err
		}
	}
	_ = j.c.SetDeadline(time.Now().Add(j.timeout))
	if _, err := j.c.Write(append([]byte{msgCall}, e.Bytes()...)); err != nil {
		return nil, fmt.Errorf("jrmp call: %w", err)
	}
	v, ack, err := readReturn(j.r, void)
	if err != nil {
		return nil, err
	}
	if ack != nil {
		// The result held remote references: the server keeps them
		// until acknowledged.
		if _, err := j.c.Write(ack.append([]byte{msgDGCAck})); err != nil {
			return nil, fmt.Errorf("jrmp DGC ack: %w", err)
		}
	}
	return v, nil
}

// readReturn reads a ReturnData message: the return type, the result's
// UID and the value (none for void). ack is the UID to acknowledge when
// the value holds a remote object's reference.
func readReturn(r *bufio.Reader, void bool) (v any, ack *UID, err error) {
	m, err := r.ReadByte()
	if err != nil {
		return nil, nil, fmt.Errorf("jrmp return: %w", err)
	}
	if m != msgReturnData {
		return nil, nil, fmt.Errorf("jrmp return: message %#x, want ReturnData %#x", m, msgReturnData)
	}
	d, err := NewDecoder(r, maxReturn)
	if err != nil {
		return nil, nil, fmt.Errorf("jrmp return: %w", err)
	}
	h, err := d.ReadBlock(15)
	if err != nil {
		return nil, nil, fmt.Errorf("jrmp return: %w", err)
	}
	uid := parseUID(h[1:])
	switch h[0] {
	case returnNormal:
		if void {
			return nil, nil, nil
		}
	case returnException:
	default:
		return nil, nil, fmt.Errorf("jrmp return: %w: return type %d", ErrStream, h[0])
	}
	v, err = d.ReadObject()
	if err != nil {
		return nil, nil, fmt.Errorf("jrmp return: %w", err)
	}
	if h[0] == returnException {
		return nil, nil, remoteError(v)
	}
	if holdsRef(v) {
		ack = &uid
	}
	return v, ack, nil
}

// holdsRef says v is a remote object's stub.
func holdsRef(v any) bool {
	_, err := stubRef(v)
	return err == nil
}

// ref is where a remote object is: its endpoint's port (the host is
// always dialled on loopback) and its ObjID.
type ref struct {
	Host string
	Port int
	ID   ObjID
}

// stubRef reads a stub's live reference (RemoteObject.writeObject: the
// ref class, then the endpoint and the ObjID). A stub or a dynamic proxy
// of one with RemoteObjectInvocationHandler.
func stubRef(v any) (ref, error) {
	o, ok := v.(*Object)
	if !ok {
		return ref{}, fmt.Errorf("jmx: a remote reference expected, got %s", Describe(v))
	}
	ann := o.Annotation("java.rmi.server.RemoteObject")
	if ann == nil {
		if h, ok := o.Field("h"); ok {
			if ho, ok := h.(*Object); ok {
				ann = ho.Annotation("java.rmi.server.RemoteObject")
			}
		}
	}
	var b bytes.Buffer
	for _, a := range ann {
		blk, ok := a.(BlockData)
		if !ok {
			break // a client socket factory: not supported below
		}
		b.Write(blk)
	}
	if b.Len() == 0 {
		return ref{}, fmt.Errorf("jmx: %s is not a remote stub", Describe(v))
	}
	kind, err := readUTF(&b)
	if err != nil {
		return ref{}, fmt.Errorf("jmx: stub ref: %w", err)
	}
	switch kind {
	case "UnicastRef":
	case "UnicastRef2":
		format, err := b.ReadByte()
		if err != nil {
			return ref{}, fmt.Errorf("jmx: stub ref: %w", err)
		}
		if format != 0 {
			return ref{}, errors.New("jmx: stub ref: the endpoint has a client socket factory (an SSL connector): not supported")
		}
	default:
		return ref{}, fmt.Errorf("jmx: stub ref of kind %q: not supported", kind)
	}
	var r ref
	if r.Host, err = readUTF(&b); err != nil {
		return ref{}, fmt.Errorf("jmx: stub ref: %w", err)
	}
	rest := b.Bytes()
	if len(rest) < 4+8+14 {
		return ref{}, fmt.Errorf("jmx: stub ref: %d bytes after the host, want %d", len(rest), 4+8+14)
	}
	r.Port = int(int32(binary.BigEndian.Uint32(rest)))
	r.ID.Num = int64(binary.BigEndian.Uint64(rest[4:]))
	r.ID.UID = parseUID(rest[12:])
	if r.Port <= 0 || r.Port > 65535 {
		return ref{}, fmt.Errorf("jmx: stub ref: port %d", r.Port)
	}
	return r, nil
}
