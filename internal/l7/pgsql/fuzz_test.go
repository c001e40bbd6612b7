package pgsql

import (
	"encoding/binary"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Fuzz input: a role byte, then chunks, each a control byte (bit 0: from
// the client; bits 1-3: capture cap, see caps), a 2-byte little-endian
// length and that many bytes.
var caps = [8]int{0, 1, 5, 16, 64, 256, 4096, 0}

func decodeFuzz(b []byte) (l7.Role, []l7.Chunk) {
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
		if limit := caps[ctl>>1&7]; limit > 0 && len(data) > limit {
			c.Data = data[:limit]
		}
		chunks = append(chunks, c)
		ts += 10
	}
	return role, chunks
}

// encodeFuzz turns a fixture into a fuzz input, every chunk captured whole
// or at capture cap c.
func encodeFuzz(segs []l7test.Segment, role l7.Role, c byte) []byte {
	out := []byte{0}
	if role == l7.Server {
		out[0] = 1
	}
	for _, s := range segs {
		for data := s.Data; len(data) > 0; {
			n := min(len(data), 0xffff)
			ctl := c << 1
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

func FuzzParser(f *testing.F) {
	for name := range fixtures {
		segs := l7test.Load(f, "testdata/"+name+".chunks")
		f.Add(encodeFuzz(segs, l7.Client, 0))
		f.Add(encodeFuzz(segs, l7.Server, 5))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		role, chunks := decodeFuzz(b)
		p := NewParser(role)
		var out []l7.Exchange
		seen := map[uint64]bool{}
		total := 0
		for _, c := range chunks {
			seen[c.TS] = true
			total += c.Size
			out = p.Feed(c, out)
		}
		out = p.Flush(out)
		// Every exchange takes at least one 5-byte message (a request, or
		// a response standing for a hidden request).
		if len(out) > total/5+1 {
			t.Fatalf("%d exchanges from %d bytes", len(out), total)
		}
		for _, e := range out {
			if !e.HasRequest || (e.HasRequest && !seen[e.Start]) || (e.HasResponse && !seen[e.End]) {
				t.Fatalf("exchange not from the chunks: %+v", e)
			}
			if len(e.API) > 128 {
				t.Fatalf("API of %d bytes", len(e.API))
			}
		}
		if len(p.q) > MaxPending || cap(p.cli.buf) != headCap || cap(p.srv.buf) != srvHeadCap {
			t.Fatalf("memory grew: queue %d, heads %d %d", len(p.q), cap(p.cli.buf), cap(p.srv.buf))
		}
	})
}
