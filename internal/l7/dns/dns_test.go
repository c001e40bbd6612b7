package dns

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// otherFirstBytes are what clients of the other protocols send first.
var otherFirstBytes = map[string]string{
	"http":             "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"http post":        "POST /api/v1/users HTTP/1.1\r\nHost: x\r\n",
	"http2":            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"pgsql startup":    "\x00\x00\x00\x54\x00\x03\x00\x00user\x00postgres\x00database\x00postgres\x00\x00",
	"pgsql ssl":        "\x00\x00\x00\x08\x04\xd2\x16\x2f",
	"mysql handshake":  "\x55\x00\x00\x01\x8d\xa6\xff\x09\x00\x00\x00\x01\x21\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00root\x00",
	"kafka":            "\x00\x00\x00\x1c\x00\x12\x00\x03\x00\x00\x00\x01\x00\x09kafka-cli\x00\x00",
	"mongo op_msg":     "\x5d\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\x00\x00\x00\x00\x00\x48\x00\x00\x00\x10hello\x00",
	"mongo id 256":     "\x5d\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\x00\x00\x00\x00\x00\x48\x00\x00\x00\x10hello\x00",
	"redis":            "*1\r\n$4\r\nPING\r\n",
	"redis inline":     "PING\r\n",
	"memcached get":    "get k\r\n",
	"memcached binary": "\x80\x01\x00\x03\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00foo",
}

// query builds a query for name (dotted, "" for the root).
func query(id uint16, flags uint16, name string, typ, class uint16) []byte {
	b := []byte{byte(id >> 8), byte(id), byte(flags >> 8), byte(flags), 0, 1, 0, 0, 0, 0, 0, 0}
	b = appendWireName(b, name)
	return append(b, byte(typ>>8), byte(typ), byte(class>>8), byte(class))
}

func appendWireName(b []byte, name string) []byte {
	if name != "" {
		for _, l := range strings.Split(name, ".") {
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
	}
	return append(b, 0)
}

// response answers q with rcode (and an A record for A questions).
func response(q []byte, rcode byte) []byte {
	r := append([]byte(nil), q...)
	r[2] |= 0x80
	r[3] = 0x80 | rcode
	return r
}

func withAR(q []byte) []byte {
	q[11] = 1
	return q
}

func tcp(m []byte) []byte { return append([]byte{byte(len(m) >> 8), byte(len(m))}, m...) }

func TestDetect(t *testing.T) {
	for _, b := range [][]byte{
		query(0xabcd, 0x0100, "example.com", 1, 1),
		query(1, 0x0000, "", 2, 1),                    // NS of the root
		query(2, 0x0120, "example.com", 28, 1),        // RD, AD
		tcp(query(3, 0x0100, "example.com", 1, 1)),    // over TCP
		query(4, 0x2000, "example.com", 6, 1),         // NOTIFY
		withAR(query(5, 0x0100, "example.com", 1, 1)), // with an OPT record
	} {
		if !Detect(b) {
			t.Errorf("Detect(%x) = false", b)
		}
	}
	resp := response(query(6, 0x0100, "example.com", 1, 1), 0)
	for _, b := range [][]byte{
		nil, {0, 1}, resp, tcp(resp),
		query(7, 0x1000, "example.com", 1, 1),                               // STATUS
		query(8, 0x0140, "example.com", 1, 1),                               // Z bit
		append(query(9, 0x0100, "", 1, 1)[:4:4], 0, 2, 0, 0, 0, 0, 0, 0, 0), // two questions
		append(query(10, 0x0100, "", 1, 1)[:12:12], 0xc0),                   // a pointer
		tcp(query(11, 0x0100, "", 1, 1))[:2],
	} {
		if Detect(b) {
			t.Errorf("Detect(%x) = true", b)
		}
	}
	for name, s := range otherFirstBytes {
		if Detect([]byte(s)) {
			t.Errorf("Detect(%s %q) = true", name, s)
		}
	}
	files, _ := filepath.Glob("testdata/*.chunks")
	for _, f := range files {
		// raw-udp starts with a malformed query (two questions), which
		// no resolver sends first.
		if first := firstClient(t, f); Detect(first) == strings.HasSuffix(f, "raw-udp.chunks") {
			t.Errorf("%s: Detect(%x) = false", f, first)
		}
	}
	others, _ := filepath.Glob("../redis/testdata/*.chunks")
	more, _ := filepath.Glob("../memcached/testdata/*.chunks")
	for _, f := range append(others, more...) {
		if first := firstClient(t, f); Detect(first) {
			t.Errorf("%s: Detect(%q) = true", f, first)
		}
	}
}

func firstClient(t *testing.T, path string) []byte {
	for _, s := range l7test.Load(t, path) {
		if s.FromClient {
			return s.Data[:min(len(s.Data), 32)]
		}
	}
	t.Fatalf("%s: no client segment", path)
	return nil
}

func TestAppendAPI(t *testing.T) {
	long := strings.Repeat("abcdefghij.", 20) + "example.com"
	for _, tc := range []struct {
		msg  []byte
		want string
	}{
		{query(1, 0x0100, "Example.COM", 1, 1), "A example.com"},
		{query(1, 0x0100, "", 2, 1), "NS ."},
		{query(1, 0x0100, "db.example.test", 28, 1), "AAAA db.example.test"},
		{query(1, 0x0100, "version.bind", 16, 3), "CH TXT version.bind"},
		{query(1, 0x2800, "example.com", 6, 1), "UPDATE SOA example.com"},
		{query(1, 0x0100, "example.com", 65, 1), "HTTPS example.com"},
		{query(1, 0x0100, "example.com", 65000, 1), "TYPE65000 example.com"},
		{query(1, 0x0100, "example.com", 1, 42), "CLASS42 A example.com"},
		{query(1, 0x0100, "2.0.0.10.in-addr.arpa", 12, 1), "PTR {ip}.in-addr.arpa"},
		{query(1, 0x0100, strings.Repeat("a.", 32)+"ip6.arpa", 12, 1), "PTR {ip}.ip6.arpa"},
		{query(1, 0x0100, "in-addr.arpa", 2, 1), "NS in-addr.arpa"},
		{query(1, 0x0100, "a1b2c3d4e5.session-12345.cdn.example.com", 1, 1), "A {id}.{id}.cdn.example.com"},
		{query(1, 0x0100, "api2.web-01.example.com", 1, 1), "A api2.web-01.example.com"},
		{query(1, 0x0100, strings.Repeat("z", 40)+".example.com", 16, 1), "TXT {id}.example.com"},
		{query(1, 0x0100, "we!rd.example.com", 1, 1), "A {id}.example.com"},
		{query(1, 0x0100, "*.example.com", 1, 1), "A {id}.example.com"},
		{query(1, 0x0100, "_ldap._tcp.example.com", 33, 1), "SRV _ldap._tcp.example.com"},
		{query(1, 0x0100, long, 1, 1), "A *." + strings.Repeat("abcdefghij.", 10) + "example.com"}, // one label more: 136 bytes
	} {
		got, ok := AppendAPI(nil, tc.msg)
		if string(got) != tc.want || !ok {
			t.Errorf("AppendAPI(%x) = %q, %v; want %q", tc.msg, got, ok, tc.want)
		}
		if len(got) > maxAPI {
			t.Errorf("%q: %d bytes", got, len(got))
		}
	}
	for _, bad := range [][]byte{nil, query(1, 0x0100, "example.com", 1, 1)[:14], append(query(1, 0x0100, "", 1, 1)[:12:12], 0xc0, 0x0c, 0, 1, 0, 1)} {
		if got, ok := AppendAPI(nil, bad); ok {
			t.Errorf("AppendAPI(%x) = %q", bad, got)
		}
	}
	m := query(1, 0x0100, "www.example.com", 28, 1)
	if n := testing.AllocsPerRun(100, func() {
		var buf [160]byte
		AppendAPI(buf[:0], m)
	}); n != 0 {
		t.Errorf("AppendAPI allocates %.0f times", n)
	}
}

func TestResponseClass(t *testing.T) {
	q := query(1, 0x0100, "example.com", 1, 1)
	for rcode, want := range map[byte]l7.Class{
		0: l7.OK, 1: l7.ClientError, 2: l7.ServerError, 3: l7.ClientError, 4: l7.ServerError, 5: l7.ClientError,
		6: l7.ClientError, 7: l7.ClientError, 8: l7.ClientError, 9: l7.ClientError, 10: l7.ClientError,
		11: l7.ClientError, 12: l7.ServerError, 15: l7.ServerError,
	} {
		if got := ResponseClass(response(q, rcode)); got != want {
			t.Errorf("rcode %d: %v, want %v", rcode, got, want)
		}
	}
	// Extended RCODE in the OPT record: BADVERS (16) is header 0 + 1<<4;
	// BADCOOKIE (23) header 7 + 1<<4; 24 is not assigned.
	withOPT := func(rcode, ext byte) []byte {
		r := response(q, rcode)
		r[11] = 1 // ARCOUNT
		return append(r, 0, 0, 41, 0x04, 0xd0, ext, 0, 0, 0, 0, 0)
	}
	for _, tc := range []struct {
		rcode, ext byte
		want       l7.Class
	}{{0, 0, l7.OK}, {0, 1, l7.ClientError}, {7, 1, l7.ClientError}, {8, 1, l7.ServerError}} {
		if got := ResponseClass(withOPT(tc.rcode, tc.ext)); got != tc.want {
			t.Errorf("rcode %d ext %d: %v, want %v", tc.rcode, tc.ext, got, tc.want)
		}
	}
	// Cut before the OPT record: the header's RCODE alone.
	if got := ResponseClass(withOPT(0, 1)[:20]); got != l7.OK {
		t.Errorf("cut: %v", got)
	}
	if got := ResponseClass(nil); got != l7.OK {
		t.Errorf("empty: %v", got)
	}
}

func TestPairing(t *testing.T) {
	a := query(0x1111, 0x0100, "a.example.com", 1, 1)
	aaaa := query(0x2222, 0x0100, "a.example.com", 28, 1)
	other := query(0x1111, 0x0100, "b.example.com", 1, 1) // same id, another question
	p := NewUDPParser(l7.Client)
	var out []l7.Exchange
	feed := func(ts uint64, dir l7.Direction, m []byte) {
		out = p.Feed(l7.Chunk{Dir: dir, TS: ts, Data: m, Size: len(m)}, out)
	}
	feed(1, l7.Egress, a)
	feed(2, l7.Egress, aaaa)
	feed(3, l7.Ingress, response(aaaa, 0))  // out of order
	feed(4, l7.Ingress, response(other, 0)) // not this question: not paired
	feed(5, l7.Ingress, response(a, 3))
	feed(6, l7.Ingress, response(a, 0)) // a second answer: nothing waits
	noQ := response(a, 1)[:12]
	noQ[5] = 0 // FORMERR without the question: paired by id
	feed(7, l7.Egress, a)
	feed(8, l7.Ingress, noQ)
	out = p.Flush(out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 2, End: 3, API: "AAAA a.example.com", ReqBytes: 31, RespBytes: 31},
		{HasRequest: true, HasResponse: true, Start: 1, End: 5, API: "A a.example.com", Class: l7.ClientError, ReqBytes: 31, RespBytes: 31},
		{HasRequest: true, HasResponse: true, Start: 7, End: 8, API: "A a.example.com", Class: l7.ClientError, ReqBytes: 31, RespBytes: 12},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 2 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}
}

func TestRetransmitAndTimeout(t *testing.T) {
	q := query(7, 0x0100, "slow.example.com", 1, 1)
	p := NewUDPParser(l7.Server)
	var out []l7.Exchange
	for _, ts := range []uint64{1, 2_000_000_000} { // the same query again after 2 s
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: ts, Data: q, Size: len(q)}, out)
	}
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 3_000_000_000, Data: response(q, 0), Size: len(q)}, out)
	// The second query has waited over Timeout by the next chunk.
	other := query(8, 0x0100, "x.example.com", 1, 1)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2_000_000_000 + Timeout + 1, Data: other, Size: len(other)}, out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 3_000_000_000, API: "A slow.example.com", ReqBytes: 34, RespBytes: 34},
		{HasRequest: true, Start: 2_000_000_000, API: "A slow.example.com", ReqBytes: 34},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("%+v\nwant %+v", out, want)
	}
	if out = p.Flush(nil); len(out) != 1 || out[0].API != "A x.example.com" || out[0].HasResponse {
		t.Errorf("flushed %+v", out)
	}
}

func TestMaxPending(t *testing.T) {
	p := NewUDPParser(l7.Client)
	var out []l7.Exchange
	for i := range maxPending + 3 {
		q := query(uint16(i), 0x0100, "example.com", 1, 1)
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i + 1), Data: q, Size: len(q)}, out)
	}
	if len(out) != 3 || out[0].Start != 1 || out[2].Start != 3 || out[0].HasResponse || len(p.q) != maxPending {
		t.Errorf("%d given up (%+v), %d pending", len(out), out, len(p.q))
	}
}

func TestTCPFraming(t *testing.T) {
	q1, q2 := query(1, 0x0100, "a.example.com", 1, 1), query(2, 0x0100, "b.example.com", 1, 1)
	big := response(q2, 0)
	big = append(big, make([]byte, 3000)...) // an answer section the capture does not hold
	stream := append(tcp(q1), tcp(q2)...)
	resp := append(tcp(big), tcp(response(q1, 3))...)
	p := NewParser(l7.Client)
	// Both queries in one write, their length prefixes split oddly; the
	// responses out of order, the first one captured on 64 bytes.
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: stream[:1], Size: 1}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 2, Data: stream[1:34], Size: 33}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 3, Data: stream[34:], Size: len(stream) - 34}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 4, Data: resp[:64], Size: len(tcp(big))}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: resp[len(tcp(big)):], Size: len(resp) - len(tcp(big))}, out)
	out = p.Flush(out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 2, End: 4, API: "A b.example.com", ReqBytes: 33, RespBytes: 3033},
		{HasRequest: true, HasResponse: true, Start: 1, End: 5, API: "A a.example.com", Class: l7.ClientError, ReqBytes: 33, RespBytes: 33},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 0 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}

	// A gap over a length prefix: a desync, and the stream starts again
	// at a chunk that starts a message.
	p = NewParser(l7.Client)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: stream[:10], Size: len(stream)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: []byte{0, 5, 1, 2, 3, 4, 5}, Size: 7}, out) // too short for a header
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 3, Data: tcp(response(q2, 0)), Size: 33}, out)
	q3 := query(3, 0x0100, "c.example.com", 1, 1)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: tcp(q3), Size: 33}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: tcp(response(q3, 0)), Size: 33}, out)
	out = p.Flush(out)
	// q1 was cut (dropped with the desync), q2 hidden: its response
	// finds no query. Desyncs: the gap, the short message, the orphan.
	if l7test.Summary(out) != "A c.example.com ok" || p.Desyncs() != 3 {
		t.Errorf("%s, %d desyncs", l7test.Summary(out), p.Desyncs())
	}
}

func TestWrongWay(t *testing.T) {
	// A response where queries go, a query where responses go, a datagram
	// too short for a header: desyncs, no exchange.
	q := query(1, 0x0100, "example.com", 1, 1)
	p := NewUDPParser(l7.Client)
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: response(q, 0), Size: len(q)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: q, Size: len(q)}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 3, Data: q[:5], Size: 5}, out)
	if out = p.Flush(out); len(out) != 0 || p.Desyncs() != 3 {
		t.Errorf("%+v, %d desyncs", out, p.Desyncs())
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	q := query(0x1234, 0x0100, "www.example.com", 1, 1)
	r := response(q, 0)
	var in l7.Interner
	for name, p := range map[string]*Parser{"udp": NewUDPParser(l7.Server), "tcp": NewParser(l7.Server)} {
		p.SetInterner(&in)
		qq, rr := q, r
		if name == "tcp" {
			qq, rr = tcp(q), tcp(r)
		}
		out := make([]l7.Exchange, 0, 4)
		feed := func() {
			out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: qq, Size: len(qq)}, out[:0])
			out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 2, Data: rr, Size: len(rr)}, out[:0])
		}
		feed()
		if n := testing.AllocsPerRun(100, feed); n != 0 || len(out) != 1 {
			t.Errorf("%s: %.0f allocations per exchange", name, n)
		}
	}
}

func BenchmarkUDP(b *testing.B) {
	q := query(0x1234, 0x0100, "www.example.com", 1, 1)
	r := response(q, 0)
	p := NewUDPParser(l7.Server)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu := l7test.StartCPU()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: q, Size: len(q)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: r, Size: len(r)}, out[:0])
	}
	cpu.Report(b, b.N)
}

// BenchmarkTCPPipelined is 16 queries in one write and their responses
// in one.
func BenchmarkTCPPipelined(b *testing.B) {
	var req, resp []byte
	for i := range 16 {
		q := query(uint16(i), 0x0100, "www.example.com", 1, 1)
		req = append(req, tcp(q)...)
		resp = append(resp, tcp(response(q, 0))...)
	}
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 16)
	b.ReportAllocs()
	cpu := l7test.StartCPU()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: resp, Size: len(resp)}, out[:0])
	}
	cpu.Report(b, b.N*16)
}

// FuzzParser feeds arbitrary bytes, cut into chunks of arbitrary
// directions, sizes and capture lengths, to a TCP and a UDP parser and
// checks the invariants: no panic, timestamps taken from the chunks, no
// more exchanges than queries could fit in the bytes, bounded state,
// bounded templates.
func FuzzParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cuts []byte, server bool) {
		role := l7.Client
		if server {
			role = l7.Server
		}
		for _, p := range []*Parser{NewParser(role), NewUDPParser(role)} {
			chunks, reqBytes := l7test.FuzzChunks(data, cuts, role)
			var out []l7.Exchange
			tss := map[uint64]bool{}
			for _, c := range chunks {
				tss[c.TS] = true
				out = p.Feed(c, out)
				if len(p.q) > maxPending {
					t.Fatalf("%d pending", len(p.q))
				}
			}
			out = p.Flush(out)
			// A query takes 12 bytes at least (a datagram's capture may be
			// shorter than the datagram: count the datagrams then).
			if len(out) > reqBytes/headerLen+len(chunks) {
				t.Fatalf("%d exchanges from %d request bytes", len(out), reqBytes)
			}
			for _, e := range out {
				if !e.HasRequest || !tss[e.Start] || e.HasResponse && !tss[e.End] {
					t.Fatalf("exchange %+v: timestamps not from the chunks", e)
				}
				if len(e.API) > maxAPI {
					t.Fatalf("template %q too long", e.API)
				}
			}
		}
	})
}

func TestFuzzCorpus(t *testing.T) {
	l7test.CheckFuzzCorpus(t, "testdata/*.chunks", "testdata/fuzz/FuzzParser")
}
