package bpfrt

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fakeRing is a ring in Go memory laid out as the kernel's: records of
// an 8-byte header (length word with the busy and discard bits, page
// offset) and data padded to 8 bytes, at positions counting the bytes
// ever written, wrapping at the ring's size.
type fakeRing struct {
	pos []uint64 // consumer, producer
	r   ring
}

func newFakeRing(size int) *fakeRing {
	f := &fakeRing{pos: make([]uint64, 2)}
	f.r = ring{consPos: &f.pos[0], prodPos: &f.pos[1], data: make([]byte, size), mask: uint64(size - 1)}
	return f
}

// put writes a committed record at the producer position.
func (f *fakeRing) put(payload []byte, flags uint32) {
	rec := binary.LittleEndian.AppendUint32(nil, uint32(len(payload))|flags)
	rec = binary.LittleEndian.AppendUint32(rec, 0)
	rec = append(rec, payload...)
	rec = append(rec, make([]byte, (8-len(payload)%8)%8)...)
	for i, b := range rec {
		f.r.data[(f.pos[1]+uint64(i))&f.r.mask] = b
	}
	f.pos[1] += uint64(len(rec))
}

func (f *fakeRing) drain(t *testing.T, stopAfter int) ([][]byte, uint64) {
	t.Helper()
	var got [][]byte
	var buf []byte
	n, err := f.r.drain(&buf, func(b []byte) { got = append(got, bytes.Clone(b)) },
		func() bool { return stopAfter > 0 && len(got) >= stopAfter })
	if err != nil {
		t.Fatal(err)
	}
	return got, n
}

// TestRingDrain: a record whose data wraps at the end of the ring is
// handed out whole (the ring's tail, then its head), a discarded record
// is consumed but not handed out, stop ends a drain between records, and
// the consumer position follows every record consumed.
func TestRingDrain(t *testing.T) {
	f := newFakeRing(64)
	f.pos[0], f.pos[1] = 48, 48
	a := []byte("0123456789") // 48..72: header at 48, data 56..64 then 0..2
	c := []byte("vwxyz")      // 88..104, after a discarded record at 72..88
	f.put(a, 0)
	f.put([]byte("gone"), ringbufDiscardBit)
	f.put(c, 0)

	got, n := f.drain(t, 1)
	if len(got) != 1 || !bytes.Equal(got[0], a) || n != 24 || f.pos[0] != 72 {
		t.Fatalf("stopped after one: got %q, %d bytes, consumer at %d; want %q, 24, 72", got, n, f.pos[0], a)
	}
	got, n = f.drain(t, 0)
	if len(got) != 1 || !bytes.Equal(got[0], c) || n != 32 || f.pos[0] != 104 {
		t.Fatalf("rest: got %q, %d bytes, consumer at %d; want %q, 32, 104", got, n, f.pos[0], c)
	}

	d := bytes.Repeat([]byte("wrap"), 5) // 104..136: data 48..64 then 0..4
	f.put(d, 0)
	if got, _ = f.drain(t, 0); len(got) != 1 || !bytes.Equal(got[0], d) || f.pos[0] != 136 {
		t.Fatalf("second wrap: got %q, consumer at %d; want %q, 136", got, f.pos[0], d)
	}
	if got, n = f.drain(t, 0); len(got) != 0 || n != 0 {
		t.Fatalf("empty ring: got %q, %d bytes", got, n)
	}
}

// TestRingDrainTruncated: a length that runs past the producer position
// is an error, not a read beyond what was written.
func TestRingDrainTruncated(t *testing.T) {
	f := newFakeRing(64)
	f.put([]byte("abcdefgh"), 0)
	f.pos[1] -= 8 // the producer claims only the header
	var buf []byte
	if _, err := f.r.drain(&buf, func([]byte) { t.Error("handled a truncated record") }, func() bool { return false }); err == nil {
		t.Error("no error for a record past the producer position")
	}
}
