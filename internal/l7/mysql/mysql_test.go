package mysql

import (
	"slices"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

const (
	ts0  = 1000
	step = 10
)

// x is an expected exchange: where its request and response start (see
// at), API, class and sizes.
type x struct {
	req, resp   int
	api         string
	class       l7.Class
	reqB, respB int
}

// wire is a packet found by walking a fixture's bytes: a test-side
// framing independent of the parser's, for ground truth on whole
// fixtures.
type wire struct {
	seg, seq, size int
	cmd            byte
}

func walk(tb testing.TB, segs []l7test.Segment) (cli, srv []wire) {
	tb.Helper()
	var buf [2][]byte
	var segOf [2][]int
	for i, s := range segs {
		k := 1
		if s.FromClient {
			k = 0
		}
		buf[k] = append(buf[k], s.Data...)
		for range s.Data {
			segOf[k] = append(segOf[k], i)
		}
	}
	for k := range buf {
		b := buf[k]
		for off := 0; off < len(b); {
			if off+4 > len(b) {
				tb.Fatalf("direction %d ends in a header", k)
			}
			n := plen(b[off:])
			if off+4+n > len(b) {
				tb.Fatalf("direction %d: packet of %d bytes past the end", k, n)
			}
			w := wire{seg: segOf[k][off], seq: int(b[off+3]), size: 4 + n}
			if n > 0 {
				w.cmd = b[off+4]
			}
			if k == 0 {
				cli = append(cli, w)
			} else {
				srv = append(srv, w)
			}
			off += 4 + n
		}
	}
	return cli, srv
}

// at turns expectations located by packet (x.req: the index of the
// request's packet among the client's, x.resp: of the response's first
// among the server's) into ones located by segment.
func at(tb testing.TB, segs []l7test.Segment, xs []x) []x {
	cli, srv := walk(tb, segs)
	out := slices.Clone(xs)
	for i := range out {
		out[i].req = cli[xs[i].req].seg
		if xs[i].resp >= 0 {
			out[i].resp = srv[xs[i].resp].seg
		}
	}
	return out
}

// slapTruth derives mariadb-slap's exchanges: it sends each query in one
// write, as one COM_QUERY, and reads its whole answer (the next server
// segment) before the next; the two queries alternate.
func slapTruth(tb testing.TB, segs []l7test.Segment) []x {
	cli, srv := walk(tb, segs)
	var out []x
	for _, c := range cli {
		if c.seq != 0 || c.cmd != comQuery {
			continue
		}
		e := x{req: c.seg, resp: c.seg + 1, api: []string{"SELECT t", "UPDATE t"}[len(out)%2], reqB: c.size}
		for _, s := range srv {
			if s.seg == c.seg+1 {
				e.respB += s.size
			}
		}
		out = append(out, e)
	}
	if len(out) != 20 {
		tb.Fatalf("ground truth: %d queries, want 20", len(out))
	}
	return out
}

var fixtures = map[string]func(tb testing.TB, segs []l7test.Segment) []x{
	// mariadb-slap --number-of-queries=20: twenty queries.
	"mariadb_slap": slapTruth,
	"mariadb_cli": func(tb testing.TB, segs []l7test.Segment) []x {
		return at(tb, segs, []x{
			// The greeting (S0), the handshake response (C0), OK (S1): no exchange.
			{1, 2, "SELECT", l7.OK, 13, 58},
			{2, 7, "SELECT", l7.OK, 22, 66}, // SELECT DATABASE(), the client's own
			{3, 12, "USE", l7.OK, 9, 20},    // COM_INIT_DB
			{4, 13, "CREATE TABLE t", l7.OK, 68, 11},
			{5, 14, "DELETE t", l7.OK, 18, 11},
			{6, 15, "INSERT t", l7.OK, 48, 50},
			{7, 16, "SELECT t", l7.OK, 31, 114},
			{8, 23, "INSERT t", l7.ClientError, 38, 50},             // 1062 23000
			{9, 24, "SELECT no_such_table", l7.ClientError, 32, 53}, // 1146 42S02
			{10, 25, "SELECT", l7.OK, 35, 52},                       // FROM DUAL, no rows
			{11, 29, "SHOW", l7.OK, 16, 121},
			{12, 34, "CREATE PROCEDURE", l7.OK, 91, 11},
			{13, 35, "CALL two_sets", l7.OK, 20, 157}, // two result sets and an OK
			{14, 47, "DROP TABLE t", l7.OK, 17, 11},
			// COM_QUIT: no exchange.
		})
	},
	"login_error": func(tb testing.TB, segs []l7test.Segment) []x {
		// 1045 28000 answers the handshake response, whose size varies
		// with the connection attributes the client sends (its pid).
		cli, srv := walk(tb, segs)
		return at(tb, segs, []x{{0, 1, "CONNECT", l7.ClientError, cli[0].size, srv[1].size}})
	},
	"go_mysql": func(tb testing.TB, segs []l7test.Segment) []x {
		return at(tb, segs, []x{
			{1, 2, "PING", l7.OK, 5, 11},
			{2, 3, "CREATE TABLE kv", l7.OK, 62, 11},
			{3, 4, "CREATE PROCEDURE", l7.OK, 86, 11},
			// Each Exec with arguments: COM_STMT_PREPARE (no exchange),
			// COM_STMT_EXECUTE (the exchange), COM_STMT_CLOSE (no response).
			{5, 8, "INSERT kv", l7.OK, 31, 11},
			{8, 12, "INSERT kv", l7.OK, 31, 11},
			{11, 16, "INSERT kv", l7.OK, 31, 11},
			// One prepare, two executes: binary result sets without
			// metadata (MariaDB's cached metadata), an OK terminator.
			{14, 20, "SELECT kv", l7.OK, 26, 26},
			{15, 23, "SELECT kv", l7.OK, 26, 26},
			{17, 26, "SELECT kv", l7.OK, 35, 116},                    // text result set
			{19, 36, "INSERT kv", l7.ClientError, 32, 50},            // 1062 on execute
			{21, 37, "SELEC", l7.ClientError, 32, 188},               // 1064 on prepare: the prepare is the exchange
			{22, 38, "SELECT no_such_table", l7.ClientError, 32, 53}, // 1146
			{23, 39, "UPDATE kv", l7.OK, 73, 104},                    // two statements, two OKs
			{24, 41, "CALL two_sets", l7.OK, 20, 140},
			{27, 54, "INSERT kv", l7.OK, 40039, 11}, // COM_STMT_SEND_LONG_DATA counts in the execute
			{30, 58, "SELECT kv", l7.OK, 26, 40026},
		})
	},
}

func expected(xs []x) []l7.Exchange {
	out := make([]l7.Exchange, len(xs))
	for i, e := range xs {
		out[i] = l7.Exchange{HasRequest: true, Start: ts0 + uint64(e.req)*step, API: e.api, ReqBytes: e.reqB}
		if e.resp >= 0 {
			out[i].HasResponse, out[i].End, out[i].Class, out[i].RespBytes = true, ts0+uint64(e.resp)*step, e.class, e.respB
		}
	}
	return out
}

// lossy lists the captures at which a fixture's exchanges cannot all be
// recovered, and hidden the exchanges whose error a capture hides (none:
// MySQL answers errors in one packet at the start of a response).
var (
	lossy  = map[string]int{}
	hidden = map[string]map[int][]int{}
)

func TestFixtures(t *testing.T) {
	for name, truth := range fixtures {
		segs := l7test.Load(t, "testdata/"+name+".chunks")
		t.Run(name, func(t *testing.T) {
			l7test.CheckRecorded(t, newParser, l7test.Fixture{
				Segs: segs, Want: expected(truth(t, segs)), TS0: ts0, Step: step, Lossy: lossy[name], Hidden: hidden[name],
			})
		})
	}
}

func newParser(r l7.Role) l7.Parser { return NewParser(r) }
