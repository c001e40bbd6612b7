package lenframe

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// rec records the events it gets.
type rec struct{ ev []string }

func (r *rec) Start(h []byte, total int, ts uint64) {
	r.ev = append(r.ev, fmt.Sprintf("start %d@%d", total, ts))
}
func (r *rec) Data(b []byte) { r.ev = append(r.ev, fmt.Sprintf("data %q", b)) }
func (r *rec) Gap(n int)     { r.ev = append(r.ev, fmt.Sprintf("gap %d", n)) }
func (r *rec) End()          { r.ev = append(r.ev, "end") }

// msg is a test message: a 2-byte big-endian total length, then body.
func msg(body string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(2+len(body))), body...)
}

func framer() *Framer {
	return &Framer{HeaderLen: 2, Length: func(h []byte) int {
		n := int(binary.BigEndian.Uint16(h))
		if n > 100 {
			return -1
		}
		return n
	}}
}

func TestFramer(t *testing.T) {
	f, r := framer(), &rec{}
	stream := append(append(msg("ab"), msg("")...), msg("cdef")...)
	// a header split across chunks, two messages in one chunk
	f.Feed(&l7.Chunk{TS: 1, Data: stream[:1], Size: 1}, r)
	f.Feed(&l7.Chunk{TS: 2, Data: stream[1:7], Size: 6}, r)
	f.Feed(&l7.Chunk{TS: 3, Data: stream[7:], Size: len(stream) - 7}, r)
	want := []string{"start 4@1", `data "ab"`, "end", "start 2@2", "end", "start 6@2", `data "cdef"`, "end"}
	if !reflect.DeepEqual(r.ev, want) || f.Desyncs() != 0 {
		t.Fatalf("%q", r.ev)
	}
}

func TestFramerGaps(t *testing.T) {
	f, r := framer(), &rec{}
	m := msg("0123456789")
	// a gap inside a message is stepped over
	f.Feed(&l7.Chunk{TS: 1, Data: m[:4], Size: len(m)}, r)
	want := []string{"start 12@1", `data "01"`, "gap 8", "end"}
	if !reflect.DeepEqual(r.ev, want) || f.Desyncs() != 0 {
		t.Fatalf("%q", r.ev)
	}
	// a gap hiding the next message's header: desync, garbage chunks are
	// dropped, a chunk starting with a valid header resynchronises
	r.ev = nil
	two := append(msg("ab"), msg("cd")...)
	f.Feed(&l7.Chunk{TS: 2, Data: two[:3], Size: len(two)}, r)
	f.Feed(&l7.Chunk{TS: 3, Data: []byte{0xff, 0xff, 1}, Size: 3}, r)
	f.Feed(&l7.Chunk{TS: 4, Data: msg("ef"), Size: 4}, r)
	want = []string{"start 4@2", `data "a"`, "gap 1", "end", "start 4@4", `data "ef"`, "end"}
	if !reflect.DeepEqual(r.ev, want) || f.Desyncs() != 1 {
		t.Fatalf("%q desyncs %d", r.ev, f.Desyncs())
	}
	// an invalid header desyncs
	f.Feed(&l7.Chunk{TS: 5, Data: []byte{0xff, 0xff}, Size: 2}, r)
	if f.Desyncs() != 2 || !f.Lost() {
		t.Fatalf("desyncs %d", f.Desyncs())
	}
	if strings.Contains(strings.Join(r.ev[len(want):], " "), "start") {
		t.Fatalf("%q", r.ev)
	}
}
