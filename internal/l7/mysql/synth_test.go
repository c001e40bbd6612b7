package mysql

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// Packets built per the protocol documentation, for what the recorded
// fixtures do not hold.

func packet(seq byte, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), seq}, p...)
}

func u16(v int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(v)) }
func u32(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func greeting() []byte {
	return packet(0, []byte{10}, []byte("8.0.36\x00"), u32(7), []byte("abcdefgh\x00"), u16(0xffff), []byte{0xff},
		u16(2), u16(0xdfff), []byte{21}, make([]byte, 10), []byte("ijklmnopqrstu\x00caching_sha2_password\x00"))
}

// handshake is a HandshakeResponse41 with the given capabilities.
func handshake(seq byte, caps uint32) []byte {
	return packet(seq, u32(int(caps)), u32(1<<24), []byte{0x2d}, make([]byte, 23), []byte("app\x00"), []byte{0})
}

const baseCaps = capProtocol41 | 1<<15 /* SECURE_CONNECTION */ | 1<<19 /* PLUGIN_AUTH */ | 1<<17 /* MULTI_RESULTS */ | capMySQL

func ok(seq byte, status int) []byte  { return packet(seq, []byte{0, 0, 0}, u16(status), u16(0)) }
func eof(seq byte, status int) []byte { return packet(seq, []byte{0xfe}, u16(0), u16(status)) }
func okFE(seq byte, status int) []byte {
	return packet(seq, []byte{0xfe, 0, 0}, u16(status), u16(0))
}
func errPkt(seq byte, code int, state string) []byte {
	return packet(seq, []byte{0xff}, u16(code), []byte("#"+state), []byte("failed"))
}
func colDef(seq byte) []byte {
	return packet(seq, []byte("\x03def\x00\x00\x00\x01a\x00\x0c\x3f\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00"))
}
func query(sql string) []byte { return packet(0, []byte{comQuery}, []byte(sql)) }
func command(code byte, b ...[]byte) []byte {
	return packet(0, append([][]byte{{code}}, b...)...)
}
func textRow(seq byte, v string) []byte { return packet(seq, []byte{byte(len(v))}, []byte(v)) }

type seg = l7test.Segment

func cl(b ...[]byte) seg { return seg{FromClient: true, Data: bytes.Join(b, nil)} }
func sv(b ...[]byte) seg { return seg{Data: bytes.Join(b, nil)} }

func chunksOf(c []seg, role l7.Role) []l7.Chunk { return l7test.Chunks(c, role, ts0, step) }

func ex(req, resp int, api string, class l7.Class) l7.Exchange {
	e := l7.Exchange{HasRequest: true, Start: ts0 + uint64(req)*step, API: api}
	if resp >= 0 {
		e.HasResponse, e.End, e.Class = true, ts0+uint64(resp)*step, class
	}
	return e
}

// runConv checks a conversation's exchanges as both roles, whole and in
// single bytes, ignoring sizes.
func runConv(t *testing.T, c []seg, want []l7.Exchange) *Parser {
	t.Helper()
	return l7test.CheckConversation(t, newParser, c, ts0, step, want).(*Parser)
}

func prepareOK(id, cols, params int) []byte {
	return packet(1, []byte{0}, u32(id), u16(cols), u16(params), []byte{0}, u16(0))
}

func TestPrepareWithEOFs(t *testing.T) {
	// Without CLIENT_DEPRECATE_EOF: parameter and column definitions each
	// end with an EOF; with it, they do not. Known from the handshake, or
	// (capture begun mid-connection) told apart by the EOF's length.
	for _, deprecate := range []bool{false, true} {
		params := append(colDef(2), colDef(3)...)
		cols := colDef(4)
		caps := uint32(baseCaps)
		if deprecate {
			caps |= capDeprecateEOF
		} else {
			params = append(params, eof(4, 2)...)
			cols = append(colDef(5), eof(6, 2)...)
		}
		conv := []seg{
			sv(greeting()),
			cl(handshake(1, caps)),
			sv(ok(2, 2)),
			cl(command(comStmtPrepare, []byte("SELECT a FROM t WHERE b = ? AND c = ?"))),
			sv(prepareOK(7, 1, 2), params, cols),
			cl(command(comStmtExecute, u32(7), []byte{0}, u32(1), []byte{0, 1, 3, 0, 3, 0}, u32(1), u32(2))),
			sv(resultSet(deprecate)),
			cl(command(comStmtClose, u32(7))),
			cl(command(comStmtExecute, u32(7), []byte{0}, u32(1))),
			sv(errPkt(1, 1243, "HY000")), // unknown prepared statement handler
		}
		want := []l7.Exchange{ex(5, 6, "SELECT t", l7.OK), ex(8, 9, "", l7.ClientError)}
		runConv(t, conv, want)
		// Mid-connection: no handshake, capabilities unknown.
		runConv(t, conv[3:], []l7.Exchange{ex(2, 3, "SELECT t", l7.OK), ex(5, 6, "", l7.ClientError)})
	}
}

// resultSet is a binary result set of one column and one row.
func resultSet(deprecateEOF bool) []byte {
	row := []byte{0, 0, 1, 'x'}
	if deprecateEOF {
		return bytes.Join([][]byte{packet(1, []byte{1}), colDef(2), packet(3, row), okFE(4, 2)}, nil)
	}
	return bytes.Join([][]byte{packet(1, []byte{1}), colDef(2), eof(3, 2), packet(4, row), eof(5, 2)}, nil)
}

func TestCommands(t *testing.T) {
	runConv(t, []seg{
		sv(greeting()),
		cl(handshake(1, baseCaps|capDeprecateEOF)),
		sv(packet(2, []byte{0xfe}, []byte("mysql_native_password\x00abcdefghijklmnopqrst\x00"))), // auth switch
		cl(packet(3, bytes.Repeat([]byte{1}, 20))),
		sv(ok(4, 2)),
		cl(command(comInitDB, []byte("shop"))),
		sv(ok(1, 2)),
		cl(command(0x0e)), // PING
		sv(ok(1, 2)),
		cl(command(comStatistics)),
		sv(packet(1, []byte("Uptime: 10  Threads: 1"))),
		// LOCAL INFILE: the file follows the server's request.
		cl(query("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t")),
		sv(packet(1, []byte{0xfb}, []byte("x.csv"))),
		cl(packet(2, []byte("1,a\n2,b\n")), packet(3)),
		sv(ok(4, 2)),
		// A query killed while sending rows: ERR after rows.
		cl(query("SELECT * FROM big")),
		sv(packet(1, []byte{1}), colDef(2), textRow(3, "a"), textRow(4, "b")),
		sv(errPkt(5, 1317, "70100")),
		// MariaDB progress reports are no errors.
		cl(query("ALTER TABLE t ADD INDEX (a)")),
		sv(packet(1, []byte{0xff}, u16(0xffff), []byte{1, 1, 2, 0, 0, 0}), ok(2, 2)),
		// COM_CHANGE_USER, answered by an auth switch, then OK.
		cl(command(comChangeUser, []byte("other\x00"))),
		sv(packet(1, []byte{0xfe}, []byte("mysql_native_password\x00"))),
		cl(packet(2, bytes.Repeat([]byte{2}, 20))),
		sv(ok(3, 2)),
		// HY000 errors the server is to blame for: a lock wait timeout.
		cl(query("UPDATE t SET a = 1")),
		sv(errPkt(1, 1205, "HY000")),
		cl(command(comQuit)),
	}, []l7.Exchange{
		ex(5, 6, "USE", l7.OK),
		ex(7, 8, "PING", l7.OK),
		ex(9, 10, "STATISTICS", l7.OK),
		ex(11, 12, "LOAD", l7.OK),
		ex(15, 16, "SELECT big", l7.ServerError),
		ex(18, 19, "ALTER TABLE t", l7.OK),
		ex(20, 21, "CHANGE USER", l7.OK),
		ex(24, 25, "UPDATE t", l7.ServerError),
	})
}

func TestCursorFetch(t *testing.T) {
	// COM_STMT_EXECUTE opening a cursor: its answer ends with the column
	// definitions' EOF (SERVER_STATUS_CURSOR_EXISTS); rows come with
	// COM_STMT_FETCH.
	runConv(t, []seg{
		cl(command(comStmtPrepare, []byte("SELECT a FROM t"))),
		sv(prepareOK(3, 1, 0), colDef(2), eof(3, 2)),
		cl(command(comStmtExecute, u32(3), []byte{1}, u32(1))),
		sv(packet(1, []byte{1}), colDef(2), eof(3, 2|statusCursorExists)),
		cl(command(comStmtFetch, u32(3), u32(2))),
		sv(packet(1, []byte{0, 0, 1, 'a'}), packet(2, []byte{0, 0, 1, 'b'}), eof(3, 2|statusCursorExists)),
		cl(command(comStmtFetch, u32(3), u32(2))),
		sv(eof(1, 2|0x80)), // last row sent
	}, []l7.Exchange{ex(2, 3, "SELECT t", l7.OK), ex(4, 5, "SELECT t", l7.OK), ex(6, 7, "SELECT t", l7.OK)})
}

func TestTLSAndMidConnection(t *testing.T) {
	// SSLRequest: the TLS uprobes then feed the decrypted handshake
	// response (sequence 2) and everything after it.
	runConv(t, []seg{
		sv(greeting()),
		cl(packet(1, u32(baseCaps|capSSL), u32(1<<24), []byte{0x2d}, make([]byte, 23))),
		cl(handshake(2, baseCaps|capSSL)),
		sv(packet(3, []byte{1, 3}), ok(4, 2)), // caching_sha2 fast auth, OK
		cl(query("select 1")),
		sv(packet(1, []byte{1}), colDef(2), eof(3, 2), textRow(4, "1"), eof(5, 2)),
	}, []l7.Exchange{ex(4, 5, "SELECT", l7.OK)})

	// The capture begins in the middle of a response.
	p := runConv(t, []seg{
		sv(textRow(5, "x"), eof(6, 2)),
		cl(query("DELETE FROM t")),
		sv(ok(1, 2)),
	}, []l7.Exchange{ex(1, 2, "DELETE t", l7.OK)})
	if p.Orphans() != 2 {
		t.Errorf("orphans %d, want 2", p.Orphans())
	}

	// Too many connections: an ERR instead of the greeting.
	runConv(t, []seg{sv(errPkt(0, 1040, "08004"))}, []l7.Exchange{{HasResponse: true, End: ts0, API: "CONNECT", Class: l7.ServerError}})

	// The compressed protocol is not parsed.
	runConv(t, []seg{
		sv(greeting()),
		cl(handshake(1, baseCaps|capCompress)),
		sv(ok(2, 2)),
		cl([]byte{9, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 'x'}),
	}, nil)
}

func TestLongPackets(t *testing.T) {
	// A 16 MiB query, and a row longer than 16 MiB whose first value's
	// length starts with 0xfe: both continue over a second packet. The
	// capture kept 64 bytes of each.
	bigQuery := append([]byte{0xff, 0xff, 0xff, 0, comQuery}, []byte("INSERT INTO blobs VALUES ('")...)
	rowStart := []byte{0xff, 0xff, 0xff, 4, 0xfe, 0, 0, 0, 1, 0, 0, 0, 0}
	chunks := []l7.Chunk{
		{Dir: l7.Egress, TS: 1, Data: bigQuery, Size: 4 + maxPayload},
		{Dir: l7.Egress, TS: 2, Data: packet(1, []byte("')")), Size: 6},
		{Dir: l7.Ingress, TS: 3, Data: ok(2, 2), Size: 11},
		{Dir: l7.Egress, TS: 4, Data: query("SELECT b FROM blobs"), Size: 24},
		{Dir: l7.Ingress, TS: 5, Data: append(packet(1, []byte{1}), colDef(2)...), Size: 5 + 27},
		{Dir: l7.Ingress, TS: 6, Data: append(eof(3, 2), rowStart...), Size: 9 + 4 + maxPayload},
		{Dir: l7.Ingress, TS: 7, Data: append(packet(5, []byte("tail")), eof(6, 2)...), Size: 8 + 9},
	}
	p := NewParser(l7.Client)
	got := l7test.Run(p, chunks)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 3, API: "INSERT blobs", ReqBytes: 4 + maxPayload + 6, RespBytes: 11},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "SELECT blobs", ReqBytes: 24, RespBytes: 32 + 9 + 4 + maxPayload + 17},
	}
	if d := l7test.Diff(got, want, true); d != "" || p.Desyncs() != 0 {
		t.Errorf("desyncs %d\n%s", p.Desyncs(), d)
	}
}

func TestResyncAndPipeline(t *testing.T) {
	// Garbage from the server costs a desync; the next exchange is whole.
	c := []seg{
		cl(query("SELECT 1")),
		sv([]byte("\x07\x00\x00garbage that is not a packet stream")),
		cl(query("SELECT a FROM t")),
		sv(packet(1, []byte{1}), colDef(2), eof(3, 2), eof(4, 2)),
	}
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		p := NewParser(role)
		got := l7test.Run(p, chunksOf(c, role))
		for i := range got {
			got[i].ReqBytes, got[i].RespBytes = 0, 0
		}
		want := []l7.Exchange{ex(0, 1, "SELECT", l7.OK), ex(2, 3, "SELECT t", l7.OK)}
		if d := l7test.Diff(got, want, true); d != "" || p.Desyncs() != 1 {
			t.Errorf("%v: desyncs %d\n%s", role, p.Desyncs(), d)
		}
	}

	// A pipelining connector: more commands in flight than MaxPending.
	var req, resp [][]byte
	for range MaxPending + 5 {
		req = append(req, query("UPDATE c SET n = n + 1"))
		resp = append(resp, ok(1, 2))
	}
	want := make([]l7.Exchange, MaxPending)
	for i := range want {
		want[i] = ex(0, 1, "UPDATE c", l7.OK)
	}
	p := runConv(t, []seg{cl(req...), sv(resp...)}, want)
	if p.Overflows() != 5 || p.Orphans() != 5 || p.Desyncs() != 5 {
		t.Errorf("overflows %d orphans %d desyncs %d, want 5 each", p.Overflows(), p.Orphans(), p.Desyncs())
	}

	// The connection closes with a command unanswered; a replication
	// stream ends the parsing after its first event.
	runConv(t, []seg{
		cl(command(comBinlogDump, u32(4), u16(0), u32(1), []byte("bin.000001"))),
		sv(packet(1, []byte{0}, bytes.Repeat([]byte{1}, 19))),
		sv(packet(2, []byte{0}, bytes.Repeat([]byte{2}, 19))),
		cl(query("SELECT 1")),
	}, []l7.Exchange{ex(0, 1, "BINLOG DUMP", l7.OK)})
	runConv(t, []seg{cl(query("SELECT sleep(100)"))}, []l7.Exchange{ex(0, -1, "SELECT", l7.OK)})
}

func TestDetect(t *testing.T) {
	for name, b := range l7test.FirstBytes {
		want := name == "mysql" || name == "mysql-ssl"
		if got := Detect(b); got != want {
			t.Errorf("%s: Detect %v, want %v", name, got, want)
		}
		if DetectGreeting(b) {
			t.Errorf("%s: DetectGreeting", name)
		}
	}
	for _, f := range []string{"mariadb_cli", "mariadb_slap", "go_mysql", "login_error"} {
		segs := l7test.Load(t, "testdata/"+f+".chunks")
		if segs[0].FromClient || !DetectGreeting(segs[0].Data) {
			t.Errorf("%s: greeting not detected", f)
		}
		if !Detect(segs[1].Data) || Detect(segs[0].Data) {
			t.Errorf("%s: handshake response not detected, or the greeting taken for one", f)
		}
	}
	// The PostgreSQL fixtures: neither side's first bytes are MySQL's.
	for _, f := range []string{"pgbench_simple", "pgbench_extended", "pgbench_prepared", "pgbench_error", "psql", "pgx", "login_error"} {
		for _, s := range l7test.Load(t, "../pgsql/testdata/"+f+".chunks")[:2] {
			if Detect(s.Data) || DetectGreeting(s.Data) {
				t.Errorf("pgsql %s: % x detected", f, s.Data[:min(len(s.Data), 16)])
			}
		}
	}
	if !DetectGreeting(greeting()) || !Detect(handshake(1, baseCaps)) {
		t.Error("built greeting or handshake response not detected")
	}
	for _, b := range [][]byte{
		handshake(0, baseCaps),                 // sequence 0: a command, not a handshake response
		handshake(1, baseCaps&^capProtocol41),  // pre-4.1
		append(handshake(1, baseCaps)[:20], 1), // filler not zero
		query("SELECT 1"),
	} {
		if Detect(b) {
			t.Errorf("% x detected", b[:min(len(b), 32)])
		}
	}
}

func TestAppendAPIOutcome(t *testing.T) {
	cases := []struct {
		pkt  []byte
		want string
	}{
		{query("SELECT * FROM `shop`.`orders` WHERE id = 1"), "SELECT shop.orders"},
		{query("SELECT * FROM orders_with_a_long_name")[:24], "SELECT"}, // a prefix
		{command(comStmtPrepare, []byte("insert into t values (?)")), "INSERT t"},
		{command(0x0e), "PING"},
		{command(comInitDB, []byte("shop")), "USE"},
		{command(comStmtExecute, u32(1)), ""},
		{packet(1, []byte{comQuery}), ""}, // not a command (sequence 1)
	}
	for _, c := range cases {
		if got := string(AppendAPI(nil, c.pkt)); got != c.want {
			t.Errorf("% x: %q, want %q", c.pkt[:min(len(c.pkt), 16)], got, c.want)
		}
	}
	outcomes := []struct {
		pkt   []byte
		class l7.Class
		ok    bool
	}{
		{ok(1, 2), l7.OK, true},
		{errPkt(1, 1064, "42000"), l7.ClientError, true},
		{errPkt(1, 1213, "40001"), l7.ServerError, true}, // deadlock
		{errPkt(1, 1205, "HY000"), l7.ServerError, true}, // lock wait timeout
		{errPkt(1, 1366, "HY000"), l7.ClientError, true}, // incorrect value
		{errPkt(1, 1290, "HY000"), l7.ClientError, true}, // read-only server: the write was sent to a replica
		{errPkt(1, 1040, "08004"), l7.ServerError, true}, // too many connections
		{errPkt(1, 2000, "XX000"), l7.ServerError, true},
		{errPkt(1, 1234, "42S22")[:10], l7.ServerError, false}, // the SQLSTATE cut
		{packet(0, []byte{0xff}, u16(1130), []byte("Host not allowed")), l7.ServerError, true},
		{nil, l7.OK, false},
	}
	for _, c := range outcomes {
		if class, ok := Outcome(c.pkt); class != c.class || ok != c.ok {
			t.Errorf("% x: %v %v, want %v %v", c.pkt, class, ok, c.class, c.ok)
		}
	}
}
