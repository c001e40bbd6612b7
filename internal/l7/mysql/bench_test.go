package mysql

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// A steady-state round: a request (one client segment) and its response
// (the next server segment), taken from a fixture once the connection is
// warm, and repeated; or a pipelined batch built from such rounds.
var rounds = []struct {
	name    string
	fixture string
	seg     int // the client segment; the fixture's segments before it are fed first
	batch   int // > 1: that many copies of the round's command, then of its response
}{
	{"text_query", "mariadb_slap", 3, 1},             // COM_QUERY SELECT, text result set
	{"prepared_execute", "go_mysql", 23, 1},          // COM_STMT_EXECUTE, binary result set
	{"pipelined_batch_of_10", "mariadb_slap", 5, 10}, // 10 x COM_QUERY UPDATE, then 10 OKs
}

func warm(tb testing.TB, fixture string, seg, batch int, role l7.Role) (*Parser, []l7.Chunk) {
	segs := l7test.Load(tb, "testdata/"+fixture+".chunks")
	if !segs[seg].FromClient || segs[seg+1].FromClient {
		tb.Fatalf("%s: segment %d is not a request followed by a response", fixture, seg)
	}
	round := []l7test.Segment{
		{FromClient: true, Data: bytes.Repeat(segs[seg].Data, batch)},
		{FromClient: false, Data: bytes.Repeat(segs[seg+1].Data, batch)},
	}
	p := NewParser(role)
	var out []l7.Exchange
	for _, c := range l7test.Chunks(append(segs[:seg:seg], round...), role, ts0, step) {
		out = p.Feed(c, out)
	}
	return p, l7test.Chunks(round, role, ts0, step)
}

// cpuTime is the process's user and system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func feedRound(p *Parser, round []l7.Chunk, out []l7.Exchange) []l7.Exchange {
	out = out[:0]
	for _, c := range round {
		out = p.Feed(c, out)
	}
	return out
}

// TestSteadyStateAllocs: once a connection is warm, a round allocates
// nothing, as client and as server.
func TestSteadyStateAllocs(t *testing.T) {
	for _, r := range rounds {
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p, round := warm(t, r.fixture, r.seg, r.batch, role)
			out := make([]l7.Exchange, 0, 16)
			if got := feedRound(p, round, out); len(got) != r.batch || got[0].API == "" || !got[0].HasResponse {
				t.Fatalf("%s: a round gives %+v, want %d exchanges", r.name, got, r.batch)
			}
			if n := testing.AllocsPerRun(200, func() { feedRound(p, round, out) }); n != 0 {
				t.Errorf("%s as %v: %.1f allocations per round", r.name, role, n)
			}
		}
	}
}

func BenchmarkParser(b *testing.B) {
	for _, r := range rounds {
		b.Run(r.name, func(b *testing.B) {
			p, round := warm(b, r.fixture, r.seg, r.batch, l7.Server)
			out := make([]l7.Exchange, 0, 16)
			n := 0
			for _, c := range round {
				n += len(c.Data)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				out = feedRound(p, round, out)
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			if len(out) != r.batch {
				b.Fatalf("%d exchanges a round, want %d", len(out), r.batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*r.batch), "ns/exchange")
			// CPU time, not wall time: on a loaded machine the wall time
			// counts the time the benchmark waited for a CPU.
			b.ReportMetric(float64(cpu)/float64(b.N*r.batch), "cpu-ns/exchange")
		})
	}
}
