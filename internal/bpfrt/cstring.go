package bpfrt

import "bytes"

// CString is a fixed-size C char array of a BPF record (a task comm, as
// bpf2go generates it: []int8) as a Go string: up to the first NUL, with
// bytes that are not UTF-8 replaced by '?' so it is a valid label value.
func CString(c []int8) string {
	b := make([]byte, 0, len(c))
	for _, v := range c {
		if v == 0 {
			break
		}
		b = append(b, byte(v))
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
