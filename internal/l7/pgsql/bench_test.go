package pgsql

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// A steady-state round: a request (one client segment) and its response
// (the next server segment), taken from a fixture once the connection is
// warm, and repeated: the client segment that holds n statements (Query
// or Execute messages), after skip others that do.
var rounds = []struct {
	name    string
	fixture string
	n, skip int
}{
	{"simple_query", "pgbench_simple", 1, 9}, // the second transaction's SELECT pgbench_accounts
	{"extended", "pgbench_extended", 1, 9},   // Parse/Bind/Describe/Execute/Sync
	{"prepared", "pgbench_prepared", 1, 9},   // Bind/Describe/Execute/Sync of a named statement
	{"pipelined_batch_of_4", "pgx", 4, 0},    // pgx batch: 4 x Bind/(Describe)/Execute, Sync
}

func warm(tb testing.TB, fixture string, n, skip int, role l7.Role) (*Parser, []l7.Chunk) {
	segs := l7test.Load(tb, "testdata/"+fixture+".chunks")
	cli, _ := walk(tb, segs)
	seg := -1
	for i, s := range segs {
		stmts := 0
		for _, m := range cli {
			if m.seg == i && (m.typ == 'Q' || m.typ == 'E') {
				stmts++
			}
		}
		if s.FromClient && stmts == n && i+1 < len(segs) && !segs[i+1].FromClient {
			if skip == 0 {
				seg = i
				break
			}
			skip--
		}
	}
	if seg < 0 {
		tb.Fatalf("%s: no request segment of %d statements", fixture, n)
	}
	chunks := l7test.Chunks(segs, role, ts0, step)
	p := NewParser(role)
	var out []l7.Exchange
	for _, c := range chunks[:seg+2] {
		out = p.Feed(c, out)
	}
	return p, chunks[seg : seg+2]
}

// TestSteadyStateAllocs: once a connection is warm, a round allocates
// nothing, as client and as server.
func TestSteadyStateAllocs(t *testing.T) {
	for _, r := range rounds {
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			t.Run(r.name+"/"+role.String(), func(t *testing.T) {
				p, round := warm(t, r.fixture, r.n, r.skip, role)
				l7test.CheckRound(t, p, round, r.n)
			})
		}
	}
}

func BenchmarkParser(b *testing.B) {
	for _, r := range rounds {
		b.Run(r.name, func(b *testing.B) {
			p, round := warm(b, r.fixture, r.n, r.skip, l7.Server)
			l7test.BenchRound(b, p, round, r.n)
		})
	}
}
