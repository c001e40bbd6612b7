package l7test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// Diff describes how got differs from want, exchange by exchange ("" when
// equal); withTS false ignores Start and End (re-split chunks take the
// timestamp of the chunk their first byte came from).
func Diff(got, want []l7.Exchange, withTS bool) string {
	var b strings.Builder
	if len(got) != len(want) {
		fmt.Fprintf(&b, "%d exchanges, want %d\n", len(got), len(want))
	}
	for i := range max(len(got), len(want)) {
		var g, w l7.Exchange
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !withTS {
			g.Start, g.End, w.Start, w.End = 0, 0, 0, 0
		}
		if g != w {
			fmt.Fprintf(&b, "#%d: got  %+v\n    want %+v\n", i, g, w)
		}
	}
	return b.String()
}

// CheckTS fails the test for an exchange whose timestamps are not those
// of chunks, or whose response precedes its request.
func CheckTS(tb testing.TB, got []l7.Exchange, chunks []l7.Chunk) {
	tb.Helper()
	seen := map[uint64]bool{}
	for _, c := range chunks {
		seen[c.TS] = true
	}
	for _, e := range got {
		if (e.HasRequest && !seen[e.Start]) || (e.HasResponse && !seen[e.End]) || (e.HasRequest && e.HasResponse && e.End < e.Start) {
			tb.Errorf("timestamps not from the chunks: %+v", e)
		}
	}
}

// FuzzCaps are the capture caps a fuzz input can choose per chunk (0: the
// whole chunk).
var FuzzCaps = [8]int{0, 1, 5, 16, 64, 256, 4096, 0}

// FuzzConversation decodes a fuzz input into a role and chunks: a role byte
// (bit 0: server), then chunks, each a control byte (bit 0: from the
// client; bits 1-3: an index in FuzzCaps), a 2-byte little-endian length
// and that many bytes. Timestamps start at 100 and step by 10.
func FuzzConversation(b []byte) (l7.Role, []l7.Chunk) {
	if len(b) == 0 {
		return l7.Client, nil
	}
	role := l7.Client
	if b[0]&1 == 1 {
		role = l7.Server
	}
	b = b[1:]
	var chunks []l7.Chunk
	ts := uint64(100)
	for len(b) >= 3 {
		ctl := b[0]
		n := min(int(binary.LittleEndian.Uint16(b[1:])), len(b)-3)
		data := b[3 : 3+n]
		b = b[3+n:]
		dir := l7.Ingress
		if (ctl&1 == 1) == (role == l7.Client) {
			dir = l7.Egress
		}
		c := l7.Chunk{Dir: dir, TS: ts, Data: data, Size: len(data)}
		if limit := FuzzCaps[ctl>>1&7]; limit > 0 && len(data) > limit {
			c.Data = data[:limit]
		}
		chunks = append(chunks, c)
		ts += 10
	}
	return role, chunks
}

// FuzzInput encodes a fixture as a FuzzChunks input for role, every chunk
// captured with FuzzCaps[capture].
func FuzzInput(segs []Segment, role l7.Role, capture byte) []byte {
	out := []byte{0}
	if role == l7.Server {
		out[0] = 1
	}
	for _, s := range segs {
		for data := s.Data; len(data) > 0; {
			n := min(len(data), 0xffff)
			ctl := capture << 1
			if s.FromClient {
				ctl |= 1
			}
			out = append(out, ctl)
			out = binary.LittleEndian.AppendUint16(out, uint16(n))
			out = append(out, data[:n]...)
			data = data[n:]
		}
	}
	return out
}

// CheckTruncated checks a run on truncated chunks against the whole run's
// exchanges: without a desync it must be want exactly (sizes included);
// with desyncs the count must still be exact unless lossy (the fixture is
// known to lose exchanges at this capture), and each exchange must have
// want's timing, outcome (except at the indices in hidden, whose error
// the capture hid: OK) and API or none (an API comes from what the
// capture kept). Sizes then count only what was seen.
func CheckTruncated(tb testing.TB, got, want []l7.Exchange, desyncs uint64, lossy bool, hidden []int) {
	tb.Helper()
	if desyncs == 0 {
		if d := Diff(got, want, true); d != "" {
			tb.Errorf("truncated, no desync:\n%s", d)
		}
		return
	}
	if len(got) != len(want) {
		if !lossy {
			tb.Errorf("truncated: %d exchanges, want %d (desyncs %d)\n%s", len(got), len(want), desyncs, Diff(got, want, true))
		}
		return
	}
	if lossy {
		tb.Errorf("truncated: all %d exchanges recovered: the fixture is not lossy here", len(got))
	}
	for i, g := range got {
		w := want[i]
		for _, h := range hidden {
			if h == i {
				w.Class = l7.OK
			}
		}
		if g.HasResponse != w.HasResponse || g.Class != w.Class || (g.API != w.API && g.API != "") || g.Start != w.Start || g.End != w.End {
			tb.Errorf("truncated #%d: got %+v\n    want %+v", i, g, w)
		}
	}
}

// WithoutStatus returns a copy of xs with the numeric statuses (Status,
// GRPC, GRPCStatus) cleared, for expectations written with the outcome
// class only; the statuses are checked by tests of their own against an
// independent decoding of the same bytes.
func WithoutStatus(xs []l7.Exchange) []l7.Exchange {
	out := make([]l7.Exchange, len(xs))
	for i, x := range xs {
		x.Status, x.GRPC, x.GRPCStatus = 0, false, 0
		out[i] = x
	}
	return out
}
