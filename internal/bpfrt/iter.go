package bpfrt

import (
	"bytes"

	"github.com/cilium/ebpf/link"
)

// ReadIter runs one pass of a BPF iterator and returns all it wrote.
func ReadIter(it *link.Iter) ([]byte, error) {
	var buf bytes.Buffer
	if err := ReadIterTo(it, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadIterTo runs one pass of a BPF iterator into buf, emptied first (a
// buffer kept between passes is not allocated again).
func ReadIterTo(it *link.Iter, buf *bytes.Buffer) error {
	rc, err := it.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	buf.Reset()
	_, err = buf.ReadFrom(rc)
	return err
}
