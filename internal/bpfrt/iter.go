package bpfrt

import (
	"io"

	"github.com/cilium/ebpf/link"
)

// ReadIter runs one pass of a BPF iterator and returns all it wrote.
func ReadIter(it *link.Iter) ([]byte, error) {
	rc, err := it.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
