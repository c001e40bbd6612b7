package pgsql

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Messages built per the protocol documentation, for what the recorded
// fixtures do not hold.

func msgOf(t byte, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	b := []byte{t, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

func cstr(s string) []byte { return append([]byte(s), 0) }

func i16(v int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }

func i32(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func startupMsg() []byte {
	body := append(i32(codeV3), cstr("user")...)
	body = append(body, cstr("app")...)
	body = append(body, 0)
	return append(i32(4+len(body)), body...)
}

func sslRequest() []byte { return append(i32(8), i32(codeSSL)...) }

func query(sql string) []byte { return msgOf('Q', cstr(sql)) }

func parseMsg(name, sql string) []byte { return msgOf('P', cstr(name), cstr(sql), i16(0)) }

func bindMsg(portal, stmt string) []byte {
	return msgOf('B', cstr(portal), cstr(stmt), i16(0), i16(0), i16(0))
}

func describeMsg(kind byte, name string) []byte { return msgOf('D', []byte{kind}, cstr(name)) }

func executeMsg(portal string, rows int) []byte { return msgOf('E', cstr(portal), i32(rows)) }

func closeMsg(kind byte, name string) []byte { return msgOf('C', []byte{kind}, cstr(name)) }

func syncMsg() []byte { return msgOf('S') }

func complete(tag string) []byte { return msgOf('C', cstr(tag)) }

func ready() []byte { return msgOf('Z', []byte{'I'}) }

func errorMsg(code string) []byte {
	return msgOf('E', cstr("SERROR"), cstr("VERROR"), cstr("C"+code), cstr("Mfailed"), []byte{0})
}

func authOK() []byte { return msgOf('R', i32(0)) }

func dataRow(n int) []byte { return msgOf('D', i16(1), i32(n), bytes.Repeat([]byte{'x'}, n)) }

func rowDesc() []byte {
	return msgOf('T', i16(1), cstr("v"), i32(0), i16(0), i32(25), i16(-1&0xffff), i32(-1), i16(0))
}

// conv is a conversation: each segment one chunk.
type conv = []l7test.Segment

func cl(b ...[]byte) l7test.Segment {
	return l7test.Segment{FromClient: true, Data: bytes.Join(b, nil)}
}

func sv(b ...[]byte) l7test.Segment { return l7test.Segment{Data: bytes.Join(b, nil)} }

// ex is an expected exchange located by chunk index (resp -1: none).
func ex(req, resp int, api string, class l7.Class) l7.Exchange {
	e := l7.Exchange{HasRequest: true, Start: ts0 + uint64(req)*step, API: api}
	if resp >= 0 {
		e.HasResponse, e.End, e.Class = true, ts0+uint64(resp)*step, class
	}
	return e
}

// runConv checks c's exchanges as both roles, whole and split into single
// bytes, ignoring sizes.
func runConv(t *testing.T, c conv, want []l7.Exchange) *Parser {
	t.Helper()
	return l7test.CheckConversation(t, newParser, c, ts0, step, want).(*Parser)
}

func TestTLSAnswered(t *testing.T) {
	// SSLRequest answered 'S': from there the TLS uprobes feed the
	// decrypted streams, which start with the startup message.
	runConv(t, conv{
		cl(sslRequest()),
		sv([]byte{'S'}),
		cl(startupMsg()),
		sv(authOK(), ready()),
		cl(query("SELECT 1 FROM t")),
		sv(rowDesc(), dataRow(1), complete("SELECT 1"), ready()),
	}, []l7.Exchange{ex(4, 5, "SELECT t", l7.OK)})

	// Refused ('N'): the startup message follows in plaintext.
	runConv(t, conv{
		cl(sslRequest()),
		sv([]byte{'N'}),
		cl(startupMsg()),
		sv(authOK(), ready()),
		cl(query("BEGIN")),
		sv(complete("BEGIN"), ready()),
	}, []l7.Exchange{ex(4, 5, "BEGIN", l7.OK)})

	// GSSAPI encryption accepted: nothing readable follows.
	p := runConv(t, conv{
		cl(append(i32(8), i32(codeGSSENC)...)),
		sv([]byte{'G'}),
		cl([]byte{0x60, 0x82, 0x01, 0x00, 0x06, 0x09}),
		sv([]byte{0xa1, 0x81, 0xa0, 0x30, 0x81}),
	}, nil)
	if p.Desyncs() != 0 {
		t.Errorf("GSS: %d desyncs", p.Desyncs())
	}
}

func TestCancelRequest(t *testing.T) {
	p := runConv(t, conv{cl(append(i32(16), append(i32(codeCancel), i32(1234)...)...), i32(5678))}, nil)
	if p.Desyncs() != 0 || p.Orphans() != 0 {
		t.Errorf("cancel: desyncs %d orphans %d", p.Desyncs(), p.Orphans())
	}
}

func TestMidConnection(t *testing.T) {
	// The capture begins with the end of a response, then a query.
	p := runConv(t, conv{
		sv(complete("UPDATE 1"), ready()),
		cl(query("delete from t")),
		sv(complete("DELETE 1"), ready()),
	}, []l7.Exchange{ex(1, 2, "DELETE t", l7.OK)})
	if p.Orphans() != 2 {
		t.Errorf("orphans %d, want 2 (CommandComplete, ReadyForQuery)", p.Orphans())
	}
}

func TestExtendedVariants(t *testing.T) {
	runConv(t, conv{
		// A named statement, a named portal fetched two rows at a time.
		cl(parseMsg("s1", "SELECT v FROM big"), bindMsg("c1", "s1"), executeMsg("c1", 2), executeMsg("c1", 2), syncMsg()),
		sv(msgOf('1'), msgOf('2'), dataRow(1), dataRow(1), msgOf('s'), dataRow(1), complete("SELECT 1"), ready()),
		// The statement again, unnamed portal, with a Flush before Sync.
		cl(bindMsg("", "s1"), describeMsg('P', ""), executeMsg("", 0), msgOf('H')),
		sv(msgOf('2'), rowDesc(), dataRow(3), complete("SELECT 1")),
		cl(syncMsg()),
		sv(ready()),
		// Closed: a later Bind of the name has no known API.
		cl(closeMsg('S', "s1"), syncMsg()),
		sv(msgOf('3'), ready()),
		cl(bindMsg("", "s1"), executeMsg("", 0), syncMsg()),
		sv(errorMsg("26000"), ready()),
		// An empty query.
		cl(query("")),
		sv(msgOf('I'), ready()),
		// A function call.
		cl(msgOf('F', i32(1598), i16(0), i16(0), i16(0))),
		sv(msgOf('V', i32(4), []byte("abcd")), ready()),
	}, []l7.Exchange{
		ex(0, 1, "SELECT big", l7.OK), // PortalSuspended ends the first Execute
		ex(0, 1, "SELECT big", l7.OK),
		ex(2, 3, "SELECT big", l7.OK),
		ex(8, 9, "", l7.ClientError), // 26000 invalid_sql_statement_name
		ex(10, 11, "", l7.OK),
		ex(12, 13, "FUNCTION CALL", l7.OK),
	})
}

func TestSyncError(t *testing.T) {
	// The implicit transaction's commit fails at Sync (a deferred
	// constraint, a serialization failure): an exchange of its own.
	runConv(t, conv{
		cl(parseMsg("", "INSERT INTO t VALUES (1)"), bindMsg("", ""), executeMsg("", 0), syncMsg()),
		sv(msgOf('1'), msgOf('2'), complete("INSERT 0 1"), errorMsg("40001"), ready()),
	}, []l7.Exchange{ex(0, 1, "INSERT t", l7.OK), ex(0, 1, "COMMIT", l7.ServerError)})
}

func TestLoginFailureAndFatal(t *testing.T) {
	runConv(t, conv{
		cl(startupMsg()),
		sv(msgOf('R', i32(5), []byte{1, 2, 3, 4})), // MD5 password request
		cl(msgOf('p', cstr("md5deadbeef"))),
		sv(errorMsg("28P01")),
	}, []l7.Exchange{ex(0, 1, "CONNECT", l7.ClientError)})

	// An administrator terminates the backend during a query.
	runConv(t, conv{
		cl(startupMsg()),
		sv(authOK(), ready()),
		cl(query("SELECT pg_sleep(10)")),
		sv(errorMsg("57P01")),
	}, []l7.Exchange{ex(2, 3, "SELECT", l7.ServerError)})
}

func TestFlushPending(t *testing.T) {
	// The connection closes with requests unanswered: a query, and a
	// batch of two Executes (a prepare alone is not a request).
	runConv(t, conv{
		cl(query("SELECT 1")),
		sv(complete("SELECT 1"), ready()),
		cl(parseMsg("", "UPDATE a SET x = 1"), bindMsg("", ""), executeMsg("", 0), bindMsg("", ""), executeMsg("", 0), syncMsg()),
		cl(parseMsg("p", "SELECT 2"), syncMsg()),
		cl(query("SELECT * FROM never")),
	}, []l7.Exchange{
		ex(0, 1, "SELECT", l7.OK),
		ex(2, -1, "UPDATE a", l7.OK), ex(2, -1, "UPDATE a", l7.OK),
		ex(4, -1, "SELECT never", l7.OK),
	})
}

func TestDeepPipeline(t *testing.T) {
	// More requests in flight than MaxPending: the rest are tracked in
	// aggregate, and every Execute is still one exchange.
	const n = MaxPending + 60
	var req, resp [][]byte
	for i := 0; i < n; i++ {
		req = append(req, bindMsg("", "ins"), executeMsg("", 0))
		if i == n-20 {
			resp = append(resp, msgOf('2'), errorMsg("23505"))
			continue
		}
		if i < n-20 {
			resp = append(resp, msgOf('2'), complete("INSERT 0 1"))
		}
	}
	req = append(req, syncMsg())
	resp = append(resp, ready())
	var want []l7.Exchange
	for i := 0; i < n; i++ {
		switch {
		case i < n-20:
			want = append(want, ex(2, 3, "INSERT q", l7.OK))
		case i == n-20:
			want = append(want, ex(2, 3, "INSERT q", l7.ClientError))
		default:
			want = append(want, ex(2, -1, "INSERT q", l7.OK)) // skipped after the error
		}
	}
	p := runConv(t, conv{
		cl(parseMsg("ins", "INSERT INTO q VALUES ($1)"), syncMsg()),
		sv(msgOf('1'), ready()),
		cl(req...),
		sv(resp...),
	}, want)
	if p.Overflows() != n-(MaxPending-1) {
		t.Errorf("overflows %d, want %d", p.Overflows(), n-(MaxPending-1))
	}
	if len(p.q) > MaxPending {
		t.Errorf("queue grew to %d", len(p.q))
	}

	// libpq's pipeline mode: a Sync after each query.
	req, resp, want = nil, nil, nil
	for range n {
		req = append(req, bindMsg("", "ins"), executeMsg("", 0), syncMsg())
		resp = append(resp, msgOf('2'), complete("INSERT 0 1"), ready())
		want = append(want, ex(2, 3, "INSERT q", l7.OK))
	}
	runConv(t, conv{
		cl(parseMsg("ins", "INSERT INTO q VALUES ($1)"), syncMsg()),
		sv(msgOf('1'), ready()),
		cl(req...),
		sv(resp...),
	}, want)
}

func TestResyncAfterGarbage(t *testing.T) {
	// A server chunk that is not PostgreSQL (or whose start was lost)
	// costs a desync; the next exchange is whole again.
	c := conv{
		cl(query("SELECT 1")),
		sv([]byte("\xff\xfe garbage that is no message at all")),
		cl(query("SELECT * FROM t")),
		sv(rowDesc(), dataRow(2), complete("SELECT 1"), ready()),
	}
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		p := NewParser(role)
		got := l7test.Run(p, l7test.Chunks(c, role, ts0, step))
		for i := range got {
			got[i].ReqBytes, got[i].RespBytes = 0, 0
		}
		// The first query's response started (garbage is its response as
		// far as anyone can tell) and the client moved on.
		want := []l7.Exchange{ex(0, 1, "SELECT", l7.OK), ex(2, 3, "SELECT t", l7.OK)}
		if d := l7test.Diff(got, want, true); d != "" || p.Desyncs() != 1 {
			t.Errorf("%v: desyncs %d\n%s", role, p.Desyncs(), d)
		}
	}
}

func TestGapInsideMessages(t *testing.T) {
	// A 100 kB DataRow and a 50 kB query, captured 64 bytes at a time:
	// the declared lengths step over the gaps, nothing is lost.
	big := dataRow(100000)
	sql := "SELECT * FROM wide WHERE v IN ('" + string(bytes.Repeat([]byte("x"), 50000)) + "')"
	c := conv{
		cl(query(sql)),
		sv(rowDesc()),
		sv(big[:30000]),
		sv(big[30000:]),
		sv(complete("SELECT 1"), ready()),
	}
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		p := NewParser(role)
		got := l7test.Run(p, l7test.Truncate(l7test.Chunks(c, role, ts0, step), 64))
		want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: ts0, End: ts0 + step, API: "SELECT wide",
			ReqBytes: len(query(sql)), RespBytes: len(rowDesc()) + len(big) + len(complete("SELECT 1")) + len(ready())}}
		if d := l7test.Diff(got, want, true); d != "" || p.Desyncs() != 0 {
			t.Errorf("%v: desyncs %d\n%s", role, p.Desyncs(), d)
		}
	}
}

func TestDetect(t *testing.T) {
	for name, b := range l7test.FirstBytes {
		want := name == "pgsql" || name == "pgsql-ssl"
		if got := Detect(b); got != want {
			t.Errorf("%s: Detect %v, want %v", name, got, want)
		}
		if got := Detect(b[:min(len(b), DetectLen)]); got != want {
			t.Errorf("%s: Detect on %d bytes %v, want %v", name, DetectLen, got, want)
		}
	}
	for _, f := range []string{"pgbench_simple", "pgbench_extended", "pgbench_prepared", "pgbench_error", "psql", "pgx", "login_error"} {
		segs := l7test.Load(t, "testdata/"+f+".chunks")
		if !Detect(segs[0].Data) {
			t.Errorf("%s: first bytes not detected", f)
		}
	}
	// The MySQL fixtures: neither side's first bytes are PostgreSQL's.
	for _, f := range []string{"mariadb_cli", "mariadb_slap", "go_mysql", "login_error"} {
		for _, s := range l7test.Load(t, "../mysql/testdata/"+f+".chunks")[:2] {
			if Detect(s.Data) {
				t.Errorf("mysql %s: % x detected", f, s.Data[:16])
			}
		}
	}
	for _, b := range [][]byte{
		nil, {0, 0, 0}, append(i32(8), i32(codeCancel)...), // cancel carries no exchange
		append(i32(9), append(i32(2<<16), 'u')...),      // protocol 2
		append(i32(20000), append(i32(codeV3), 'u')...), // too long
		append(i32(40), append(i32(codeV3), 'U')...),    // not a parameter name
		append(i32(16), i32(codeSSL)...),                // SSLRequest is 8 bytes
	} {
		if Detect(b) {
			t.Errorf("% x detected", b)
		}
	}
}

func TestAppendAPIOutcome(t *testing.T) {
	if got := string(AppendAPI(nil, query("UPDATE t SET a = 1"))); got != "UPDATE t" {
		t.Errorf("Q: %q", got)
	}
	if got := string(AppendAPI(nil, parseMsg("s", "insert into x values ($1)"))); got != "INSERT x" {
		t.Errorf("P: %q", got)
	}
	if got := string(AppendAPI(nil, query("SELECT a FROM long_table_name")[:20])); got != "SELECT" {
		t.Errorf("prefix: %q", got)
	}
	for _, b := range [][]byte{nil, {'Q'}, syncMsg(), bindMsg("", "")} {
		if got := AppendAPI(nil, b); len(got) != 0 {
			t.Errorf("% x: %q", b, got)
		}
	}
	cases := []struct {
		msg   []byte
		class l7.Class
		ok    bool
	}{
		{complete("SELECT 1"), l7.OK, true},
		{errorMsg("42601"), l7.ClientError, true},
		{errorMsg("53300"), l7.ServerError, true},
		{errorMsg("42601")[:25], l7.ClientError, true}, // the code is whole
		{errorMsg("42601")[:23], l7.ServerError, false},
		{msgOf('E', cstr("SERROR"), []byte{0}), l7.ServerError, false},
		{nil, l7.OK, false},
	}
	for _, c := range cases {
		if class, ok := Outcome(c.msg); class != c.class || ok != c.ok {
			t.Errorf("% x: %v %v, want %v %v", c.msg, class, ok, c.class, c.ok)
		}
	}
}
