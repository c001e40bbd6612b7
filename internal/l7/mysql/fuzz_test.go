package mysql

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func FuzzParser(f *testing.F) {
	for name := range fixtures {
		segs := l7test.Load(f, "testdata/"+name+".chunks")
		f.Add(l7test.FuzzInput(segs, l7.Client, 0))
		f.Add(l7test.FuzzInput(segs, l7.Server, 4))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		role, chunks := l7test.FuzzChunks(b)
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
		// Every exchange takes at least one packet of 5 bytes or more (a
		// command, or a response standing for hidden packets or answering
		// a connection attempt).
		if len(out) > total/5+1 {
			t.Fatalf("%d exchanges from %d bytes", len(out), total)
		}
		for _, e := range out {
			if (!e.HasRequest && (e.API != "CONNECT" || !e.HasResponse)) || (e.HasRequest && !seen[e.Start]) || (e.HasResponse && !seen[e.End]) {
				t.Fatalf("exchange not from the chunks: %+v", e)
			}
			if len(e.API) > 128 {
				t.Fatalf("API of %d bytes", len(e.API))
			}
		}
		if p.qLen > MaxPending || cap(p.cli.buf) != cliHeadCap || cap(p.srv.buf) != srvHeadCap {
			t.Fatalf("memory grew: queue %d, heads %d %d", p.qLen, cap(p.cli.buf), cap(p.srv.buf))
		}
	})
}
