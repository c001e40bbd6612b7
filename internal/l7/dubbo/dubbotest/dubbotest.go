// Package dubbotest writes Dubbo2 frames as Apache Dubbo's ExchangeCodec
// and hessian2 serialization do, for the tests of the parser and of the
// probes that use it.
package dubbotest

import (
	"encoding/binary"
	"unicode/utf16"
)

// Call is one request.
type Call struct {
	ID                       uint64
	Service, Version, Method string
	OneWay                   bool
	// Args is appended after the parameter types: hessian2 values.
	Args []byte
}

// String appends s as a hessian2 string.
func String(b []byte, s string) []byte {
	n := len(utf16.Encode([]rune(s)))
	switch {
	case n <= 31:
		b = append(b, byte(n))
	case n <= 1023:
		b = append(b, byte(0x30+n>>8), byte(n))
	default:
		b = append(b, 'S', byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// Int appends v as a hessian2 int.
func Int(b []byte, v int32) []byte {
	switch {
	case v >= -16 && v <= 47:
		return append(b, byte(v+0x90))
	case v >= -2048 && v <= 2047:
		return append(b, byte(0xc8+v>>8), byte(v))
	}
	b = append(b, 'I')
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

func frame(b []byte, flag, status byte, id uint64, body []byte) []byte {
	b = append(b, 0xda, 0xbb, flag|2, status)
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// Request appends c's frame: dubbo version 2.0.2, the service path,
// version and method, a parameter type descriptor, the arguments and an
// empty attachment map.
func Request(b []byte, c Call) []byte {
	body := String(nil, "2.0.2")
	body = String(body, c.Service)
	body = String(body, c.Version)
	body = String(body, c.Method)
	body = String(body, "Ljava/lang/String;")
	body = append(body, c.Args...)
	body = append(body, 'H', 'Z') // untyped map, end
	flag := byte(0x80)
	if !c.OneWay {
		flag |= 0x40
	}
	return frame(b, flag, 0, c.ID, body)
}

// Response appends the response to request id with status; for status 20
// the body is respType then a string value (or exception message).
func Response(b []byte, id uint64, status byte, respType int32, value string) []byte {
	var body []byte
	if status == 20 {
		body = String(Int(nil, respType), value)
	} else {
		body = String(nil, value) // the error message
	}
	return frame(b, 0, status, id, body)
}

// Heartbeat appends a heartbeat request (event flag, null body).
func Heartbeat(b []byte, id uint64) []byte {
	return frame(b, 0x80|0x40|0x20, 0, id, []byte{'N'})
}

// HeartbeatReply appends the reply to heartbeat id.
func HeartbeatReply(b []byte, id uint64) []byte {
	return frame(b, 0x20, 20, id, []byte{'N'})
}
