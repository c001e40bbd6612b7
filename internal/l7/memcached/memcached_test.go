package memcached

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
	"redis":            "*1\r\n$4\r\nPING\r\n",
	"redis inline":     "PING\r\n",
	"redis inline get": "GET k\r\n",
	"dns udp":          "\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01",
	"dns tcp":          "\x00\x1d\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x07example\x03com\x00\x00\x01\x00\x01",
	"memcached binary": "\x80\x01\x00\x03\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00foo",
}

func TestDetect(t *testing.T) {
	for _, s := range []string{"get k\r\n", "gets user:1 user:2\r\n", "set k 0 0 5\r\nhello\r\n", "delete k\r\n",
		"incr n 1\r\n", "stats\r\n", "stats slabs\r\n", "version\r\n", "version\n", "mg foo v\r\n", "mn\r\n",
		"flush_all\r\n", "quit\r\n", "lru_crawler metadump all\r\n", "watch mutations\r\n", "cas k 0 0 1 5\r\n"} {
		if !Detect([]byte(s)) {
			t.Errorf("Detect(%q) = false", s)
		}
	}
	for _, s := range []string{"", "get", "get \r\n", "get  k", "GET k\r\n", "getx k\r\n", "version", "version x",
		"stats\r", "mn", "bogus\r\n", "set\r\n"} {
		if Detect([]byte(s)) {
			t.Errorf("Detect(%q) = true", s)
		}
	}
	for name, s := range otherFirstBytes {
		if Detect([]byte(s)) {
			t.Errorf("Detect(%s %q) = true", name, s)
		}
	}
	for _, f := range glob(t, "testdata/*.chunks") {
		first := firstClient(t, f)
		if want := !strings.Contains(f, "binary"); Detect(first) != want {
			t.Errorf("%s: Detect(%q) = %v", f, first, !want)
		}
	}
	for _, f := range glob(t, "../redis/testdata/*.chunks", "../dns/testdata/*.chunks") {
		if first := firstClient(t, f); Detect(first) {
			t.Errorf("%s: Detect(%q) = true", f, first)
		}
	}
}

func glob(t *testing.T, patterns ...string) []string {
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
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
	for req, want := range map[string]string{
		"get user:1 user:2\r\n":             "get",
		"set secret-key 0 0 5\r\nhello\r\n": "set",
		"stats\r\n":                         "stats",
		"stats slabs\r\n":                   "stats slabs",
		"stats cachedump 1 10\r\n":          "stats cachedump",
		"stats nosuch\r\n":                  "stats",
		"lru_crawler metadump all\r\n":      "lru_crawler metadump",
		"mg key v q Oabc\r\n":               "mg",
		"delete k noreply\n":                "delete",
		"get":                               "", // cut: may be "gets"
		"get k":                             "get",
		"bogus\r\n":                         "",
		"GET k\r\n":                         "",
		"\r\n":                              "",
		"":                                  "",
	} {
		got, ok := AppendAPI(nil, []byte(req))
		if string(got) != want || ok != (want != "") {
			t.Errorf("AppendAPI(%q) = %q, %v; want %q", req, got, ok, want)
		}
	}
	req := []byte("stats slabs\r\n")
	if n := testing.AllocsPerRun(100, func() {
		var buf [32]byte
		AppendAPI(buf[:0], req)
	}); n != 0 {
		t.Errorf("AppendAPI allocates %.0f times", n)
	}
}

func TestResponseClass(t *testing.T) {
	for resp, want := range map[string]l7.Class{
		"STORED\r\n": l7.OK, "NOT_STORED\r\n": l7.OK, "EXISTS\r\n": l7.OK, "NOT_FOUND\r\n": l7.OK, "END\r\n": l7.OK,
		"VALUE k 0 1\r\n": l7.OK, "42\r\n": l7.OK, "EN\r\n": l7.OK, "NF\r\n": l7.OK, "HD\r\n": l7.OK, "": l7.OK,
		"ERROR\r\n": l7.ClientError,
		"CLIENT_ERROR bad command line format\r\n":      l7.ClientError,
		"CLIENT_ERROR bad data chunk\r\n":               l7.ClientError,
		"SERVER_ERROR object too large for cache\r\n":   l7.ServerError,
		"SERVER_ERROR out of memory storing object\r\n": l7.ServerError,
		"BUSY currently processing crawler request\r\n": l7.ServerError,
		"ERRORS\r\n": l7.OK,
	} {
		if got := ResponseClass([]byte(resp)); got != want {
			t.Errorf("ResponseClass(%q) = %v, want %v", resp, got, want)
		}
	}
}

// exchanges feeds alternating client/server strings (client first) to a
// client-side parser, one chunk each, timestamps 1, 2, 3...
func exchanges(p *Parser, parts ...string) []l7.Exchange {
	var out []l7.Exchange
	for i, s := range parts {
		dir := l7.Egress
		if i%2 == 1 {
			dir = l7.Ingress
		}
		out = p.Feed(l7.Chunk{Dir: dir, TS: uint64(i + 1), Data: []byte(s), Size: len(s)}, out)
	}
	return p.Flush(out)
}

func TestNoreplyAtOnce(t *testing.T) {
	// A noreply command is out as soon as it is read, before anything
	// the server says, and takes no response from the next command.
	p := NewParser(l7.Server)
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: []byte("set k 0 0 2 noreply\r\nhi\r\nget k\r\n"), Size: 29}, nil)
	want := []l7.Exchange{{HasRequest: true, Start: 1, API: "set", ReqBytes: 25}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("%+v", out)
	}
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 2, Data: []byte("VALUE k 0 2\r\nhi\r\nEND\r\n"), Size: 22}, out)
	want = append(want, l7.Exchange{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "get", ReqBytes: 7, RespBytes: 22})
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 0 {
		t.Errorf("%+v, %d desyncs", out, p.Desyncs())
	}
}

func TestMalformedStorage(t *testing.T) {
	// memcached swallows a data block only after a well-formed line;
	// otherwise it answers CLIENT_ERROR (or ERROR) and reads the block
	// as a command line, which it answers ERROR.
	for _, tc := range []struct{ req, resp, want string }{
		{"set k 0 0 x\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n", "set client_error| client_error"},
		{"set k 0 0\r\nhi\r\n", "ERROR\r\nERROR\r\n", "set client_error| client_error"},
		{"set " + strings.Repeat("k", 251) + " 0 0 2\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n", "set client_error| client_error"},
		{"set k 0 0 -1\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n", "set client_error| client_error"},
		{"set k 0 0 2 extra\r\nhi\r\n", "STORED\r\n", "set ok"},
		{"cas k 0 0 2 x\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\nERROR\r\n", "cas client_error| client_error"},
		// a block longer than declared: memcached reads its length and
		// answers "bad data chunk"; the rest is a line
		{"set k 0 0 1\r\nhi\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n", "set client_error| client_error"},
	} {
		p := NewParser(l7.Client)
		if got := l7test.Summary(exchanges(p, tc.req, tc.resp)); got != tc.want || p.Desyncs() != 0 {
			t.Errorf("%q: %s, %d desyncs; want %s", tc.req, got, p.Desyncs(), tc.want)
		}
	}
}

func TestQuietPairing(t *testing.T) {
	// Opaque tokens pair a quiet pipeline's answers exactly: mg a and
	// mg c miss (left out), mg b hits.
	p := NewParser(l7.Client)
	got := exchanges(p, "mg a v q Oa\r\nmg b v q Ob\r\nmg c v q Oc\r\nmn\r\n", "VA 1 Ob\r\nx\r\nMN\r\n")
	if s := l7test.Summary(got); s != "mg -|mg ok|mg -|mn ok" || got[1].RespBytes != 12 {
		t.Errorf("%s %+v", s, got)
	}
	// Without them, a quiet command's answer goes to the first one that
	// could have sent it.
	p = NewParser(l7.Client)
	got = exchanges(p, "ms a 1 q\r\nx\r\nmg b v q\r\nmd c q\r\nmn\r\n", "NF\r\nMN\r\n")
	if s := l7test.Summary(got); s != "ms ok|mg -|md -|mn ok" {
		t.Errorf("%s", s)
	}
	// Unanswered at close: out of Flush.
	p = NewParser(l7.Client)
	got = exchanges(p, "mg a v q\r\n")
	if s := l7test.Summary(got); s != "mg -" {
		t.Errorf("%s", s)
	}
}

func TestValueEndInGap(t *testing.T) {
	// A get whose value is larger than the capture: the data block's
	// length steps over it and the 5 bytes after it can only be END.
	val := strings.Repeat("v", 10000)
	resp := "VALUE k 0 10000\r\n" + val + "\r\nEND\r\n"
	p := NewParser(l7.Client)
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte("get k\r\n"), Size: 7}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: []byte(resp[:256]), Size: len(resp)}, out)
	// One byte more than END: what follows the block is not known.
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 3, Data: []byte("get k\r\n"), Size: 7}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 4, Data: []byte(resp[:256]), Size: len(resp) + 1}, out)
	// Cut inside the block when the connection closes: the response
	// began, so it answers the request.
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 5, Data: []byte("get k\r\n"), Size: 7}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 6, Data: []byte(resp[:256]), Size: 300}, out)
	out = p.Flush(out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "get", ReqBytes: 7, RespBytes: len(resp)},
		{HasRequest: true, HasResponse: true, Start: 3, End: 4, API: "get", ReqBytes: 7, RespBytes: 256},
		{HasRequest: true, HasResponse: true, Start: 5, End: 6, API: "get", ReqBytes: 7, RespBytes: 300},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 1 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}
}

// TestValueEndCut: a reply a few bytes over the capture (a ~4 KiB value
// of memcslap's): the value is whole and its END, cut after 0 to 4 of its
// bytes, is stepped over; a cut line that is not an END's start is lost.
func TestValueEndCut(t *testing.T) {
	val := strings.Repeat("v", 4032)
	resp := "VALUE k 0 4032\r\n" + val + "\r\nEND\r\n"
	p := NewParser(l7.Client)
	var out []l7.Exchange
	want := []l7.Exchange{}
	for i, seen := range []int{0, 1, 2, 3, 4} {
		ts := uint64(2*i + 1)
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: ts, Data: []byte("get k\r\n"), Size: 7}, out)
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: ts + 1, Data: []byte(resp[:len(resp)-5+seen]), Size: len(resp)}, out)
		want = append(want, l7.Exchange{HasRequest: true, HasResponse: true, Start: ts, End: ts + 1, API: "get", ReqBytes: 7, RespBytes: len(resp)})
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 0 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}
	// "VALUE" cut after "V": not an END, so the rest is not known.
	other := "VALUE k 0 4032\r\n" + val + "\r\nVALUE j 0 1\r\nx\r\nEND\r\n"
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 20, Data: []byte("get k j\r\n"), Size: 9}, out[:0])
	p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 21, Data: []byte(other[:len(resp)-4]), Size: len(other)}, out)
	if p.Desyncs() != 1 {
		t.Errorf("a cut VALUE line: %d desyncs, want 1", p.Desyncs())
	}
}

func TestDesyncAndResync(t *testing.T) {
	// Pipelined sets captured into the second one's line: the responses
	// after the ones to requests seen stand for hidden requests.
	batch := "set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nset c 0 0 1\r\n3\r\n"
	p := NewParser(l7.Client)
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte(batch[:20]), Size: len(batch)}, nil)
	got := exchanges(p, "", "STORED\r\nSTORED\r\nSTORED\r\n", "version\r\n", "VERSION 1.6.18\r\n")
	if s := l7test.Summary(append(out, got...)); s != "set ok|set ok| ok|version ok" || p.Desyncs() != 1 {
		t.Errorf("%s, %d desyncs", s, p.Desyncs())
	}
	// A chunk that does not start a command is skipped after a desync.
	p = NewParser(l7.Client)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte("get a b"), Size: 500}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 2, Data: []byte("c d e\r\n"), Size: 7}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 3, Data: []byte("END\r\n"), Size: 5}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: []byte("get x\r\n"), Size: 7}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: []byte("END\r\n"), Size: 5}, out)
	out = p.Flush(out)
	if s := l7test.Summary(out); s != "get ok|get ok" || p.Desyncs() != 1 || out[0].Start != 1 || out[1].Start != 4 {
		t.Errorf("%s %+v, %d desyncs", s, out, p.Desyncs())
	}
	// A server data block without its CRLF.
	p = NewParser(l7.Client)
	got = exchanges(p, "get k\r\n", "VALUE k 0 1\r\nxy\r\nEND\r\n")
	if s := l7test.Summary(got); s != "get ok" || p.Desyncs() != 1 {
		t.Errorf("%s, %d desyncs", s, p.Desyncs())
	}
}

func TestOrphanAndWatch(t *testing.T) {
	p := NewParser(l7.Client)
	got := exchanges(p, "", "STORED\r\n", "get k\r\n", "END\r\n")
	if s := l7test.Summary(got); s != "get ok" || p.Desyncs() != 1 {
		t.Errorf("%s, %d desyncs", s, p.Desyncs())
	}
	p = NewParser(l7.Client)
	got = exchanges(p, "watch\r\n", "OK\r\nts=1 gid=1 type=item_get\r\nts=2 gid=2 type=item_store\r\n")
	if s := l7test.Summary(got); s != "watch ok" || p.Desyncs() != 0 {
		t.Errorf("%s, %d desyncs", s, p.Desyncs())
	}
}

func TestPipelineOverflow(t *testing.T) {
	var req, resp strings.Builder
	for range maxPending + 10 {
		req.WriteString("get k\r\n")
		resp.WriteString("END\r\n")
	}
	p := NewParser(l7.Client)
	got := exchanges(p, req.String(), resp.String())
	if len(got) != maxPending+10 || l7test.Summary(got) != strings.TrimSuffix(strings.Repeat("get ok|", maxPending+10), "|") || p.Desyncs() != 1 {
		t.Errorf("%d exchanges, %d desyncs", len(got), p.Desyncs())
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	for name, segs := range map[string][]l7test.Segment{
		"keepalive": {{FromClient: true, Data: []byte("get user:1\r\n")}, {Data: []byte("VALUE user:1 0 5\r\nalice\r\nEND\r\n")}},
		"pipeline":  pipelineSegments(),
	} {
		p := NewParser(l7.Server)
		chunks := l7test.Chunks(segs, l7.Server, 1, 1)
		out := make([]l7.Exchange, 0, 64)
		for _, c := range chunks {
			out = p.Feed(c, out[:0])
		}
		if n := testing.AllocsPerRun(100, func() {
			for _, c := range chunks {
				out = p.Feed(c, out[:0])
			}
		}); n != 0 {
			t.Errorf("%s: %.0f allocations per run", name, n)
		}
	}
}

// pipelineSegments are 16 sets of 32-byte values in one write, and their
// answers in one.
func pipelineSegments() []l7test.Segment {
	var req, resp strings.Builder
	for i := range 16 {
		req.WriteString("set key:" + string(rune('a'+i)) + " 0 0 32\r\n" + strings.Repeat("x", 32) + "\r\n")
		resp.WriteString("STORED\r\n")
	}
	return []l7test.Segment{{FromClient: true, Data: []byte(req.String())}, {Data: []byte(resp.String())}}
}

func BenchmarkKeepAlive(b *testing.B) {
	req, resp := []byte("get user:1\r\n"), []byte("VALUE user:1 0 5\r\nalice\r\nEND\r\n")
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu := l7test.StartCPU()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: resp, Size: len(resp)}, out[:0])
	}
	cpu.Report(b, b.N)
}

// BenchmarkPipelined is 16 sets in one write and their 16 answers in one.
func BenchmarkPipelined(b *testing.B) {
	chunks := l7test.Chunks(pipelineSegments(), l7.Server, 1, 1)
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 16)
	b.ReportAllocs()
	cpu := l7test.StartCPU()
	for b.Loop() {
		for _, c := range chunks {
			out = p.Feed(c, out[:0])
		}
	}
	cpu.Report(b, b.N*16)
}

// FuzzParser feeds arbitrary bytes cut into chunks of arbitrary
// directions, sizes and capture lengths and checks the invariants: no
// panic, timestamps taken from the chunks, no more exchanges than
// messages could fit in the bytes, bounded state.
func FuzzParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cuts []byte, server bool) {
		role := l7.Client
		if server {
			role = l7.Server
		}
		p := NewParser(role)
		chunks, reqBytes := l7test.FuzzChunks(data, cuts, role)
		var out []l7.Exchange
		tss := map[uint64]bool{}
		for _, c := range chunks {
			tss[c.TS] = true
			out = p.Feed(c, out)
			if len(p.q)-p.qh > maxPending+1 {
				t.Fatalf("%d pending", len(p.q)-p.qh)
			}
		}
		out = p.Flush(out)
		// A request is a line of one byte at least ("\n"); a response
		// standing for a hidden request is one too.
		if len(out) > reqBytes+len(data)-reqBytes+1 {
			t.Fatalf("%d exchanges from %d bytes", len(out), len(data))
		}
		for _, e := range out {
			if e.HasRequest && !tss[e.Start] || e.HasResponse && !tss[e.End] || !e.HasRequest {
				t.Fatalf("exchange %+v: timestamps not from the chunks", e)
			}
			if len(e.API) > 32 {
				t.Fatalf("template %q too long", e.API)
			}
		}
	})
}

func TestFuzzCorpus(t *testing.T) {
	l7test.CheckFuzzCorpus(t, "testdata/*.chunks", "testdata/fuzz/FuzzParser")
}
