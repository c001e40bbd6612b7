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
		// Every exchange takes a packet of 5 bytes or more: a command, or a
		// response standing for hidden packets or answering a connection
		// attempt (the only exchange without a request).
		connect := func(e l7.Exchange) bool { return e.API == "CONNECT" && e.HasResponse }
		p := l7test.FuzzRun(t, b, newParser, 5, connect).(*Parser)
		if p.qLen > MaxPending || cap(p.cli.buf) != cliHeadCap || cap(p.srv.buf) != srvHeadCap {
			t.Fatalf("memory grew: queue %d, heads %d %d", p.qLen, cap(p.cli.buf), cap(p.srv.buf))
		}
	})
}
