// Package fuzzchunks turns fuzzer input into a connection's chunks and
// recorded fixtures into fuzzer seeds, and checks what every parser must
// hold on any input: the fuzz targets of the Kafka, MongoDB and CRPC
// parsers share it.
package fuzzchunks

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Chunks cuts data into chunks as ctrl says, three bytes a chunk:
// direction (bit 0: ingress), size-1 of the bytes the syscall moved, and
// how many of them were captured (0: all). Timestamps are 1, 2, 3, ...
func Chunks(data, ctrl []byte) []l7.Chunk {
	var out []l7.Chunk
	for i := 0; i+2 < len(ctrl) && len(data) > 0; i += 3 {
		dir := l7.Egress
		if ctrl[i]&1 != 0 {
			dir = l7.Ingress
		}
		size := min(int(ctrl[i+1])+1, len(data))
		capture := size
		if c := int(ctrl[i+2]); c != 0 && c < size {
			capture = c
		}
		out = append(out, l7.Chunk{Dir: dir, TS: uint64(len(out) + 1), Data: data[:capture], Size: size})
		data = data[size:]
	}
	return out
}

// Seed encodes a fixture seen from role's side as (data, ctrl), its
// segments cut in pieces of at most 256 bytes, at most max bytes in all.
func Seed(segs []l7test.Segment, role l7.Role, max int) (data, ctrl []byte) {
	return SeedChunks(l7test.Chunks(segs, role, 1, 1), max)
}

// SeedChunks encodes chunks as (data, ctrl), cut in pieces of at most 256
// bytes, at most max bytes in all.
func SeedChunks(chunks []l7.Chunk, max int) (data, ctrl []byte) {
	for _, c := range chunks {
		for b := c.Data; len(b) > 0 && len(data) < max; {
			n := min(len(b), 256)
			var dir byte
			if c.Dir == l7.Ingress {
				dir = 1
			}
			ctrl = append(ctrl, dir, byte(n-1), 0)
			data = append(data, b[:n]...)
			b = b[n:]
		}
	}
	return data, ctrl
}

// WriteCorpus writes seeds in Go's fuzz corpus format under
// testdata/fuzz/<target>/.
func WriteCorpus(target string, seeds map[string][2][]byte) error {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n", s[0], s[1])
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Check runs p over chunks, then flushes it, and returns a description of
// the first broken invariant, or "": every exchange has at least one half,
// its timestamps are those of chunks (Start of a request chunk, End of a
// response chunk), and there are no more exchanges than messages of
// minSize bytes the chunks could hold.
func Check(p l7.Parser, chunks []l7.Chunk, role l7.Role, minSize int) string {
	reqTS, respTS := map[uint64]bool{}, map[uint64]bool{}
	total := 0
	var out []l7.Exchange
	for _, c := range chunks {
		if c.Dir == role.RequestDir() {
			reqTS[c.TS] = true
		} else {
			respTS[c.TS] = true
		}
		total += max(c.Size, len(c.Data))
		out = p.Feed(c, out)
	}
	out = p.Flush(out)
	if len(out) > total/minSize {
		return fmt.Sprintf("%d exchanges from %d bytes", len(out), total)
	}
	for _, e := range out {
		switch {
		case !e.HasRequest && !e.HasResponse:
			return fmt.Sprintf("empty exchange %+v", e)
		case e.HasRequest && !reqTS[e.Start]:
			return fmt.Sprintf("start %d is no request chunk's: %+v", e.Start, e)
		case e.HasResponse && !respTS[e.End]:
			return fmt.Sprintf("end %d is no response chunk's: %+v", e.End, e)
		case len(e.API) > 128:
			return fmt.Sprintf("API of %d bytes", len(e.API))
		case e.ReqBytes < 0 || e.RespBytes < 0:
			return fmt.Sprintf("negative size %+v", e)
		}
	}
	return ""
}
