package pgsql

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

const (
	ts0  = 1000
	step = 10
)

// x is an expected exchange: the fixture segments holding the request's
// first byte and the response's first byte (-1: no response), API, class
// and sizes.
type x struct {
	req, resp   int
	api         string
	class       l7.Class
	reqB, respB int
}

var tpcb = []string{"BEGIN", "UPDATE pgbench_accounts", "SELECT pgbench_accounts", "UPDATE pgbench_tellers",
	"UPDATE pgbench_branches", "INSERT pgbench_history", "END"}

// wire is a message found by walking a fixture's bytes: a test-side
// framing independent of the parser's, for ground truth on whole,
// well-formed fixtures.
type wire struct {
	seg  int // the segment holding its first byte
	typ  byte
	size int
}

// walk frames each direction of a fixture: untyped startup-phase messages
// while a direction's bytes start with 0 (client) and the one-byte answer
// to SSLRequest (server).
func walk(tb testing.TB, segs []l7test.Segment) (cli, srv []wire) {
	tb.Helper()
	type dir struct {
		buf  []byte
		segs []int // segment of each byte
	}
	var d [2]dir
	for i, s := range segs {
		k := 0
		if !s.FromClient {
			k = 1
		}
		d[k].buf = append(d[k].buf, s.Data...)
		for range s.Data {
			d[k].segs = append(d[k].segs, i)
		}
	}
	for k := range d {
		b, off := d[k].buf, 0
		for off < len(b) {
			var m wire
			switch {
			case k == 0 && b[off] == 0:
				m = wire{typ: 0, size: int(binary.BigEndian.Uint32(b[off:]))}
			case k == 1 && off == 0 && len(d[0].buf) >= 8 && binary.BigEndian.Uint32(d[0].buf[4:]) == codeSSL:
				m = wire{typ: b[off], size: 1} // answer to SSLRequest
			default:
				if off+5 > len(b) {
					tb.Fatalf("direction %d ends in a header", k)
				}
				m = wire{typ: b[off], size: int(binary.BigEndian.Uint32(b[off+1:])) + 1}
			}
			if off+m.size > len(b) {
				tb.Fatalf("direction %d: message %q of %d bytes past the end", k, m.typ, m.size)
			}
			m.seg = d[k].segs[off]
			if k == 0 {
				cli = append(cli, m)
			} else {
				srv = append(srv, m)
			}
			off += m.size
		}
	}
	return cli, srv
}

// pgbenchTruth derives the exchanges of a pgbench fixture: pgbench sends
// each statement in one write and waits for its answer in full, so each
// client segment holding an Execute or a Query is one statement, answered
// by the next server segment; Sync and ReadyForQuery are not part of an
// extended-protocol exchange, ReadyForQuery is part of a simple one.
func pgbenchTruth(tb testing.TB, segs []l7test.Segment, apis []string, n int, classes map[int]l7.Class) []x {
	cli, srv := walk(tb, segs)
	bySeg := func(ms []wire, seg int) []wire {
		var out []wire
		for _, m := range ms {
			if m.seg == seg {
				out = append(out, m)
			}
		}
		return out
	}
	var out []x
	for i, s := range segs {
		ms := bySeg(cli, i)
		if !s.FromClient || !slices.ContainsFunc(ms, func(m wire) bool { return m.typ == 'E' || m.typ == 'Q' }) {
			continue // a prepare (Parse, Sync), the startup, Terminate
		}
		e := x{req: i, resp: i + 1, api: apis[len(out)%len(apis)], class: classes[len(out)]}
		for _, m := range ms {
			if m.typ != 'S' {
				e.reqB += m.size
			}
		}
		for _, m := range bySeg(srv, i+1) {
			if m.typ != 'Z' || ms[0].typ == 'Q' {
				e.respB += m.size
			}
		}
		out = append(out, e)
	}
	if len(out) != n {
		tb.Fatalf("ground truth: %d statements, want %d", len(out), n)
	}
	return out
}

// at turns expectations located by message (x.req: the index of the
// request's first message among the client's, x.resp: of the response's
// first among the server's) into ones located by segment, so that they
// hold however a recording split the bytes.
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

var fixtures = map[string]func(tb testing.TB, segs []l7test.Segment) []x{
	// pgbench -t 5: five transactions of seven statements, whatever the -M mode.
	"pgbench_simple":   func(tb testing.TB, segs []l7test.Segment) []x { return pgbenchTruth(tb, segs, tpcb, 35, nil) },
	"pgbench_extended": func(tb testing.TB, segs []l7test.Segment) []x { return pgbenchTruth(tb, segs, tpcb, 35, nil) },
	"pgbench_prepared": func(tb testing.TB, segs []l7test.Segment) []x { return pgbenchTruth(tb, segs, tpcb, 35, nil) },
	"pgbench_error": func(tb testing.TB, segs []l7test.Segment) []x {
		// The third statement's Parse fails (42P01): its Execute is the
		// failed exchange; pgbench then aborts the client.
		return pgbenchTruth(tb, segs, []string{"SELECT pgbench_accounts", "UPDATE pgbench_accounts", "SELECT pgbench_acounts"}, 3,
			map[int]l7.Class{2: l7.ClientError})
	},
	"login_error": func(tb testing.TB, segs []l7test.Segment) []x {
		// FATAL 3D000 (unknown database) answers the startup message.
		return at(tb, segs, []x{{0, 0, "CONNECT", l7.ClientError, 65, 105}})
	},
	"psql": func(tb testing.TB, segs []l7test.Segment) []x {
		// Located by message: x.req is the client's message index, x.resp the server's.
		return at(tb, segs, []x{
			// SSLRequest, 'N', the startup message, authentication: no exchange.
			{2, 17, "UPDATE pgbench_branches", l7.OK, 82, 43}, // BEGIN; UPDATE; COMMIT in one Query
			{3, 21, "SELECT", l7.OK, 15, 66},
			{4, 25, "CREATE TABLE t", l7.OK, 54, 24},
			{5, 27, "INSERT t", l7.OK, 50, 22},
			{6, 29, "SELECT t", l7.OK, 33, 105},
			{7, 34, "INSERT t", l7.ClientError, 40, 177},             // 23505
			{8, 36, "SELECT no_such_table", l7.ClientError, 34, 119}, // 42P01
			{9, 38, "SELECT", l7.ClientError, 17, 72},                // 22012
			{10, 40, "DROP TABLE no_such_table", l7.OK, 41, 143},     // a NOTICE, then the answer
			{11, 43, "COPY t", l7.OK, 52, 30},                        // COPY FROM STDIN: the data is part of the request
			{14, 46, "COPY t", l7.OK, 23, 82},
			{15, 54, "LISTEN", l7.OK, 16, 18},
			{16, 56, "NOTIFY", l7.OK, 25, 36}, // the NotificationResponse is part of the answer
			{17, 59, "SET", l7.OK, 39, 45},
			{18, 62, "SHOW", l7.OK, 28, 76},
			{19, 66, "SELECT", l7.OK, 47, 185},          // three statements, one Query
			{20, 76, "SELECT", l7.ClientError, 56, 179}, // the second of three fails
		})
	},
	"pgx": func(tb testing.TB, segs []l7test.Segment) []x {
		// Located by message: x.req is the client's message index, x.resp the server's.
		return at(tb, segs, []x{
			{1, 16, "CREATE TABLE kv", l7.OK, 54, 24},
			// The first use prepares (Parse, Describe, Sync: no exchange);
			// each use executes (Bind, Describe, Execute, Sync: an exchange).
			{5, 22, "INSERT kv", l7.OK, 106, 26},
			{9, 26, "INSERT kv", l7.OK, 106, 26},
			{13, 30, "INSERT kv", l7.OK, 106, 26},
			{20, 38, "SELECT kv", l7.OK, 93, 32},
			{23, 42, "INSERT kv", l7.ClientError, 107, 184}, // 23505
			// pgx closes the invalidated statement (Close, Sync: no exchange).
			{29, 48, "SELEC", l7.ClientError, 160, 94}, // 42601 at Parse: the failed prepare is the exchange
			// A batch of four prepared together, executed with one Sync.
			{39, 60, "UPDATE kv", l7.OK, 105, 24},
			{42, 63, "SELECT kv", l7.OK, 83, 38},
			{44, 66, "DELETE kv", l7.OK, 98, 24},
			{47, 69, "SELECT kv", l7.OK, 93, 31},
			// A batch whose second query fails: the server skips the third.
			{53, 77, "UPDATE kv", l7.OK, 105, 24},
			{56, 80, "INSERT kv", l7.ClientError, 107, 184},
			{59, -1, "SELECT kv", l7.OK, 93, 0},
			{69, 92, "INSERT kv", l7.OK, 20104, 26}, // a 20 kB parameter
			{76, 100, "SELECT kv", l7.OK, 93, 20030},
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

// lossy lists the captures at which a fixture's exchanges cannot all be
// recovered: pgx's Bind messages name statements "stmtcache_<56 hex
// digits>", which a 64-byte capture cuts, and its pipelined batches lose
// whole requests in the gaps.
var lossy = map[string]int{"pgx": 64}

// hidden lists the exchanges whose error a capture hides: psql's last
// Query answers three statements in one write, and a 64-byte capture ends
// before the second one's ErrorResponse.
var hidden = map[string]map[int][]int{"psql": {64: {16}}}
