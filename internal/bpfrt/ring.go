package bpfrt

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bits of a ring record header's length word (kernel/bpf/ringbuf.c).
const (
	ringbufBusyBit    = 1 << 31
	ringbufDiscardBit = 1 << 30
)

// ring is a BPF ring buffer's memory mapped for reading: the consumer
// position's page (read-write: the reader advances it), the producer
// position's page and the data pages. The kernel offers the data pages
// twice in a row, so that a record wrapping at the end reads as one slice;
// only the first copy is mapped: the kernel inserts every page of a
// mapping at once, so the second copy would add the ring's size again to
// the agent's RSS (under tcp, socket and l7 the rings took 12.2 MiB of it
// mapped twice, 6.1 once), and a wrapping record is copied out in two
// parts anyway.
type ring struct {
	cons, prod []byte
	consPos    *uint64
	prodPos    *uint64
	data       []byte
	mask       uint64
}

func mapRing(fd, size int) (*ring, error) {
	page := os.Getpagesize()
	cons, err := unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the ring's consumer page: %w", err)
	}
	prod, err := unix.Mmap(fd, int64(page), page+size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Munmap(cons)
		return nil, fmt.Errorf("map the ring's data pages: %w", err)
	}
	return &ring{
		cons: cons, prod: prod,
		consPos: (*uint64)(unsafe.Pointer(&cons[0])),
		prodPos: (*uint64)(unsafe.Pointer(&prod[0])),
		data:    prod[page:],
		mask:    uint64(size - 1),
	}, nil
}

func (r *ring) unmap() error {
	return errors.Join(unix.Munmap(r.prod), unix.Munmap(r.cons))
}

// pending is the number of bytes the producer has reserved and the reader
// not yet consumed (committed or not).
func (r *ring) pending() uint64 {
	return atomic.LoadUint64(r.prodPos) - atomic.LoadUint64(r.consPos)
}

// drain hands each committed record to handle, in order, copying it into
// *buf first, and consumes it. It stops when the ring is empty or stop
// reports true (asked before each record), and returns the bytes it consumed (headers
// and discarded records included). A record still being written is waited
// for: its producer is a BPF program between reserve and submit, which
// cannot sleep.
func (r *ring) drain(buf *[]byte, handle func([]byte), stop func() bool) (uint64, error) {
	cons := atomic.LoadUint64(r.consPos)
	start := cons
	prod := atomic.LoadUint64(r.prodPos)
	for !stop() {
		if cons == prod {
			// Everything seen so far is consumed; look once more before
			// reporting the ring empty.
			if prod = atomic.LoadUint64(r.prodPos); cons == prod {
				return cons - start, nil
			}
		}
		if prod-cons < ringbufHeaderSize {
			return cons - start, fmt.Errorf("ring record header: %d bytes pending", prod-cons)
		}
		off := cons & r.mask
		// The length word is written last by the kernel (an xchg that
		// clears the busy bit): load it atomically before the data.
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.data[off])))
		if hdr&ringbufBusyBit != 0 {
			prod = atomic.LoadUint64(r.prodPos)
			continue
		}
		n := uint64(hdr &^ (ringbufBusyBit | ringbufDiscardBit))
		next := cons + ringbufHeaderSize + (n+7)&^7
		if next-cons > prod-cons {
			return cons - start, fmt.Errorf("ring record of %d bytes with %d pending", n, prod-cons)
		}
		if hdr&ringbufDiscardBit == 0 {
			at := (cons + ringbufHeaderSize) & r.mask
			b := (*buf)[:0]
			if end := at + n; end <= uint64(len(r.data)) {
				b = append(b, r.data[at:end]...)
			} else { // wraps: the tail of the ring, then its head
				b = append(append(b, r.data[at:]...), r.data[:end-uint64(len(r.data))]...)
			}
			*buf = b
			handle(b)
		}
		cons = next
		atomic.StoreUint64(r.consPos, cons)
	}
	return cons - start, nil
}
