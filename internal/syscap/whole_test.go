package syscap

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// wholeRec is a DATA record of a chunk captured whole: the bytes at off
// of a size-byte chunk, with the kernel's flags.
func wholeRec(connID uint64, ts uint64, chunk []byte, off, n int, flags byte) []byte {
	b := dataRec(connID, 42, ts, uint32(len(chunk)), 2, chunk[off:off+n], CaptureMax, nil, 0)
	b[31] |= flags
	binary.LittleEndian.PutUint32(b[52:], uint32(off))
	return b
}

type dataLog struct{ got []Data }

func (l *dataLog) Conn(*Conn) {}
func (l *dataLog) Data(d *Data) {
	c := *d
	c.Bytes = bytes.Clone(d.Bytes)
	l.got = append(l.got, c)
}
func (l *dataLog) Close(*Close) {}

// TestWholeJoin: the records of a chunk captured whole reach the handler
// as one Data; a lost record ends the join there (the rest is a gap of
// Size), interleaved connections are joined apart, and a join whose last
// records were lost is handed on by the next record of its connection or
// the second sweep.
func TestWholeJoin(t *testing.T) {
	chunk := make([]byte, 10000)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	head := func(id uint64) []byte { return wholeRec(id, 5, chunk, 0, 4096, flagMore) }
	mid := func(id uint64) []byte { return wholeRec(id, 5, chunk, 4096, 4096, flagCont|flagMore) }
	last := func(id uint64) []byte { return wholeRec(id, 5, chunk, 8192, 10000-8192, flagCont) }
	plain := dataRec(1, 42, 9, 3, 2, []byte("abc"), 128, nil, 0)
	for _, tc := range []struct {
		name  string
		recs  [][]byte
		sweep int
		want  []int // captured bytes of each Data handed on, in order (conn 1 then 2 when both)
	}{
		{"whole", [][]byte{head(1), mid(1), last(1)}, 0, []int{10000}},
		{"middle lost", [][]byte{head(1), last(1)}, 0, []int{4096}},
		{"head lost", [][]byte{mid(1), last(1), plain}, 0, []int{3}},
		{"tail lost, next record", [][]byte{head(1), mid(1), plain}, 0, []int{8192, 3}},
		{"tail lost, sweeps", [][]byte{head(1), mid(1)}, 2, []int{8192}},
		{"tail lost, one sweep", [][]byte{head(1), mid(1)}, 1, nil},
		{"interleaved", [][]byte{head(1), head(2), mid(2), mid(1), last(1), last(2)}, 0, []int{10000, 10000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &dataLog{}
			c := &Capture{opts: Options{Handler: l}}
			for _, r := range tc.recs {
				if err := c.handle(r); err != nil {
					t.Fatal(err)
				}
			}
			for range tc.sweep {
				c.flushStaleWhole()
			}
			if len(l.got) != len(tc.want) {
				t.Fatalf("handed on %d chunks, want %d", len(l.got), len(tc.want))
			}
			for i, d := range l.got {
				n := tc.want[i]
				if n == 3 {
					if string(d.Bytes) != "abc" || d.Size != 3 {
						t.Errorf("chunk %d: %q of %d", i, d.Bytes, d.Size)
					}
					continue
				}
				if d.Size != len(chunk) || !bytes.Equal(d.Bytes, chunk[:n]) || d.more || d.off != 0 || d.TS != 5 {
					t.Errorf("chunk %d: %d bytes of %d (want the chunk's first %d), more %v off %d", i, len(d.Bytes), d.Size, n, d.more, d.off)
				}
			}
		})
	}
}

func TestWholeRefused(t *testing.T) {
	bad := wholeRec(1, 5, make([]byte, 5000), 0, 4096, flagCont) // a continuation at 0
	if err := decodeData(bad, &Data{}); err == nil {
		t.Error("a continuation at offset 0 decoded")
	}
	if err := checkWhole(Config{WholeMax: WholeMaxLimit + 1}); err == nil {
		t.Error("WholeMax past the limit accepted")
	}
}
