package pgsql

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
		// Every exchange takes a message of 5 bytes or more: a request, or
		// a response standing for a hidden request.
		p := l7test.FuzzRun(t, b, newParser, 5, nil).(*Parser)
		if len(p.q) > MaxPending || cap(p.cli.buf) != headCap || cap(p.srv.buf) != srvHeadCap {
			t.Fatalf("memory grew: queue %d, heads %d %d", len(p.q), cap(p.cli.buf), cap(p.srv.buf))
		}
	})
}
