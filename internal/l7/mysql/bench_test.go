package mysql

import (
	"bytes"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// A steady-state round: a command (one client segment) and its response
// (the next server segment), taken from a fixture once the connection is
// warm, and repeated; or a pipelined batch built from such rounds. The
// command is the client segment that starts with command cmd, after skip
// others that do.
var rounds = []struct {
	name    string
	fixture string
	cmd     byte
	skip    int
	batch   int // > 1: that many copies of the round's command, then of its response
}{
	{"text_query", "mariadb_slap", comQuery, 0, 1},             // SELECT, text result set
	{"prepared_execute", "go_mysql", comStmtExecute, 3, 1},     // SELECT, binary result set
	{"pipelined_batch_of_10", "mariadb_slap", comQuery, 1, 10}, // 10 x UPDATE, then 10 OKs
}

func warm(tb testing.TB, fixture string, cmd byte, skip, batch int, role l7.Role) (*Parser, []l7.Chunk) {
	segs := l7test.Load(tb, "testdata/"+fixture+".chunks")
	seg := -1
	for i, s := range segs {
		if s.FromClient && len(s.Data) > 4 && s.Data[3] == 0 && s.Data[4] == cmd && i+1 < len(segs) && !segs[i+1].FromClient {
			if skip == 0 {
				seg = i
				break
			}
			skip--
		}
	}
	if seg < 0 {
		tb.Fatalf("%s: no command %#x followed by a response", fixture, cmd)
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

// TestSteadyStateAllocs: once a connection is warm, a round allocates
// nothing, as client and as server.
func TestSteadyStateAllocs(t *testing.T) {
	for _, r := range rounds {
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			t.Run(r.name+"/"+role.String(), func(t *testing.T) {
				p, round := warm(t, r.fixture, r.cmd, r.skip, r.batch, role)
				l7test.CheckRound(t, p, round, r.batch)
			})
		}
	}
}

func BenchmarkParser(b *testing.B) {
	for _, r := range rounds {
		b.Run(r.name, func(b *testing.B) {
			p, round := warm(b, r.fixture, r.cmd, r.skip, r.batch, l7.Server)
			l7test.BenchRound(b, p, round, r.batch)
		})
	}
}
