package http

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// fuzzChunks decodes a fuzz input into chunks: records of
//
//	[flags] [n] [n bytes of captured data]
//
// where flags bit 0 is the direction (0: the client's bytes) and bits 1-7
// times 16 are bytes the capture missed after the data (a gap).
// Timestamps grow by one per chunk from 1.
func fuzzChunks(b []byte, role l7.Role) []l7.Chunk {
	var out []l7.Chunk
	for ts := uint64(1); len(b) >= 2; ts++ {
		flags, n := b[0], int(b[1])
		b = b[2:]
		n = min(n, len(b))
		dir := l7.Egress
		if (flags&1 == 1) == (role == l7.Client) {
			dir = l7.Ingress
		}
		out = append(out, l7.Chunk{Dir: dir, TS: ts, Data: b[:n], Size: n + int(flags>>1)*16})
		b = b[n:]
	}
	return out
}

// fuzzRecords encodes segments in fuzzChunks' format, cut into records of
// at most 255 bytes, each record keeping at most capture bytes of its
// segment part (0: all).
func fuzzRecords(segs []l7test.Segment, capture int) []byte {
	var out []byte
	for _, s := range segs {
		var dir byte
		if !s.FromClient {
			dir = 1
		}
		for d := s.Data; len(d) > 0; {
			part := d[:min(len(d), 255)]
			d = d[len(part):]
			keep, gap := len(part), 0
			if capture > 0 && keep > capture {
				keep, gap = capture, (len(part)-capture)/16
			}
			out = append(out, dir|byte(min(gap, 127))<<1, byte(keep))
			out = append(out, part[:keep]...)
		}
	}
	return out
}

func FuzzParser(f *testing.F) {
	for _, fx := range fixtures {
		segs := loadFixture(f, fx.file)
		f.Add(fuzzRecords(segs, 0), false)
		f.Add(fuzzRecords(segs, 64), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, server bool) {
		role := l7.Client
		if server {
			role = l7.Server
		}
		chunks := fuzzChunks(b, role)
		got, p := run(chunks, role)
		checkInvariants(t, chunks, got)
		pp := NewParser(role)
		pp.KeepPaths()
		withPaths, paths := l7test.RunPaths(pp, chunks)
		l7test.CheckPaths(t, got, withPaths, paths)
		if p.Desyncs() != 0 {
			return
		}
		gaps := false
		for _, c := range chunks {
			gaps = gaps || c.Size > len(c.Data)
		}
		if gaps {
			return
		}
		// A stream that parses cleanly parses the same at other read
		// boundaries (timestamps aside: a re-cut chunk takes its first
		// byte's).
		re, rp := run(l7test.Resplit(chunks, 7), role)
		if rp.Desyncs() != 0 || len(re) != len(got) {
			t.Fatalf("resplit: %d desyncs, %d exchanges, want 0 and %d", rp.Desyncs(), len(re), len(got))
		}
		for i := range got {
			a, b := got[i], re[i]
			a.Start, a.End, b.Start, b.End = 0, 0, 0, 0
			if a != b {
				t.Fatalf("resplit: exchange %d: %+v, want %+v", i, re[i], got[i])
			}
		}
	})
}

func checkInvariants(t *testing.T, chunks []l7.Chunk, xs []l7.Exchange) {
	t.Helper()
	ts := map[uint64]bool{}
	lines, size := 0, 0
	for _, c := range chunks {
		ts[c.TS] = true
		lines += bytes.Count(c.Data, []byte{'\n'})
		size += c.Size
	}
	// Every message starts with a line, ended by a line feed or cut by a
	// chunk's end.
	if len(xs) > lines+len(chunks) {
		t.Fatalf("%d exchanges from %d lines in %d chunks", len(xs), lines, len(chunks))
	}
	for _, x := range xs {
		switch {
		case !x.HasRequest && !x.HasResponse:
			t.Fatalf("empty exchange %+v", x)
		case x.HasRequest != ts[x.Start], x.HasResponse != ts[x.End]:
			t.Fatalf("timestamps not from the chunks: %+v", x)
		case !x.HasRequest && (x.Start != 0 || x.API != "" || x.ReqBytes != 0):
			t.Fatalf("request fields without a request: %+v", x)
		case !x.HasResponse && (x.End != 0 || x.RespBytes != 0 || x.Class != l7.OK):
			t.Fatalf("response fields without a response: %+v", x)
		case len(x.API) > MaxAPI:
			t.Fatalf("API of %d bytes: %q", len(x.API), x.API)
		case x.ReqBytes < 0 || x.RespBytes < 0 || x.ReqBytes+x.RespBytes > size:
			t.Fatalf("sizes out of range (%d bytes fed): %+v", size, x)
		case x.Class > l7.ServerError:
			t.Fatalf("class %v", x.Class)
		}
	}
}

// TestWriteFuzzSeeds rewrites the committed seed corpus from the fixtures
// (with GALAGO_L7_RECORD=1, after re-recording them).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParser")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fx := range fixtures {
		segs := loadFixture(t, fx.file)
		for _, capture := range []int{0, 64} {
			name := fmt.Sprintf("%s-%d", fx.file[:len(fx.file)-len(".chunks")], capture)
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", fuzzRecords(segs, capture), capture != 0)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
