package redis

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// otherFirstBytes are what clients of the other protocols send first.
var otherFirstBytes = map[string]string{
	"http":            "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"http post":       "POST /api/v1/users HTTP/1.1\r\nHost: x\r\n",
	"http2":           "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"pgsql startup":   "\x00\x00\x00\x54\x00\x03\x00\x00user\x00postgres\x00database\x00postgres\x00\x00",
	"pgsql ssl":       "\x00\x00\x00\x08\x04\xd2\x16\x2f",
	"mysql handshake": "\x55\x00\x00\x01\x8d\xa6\xff\x09\x00\x00\x00\x01\x21\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00root\x00",
	"kafka":           "\x00\x00\x00\x1c\x00\x12\x00\x03\x00\x00\x00\x01\x00\x09kafka-cli\x00\x00",
	"mongo op_msg":    "\x5d\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\x00\x00\x00\x00\x00\x48\x00\x00\x00\x10hello\x00",
	"memcached get":   "get k\r\n",
	"memcached set":   "set user:1 0 0 5\r\nalice\r\n",
	"memcached meta":  "mg foo v\r\n",
	"dns udp":         "\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01",
	"dns tcp":         "\x00\x1d\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x07example\x03com\x00\x00\x01\x00\x01",
}

func TestDetect(t *testing.T) {
	for _, s := range []string{"*1\r\n$4\r\nPING\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "*12\r\n$4\r\nMSET\r\n",
		"*100\r\n$5\r\nRPUSH\r\n", "PING\r\n", "PING\n", "AUTH secret\r\n", "HELLO 3\r\n", "INFO\r\n", "MONITOR\r\n"} {
		if !Detect([]byte(s)) {
			t.Errorf("Detect(%q) = false", s)
		}
	}
	for _, s := range []string{"", "*", "*1\r\n", "*0\r\n", "*1\r\n$0\r\n", "*1234\r\n$4\r\n", "*1\n$4\r\nPING", "*a\r\n$4",
		"PINGS\r\n", "ping\r\n", "GET k\r\n", "SET k v\r\n", "+OK\r\n", "$4\r\nPING\r\n"} {
		if Detect([]byte(s)) {
			t.Errorf("Detect(%q) = true", s)
		}
	}
	for name, s := range otherFirstBytes {
		if Detect([]byte(s)) {
			t.Errorf("Detect(%s %q) = true", name, s)
		}
	}
	// Every recorded client starts with a detected request; no fixture of
	// another protocol does.
	for _, f := range glob(t, "testdata/*.chunks") {
		if first := firstClient(t, f); !Detect(first) {
			t.Errorf("%s: Detect(%q) = false", f, first)
		}
	}
	for _, f := range glob(t, "../memcached/testdata/*.chunks", "../dns/testdata/*.chunks") {
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
		"*3\r\n$3\r\nset\r\n$6\r\nuser:1\r\n$5\r\nalice\r\n":        "SET",
		"*2\r\n$3\r\nGET\r\n$6\r\nuser:1\r\n":                       "GET",
		"*3\r\n$6\r\nCONFIG\r\n$3\r\nget\r\n$9\r\nmaxmemory\r\n":    "CONFIG GET",
		"*3\r\n$6\r\nclient\r\n$7\r\nsetname\r\n$3\r\napp\r\n":      "CLIENT SETNAME",
		"*3\r\n$5\r\nXINFO\r\n$6\r\nSTREAM\r\n$1\r\ns\r\n":          "XINFO STREAM",
		"*1\r\n$7\r\nCOMMAND\r\n":                                   "COMMAND",
		"*2\r\n$7\r\nCOMMAND\r\n$1\r\n":                             "COMMAND", // the subcommand is cut off
		"*3\r\n$8\r\nJSON.SET\r\n$3\r\ndoc\r\n":                     "JSON.SET",
		"*2\r\n$6\r\nCONFIG\r\n$7\r\nsecret!\r\n":                   "CONFIG", // not a subcommand name
		"*2\r\n$4\r\nAUTH\r\n$8\r\npassword\r\n":                    "AUTH",
		"PING\r\n":                                                  "PING",
		"  set greeting hello\r\n":                                  "SET",
		"CLIENT SETNAME x\r\n":                                      "CLIENT SETNAME",
		"config\tget maxmemory\n":                                   "CONFIG GET",
		"*1\r\n$40\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n": "",
		"*1\r\n$3\r\na b\r\n":                                       "",
		"*1\r\n$3\r\nGE":                                            "",
		"*1\r\n:3\r\n":                                              "",
		"PIN":                                                       "",
		"":                                                          "",
		"\r\n":                                                      "",
	} {
		got, ok := AppendAPI(nil, []byte(req))
		if string(got) != want || ok != (want != "") {
			t.Errorf("AppendAPI(%q) = %q, %v; want %q", req, got, ok, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		var buf [80]byte
		AppendAPI(buf[:0], []byte("*3\r\n$6\r\nclient\r\n$7\r\nsetname\r\n$3\r\napp\r\n"))
	}); n != 0 {
		t.Errorf("AppendAPI allocates %.0f times", n)
	}
}

func TestReplyClass(t *testing.T) {
	for reply, want := range map[string]l7.Class{
		"+OK\r\n": l7.OK, ":1\r\n": l7.OK, "$-1\r\n": l7.OK, "*2\r\n-ERR x\r\n:1\r\n": l7.OK, "_\r\n": l7.OK, "": l7.OK,
		"-ERR unknown command 'FOO'\r\n":                                l7.ClientError,
		"-ERR wrong number of arguments for 'get' command\r\n":          l7.ClientError,
		"-WRONGTYPE Operation against a key holding the wrong kind\r\n": l7.ClientError,
		"-NOAUTH Authentication required.\r\n":                          l7.ClientError,
		"-WRONGPASS invalid username-password pair\r\n":                 l7.ClientError,
		"-NOPERM this user has no permissions\r\n":                      l7.ClientError,
		"-NOSCRIPT No matching script.\r\n":                             l7.ClientError,
		"-EXECABORT Transaction discarded\r\n":                          l7.ClientError,
		"-MOVED 3999 127.0.0.1:6381\r\n":                                l7.ClientError,
		"-ASK 3999 127.0.0.1:6381\r\n":                                  l7.ClientError,
		"-CROSSSLOT Keys in request don't hash to the same slot\r\n":    l7.ClientError,
		"-BUSYGROUP Consumer Group name already exists\r\n":             l7.ClientError,
		"-NOTBUSY No scripts in execution right now.\r\n":               l7.ClientError,
		"-ERR max number of clients reached\r\n":                        l7.ServerError,
		"-OOM command not allowed when used memory > 'maxmemory'.\r\n":  l7.ServerError,
		"-LOADING Redis is loading the dataset in memory\r\n":           l7.ServerError,
		"-BUSY Redis is busy running a script.\r\n":                     l7.ServerError,
		"-MASTERDOWN Link with MASTER is down\r\n":                      l7.ServerError,
		"-READONLY You can't write against a read only replica.\r\n":    l7.ServerError,
		"-MISCONF Redis is configured to save RDB snapshots\r\n":        l7.ServerError,
		"-NOREPLICAS Not enough good replicas to write.\r\n":            l7.ServerError,
		"-TRYAGAIN Multiple keys request during rehashing of slot\r\n":  l7.ServerError,
		"-CLUSTERDOWN The cluster is down\r\n":                          l7.ServerError,
		"-SOMEMODULE custom failure\r\n":                                l7.ServerError,
		"-Error without a code\r\n":                                     l7.ServerError,
		"-ERR":                                                          l7.ClientError,
		"!21\r\nSYNTAX invalid syntax\r\n":                              l7.ServerError,
		"!23\r\nWRONGTYPE wrong kind\r\n":                               l7.ClientError,
		"!7\r\nLOADING\r\n":                                             l7.ServerError,
		"!x\r\n":                                                        l7.ServerError,
	} {
		if got := ReplyClass([]byte(reply)); got != want {
			t.Errorf("ReplyClass(%q) = %v, want %v", reply, got, want)
		}
	}
}

// exchanges feeds alternating client/server strings (client first) to a
// client-side parser, one chunk each, timestamps 1, 2, 3...
func exchanges(t *testing.T, p *Parser, parts ...string) []l7.Exchange {
	t.Helper()
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

func TestStreamedAndAttributes(t *testing.T) {
	// Redis 7 sends none of these; RESP3 allows them, so a proxy or
	// another server may.
	p := NewParser(l7.Client)
	got := exchanges(t, p,
		"*1\r\n$4\r\nPING\r\n", "$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;0\r\n",
		"*1\r\n$4\r\nPING\r\n", "*?\r\n:1\r\n%?\r\n+a\r\n:1\r\n.\r\n.\r\n",
		"*1\r\n$4\r\nPING\r\n", "|1\r\n+ttl\r\n:3\r\n-ERR attributed\r\n",
		"*1\r\n$4\r\nPING\r\n", "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n|0\r\n:2\r\n",
		"*1\r\n$4\r\nPING\r\n", "=15\r\ntxt:Some string\r\n")
	want := "PING ok|PING ok|PING client_error|PING ok|PING ok"
	if s := l7test.Summary(got); s != want || p.Desyncs() != 0 {
		t.Errorf("%s, %d desyncs; want %s", s, p.Desyncs(), want)
	}
	if got[2].RespBytes != 31 {
		t.Errorf("attribute and reply: %d bytes, want 31", got[2].RespBytes)
	}
}

func TestGapInBulk(t *testing.T) {
	// A 64 KiB value of which 100 bytes were captured, on both sides:
	// the declared lengths step over the gaps.
	val := strings.Repeat("v", 65536)
	set, get := resp("SET", "k", val), resp("GET", "k")
	rep := "$65536\r\n" + val + "\r\n"
	p := NewParser(l7.Server)
	out := p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 1, Data: []byte(set[:100]), Size: len(set)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 2, Data: []byte("+OK\r\n"), Size: 5}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 3, Data: []byte(get), Size: len(get)}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: []byte(rep[:100]), Size: 4096}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 5, Data: []byte(rep[4096:4196]), Size: len(rep) - 4096}, out)
	out = p.Flush(out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "SET", ReqBytes: len(set), RespBytes: 5},
		{HasRequest: true, HasResponse: true, Start: 3, End: 4, API: "GET", ReqBytes: len(get), RespBytes: len(rep)},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 0 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}
}

func TestDesyncAndResync(t *testing.T) {
	p := NewParser(l7.Client)
	// Three pipelined requests, captured up to the middle of the second:
	// the gap may hide more, so the third's reply is one to a hidden
	// request: counted, with no template.
	batch := resp("GET", "a") + resp("GET", "b") + resp("GET", "c")
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte(batch[:33]), Size: len(batch)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: []byte("$1\r\nA\r\n$1\r\nB\r\n$-1\r\n"), Size: 19}, out)
	// A chunk that cannot start a request is skipped; the next request
	// starts the conversation again.
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 3, Data: []byte("tail of something\r\n"), Size: 19}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: []byte(resp("PING")), Size: 14}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: []byte("+PONG\r\n"), Size: 7}, out)
	out = p.Flush(out)
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET", ReqBytes: 20, RespBytes: 7},
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET", ReqBytes: 13, RespBytes: 7},
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, RespBytes: 5},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "PING", ReqBytes: 14, RespBytes: 7},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 1 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}

	// A gap in the replies: the one in progress answers the oldest
	// request; the others' replies may be in the gap, so they are
	// dropped, and replies are dropped until one follows a new request.
	p = NewParser(l7.Client)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte(batch), Size: len(batch)}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: []byte("+AAA"), Size: 40}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 3, Data: []byte("+late\r\n"), Size: 7}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: 4, Data: []byte(resp("PING")), Size: 14}, out)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 5, Data: []byte("+PONG\r\n"), Size: 7}, out)
	out = p.Flush(out)
	want = []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET", ReqBytes: 20, RespBytes: 4},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "PING", ReqBytes: 14, RespBytes: 7},
	}
	if !reflect.DeepEqual(out, want) || p.Desyncs() != 1 {
		t.Errorf("%+v, %d desyncs\nwant %+v", out, p.Desyncs(), want)
	}

	// Bytes that are not RESP in the replies, and a wrong bulk length
	// (its CRLF is not where it says), are desyncs too.
	for _, bad := range []string{"?what\r\n", "$3\r\nabcd\r\n", "*2\r\n.\r\n", ";3\r\nabc\r\n", "*1" + strings.Repeat("0", 30) + "\r\n"} {
		p = NewParser(l7.Client)
		got := exchanges(t, p, resp("GET", "a"), bad)
		if p.Desyncs() != 1 || len(got) != 1 || !got[0].HasResponse {
			t.Errorf("%q: %+v, %d desyncs", bad, got, p.Desyncs())
		}
	}
}

func TestOrphanReply(t *testing.T) {
	// Capture began after the request: the reply answers nothing seen.
	p := NewParser(l7.Client)
	got := exchanges(t, p, "", "+OK\r\n", resp("GET", "a"), "$1\r\nA\r\n")
	if l7test.Summary(got) != "GET ok" || p.Desyncs() != 1 {
		t.Errorf("%s, %d desyncs", l7test.Summary(got), p.Desyncs())
	}
	// RESP2 messages on a connection subscribed before capture began are
	// not replies, nor desyncs.
	p = NewParser(l7.Client)
	got = exchanges(t, p, "", "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n", resp("PING"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n")
	if l7test.Summary(got) != "PING ok" || p.Desyncs() != 0 {
		t.Errorf("%s, %d desyncs", l7test.Summary(got), p.Desyncs())
	}
}

func TestMessageArrayIsAReplyWhenNotSubscribed(t *testing.T) {
	// An LRANGE that returns ["message", ...] is a reply like any.
	p := NewParser(l7.Client)
	got := exchanges(t, p, resp("LRANGE", "l", "0", "-1"), "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n")
	if l7test.Summary(got) != "LRANGE ok" || p.Desyncs() != 0 {
		t.Errorf("%s, %d desyncs", l7test.Summary(got), p.Desyncs())
	}
}

func TestPipelineOverflow(t *testing.T) {
	// Deeper than maxPending: the parser starts over behind a barrier and
	// says so.
	p := NewParser(l7.Client)
	var req, rep strings.Builder
	for range maxPending + 10 {
		req.WriteString(resp("PING"))
		rep.WriteString("+PONG\r\n")
	}
	out := p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte(req.String()), Size: req.Len()}, nil)
	out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: 2, Data: []byte(rep.String()), Size: rep.Len()}, out)
	out = p.Flush(out)
	if p.Desyncs() != 1 || len(out) != maxPending+10 || l7test.Summary(out) != strings.TrimSuffix(strings.Repeat("PING ok|", maxPending+10), "|") {
		t.Errorf("%d exchanges, %d desyncs", len(out), p.Desyncs())
	}
	if e := out[maxPending]; e.ReqBytes != 0 || e.RespBytes != 7 || e.Start != 1 || e.End != 2 {
		t.Errorf("beyond maxPending: %+v", e)
	}
	// Unanswered, they come out of Flush all the same.
	p = NewParser(l7.Client)
	out = p.Flush(p.Feed(l7.Chunk{Dir: l7.Egress, TS: 1, Data: []byte(req.String()), Size: req.Len()}, nil))
	if len(out) != maxPending+10 || out[maxPending+9].HasResponse || out[maxPending+9].API != "PING" {
		t.Errorf("%d exchanges flushed", len(out))
	}
}

func TestDepthLimit(t *testing.T) {
	p := NewParser(l7.Client)
	got := exchanges(t, p, resp("PING"), strings.Repeat("*1\r\n", maxDepth+1)+":1\r\n")
	if p.Desyncs() != 1 || len(got) != 1 {
		t.Errorf("%+v, %d desyncs", got, p.Desyncs())
	}
	p = NewParser(l7.Client)
	got = exchanges(t, p, resp("PING"), strings.Repeat("*1\r\n", maxDepth)+":1\r\n")
	if p.Desyncs() != 0 || l7test.Summary(got) != "PING ok" {
		t.Errorf("%+v, %d desyncs", got, p.Desyncs())
	}
}

func TestSharedInterner(t *testing.T) {
	var in l7.Interner
	a, b := NewParser(l7.Client), NewParser(l7.Client)
	a.SetInterner(&in)
	b.SetInterner(&in)
	x := exchanges(t, a, resp("MYMOD.CMD", "k"), "+OK\r\n")
	y := exchanges(t, b, resp("mymod.cmd", "k"), "+OK\r\n")
	// One string for both parsers: the shared interner's.
	if x[0].API != "MYMOD.CMD" || y[0].API != "MYMOD.CMD" || unsafe.StringData(x[0].API) != unsafe.StringData(y[0].API) {
		t.Errorf("%q %q: not one interned string", x[0].API, y[0].API)
	}
	if n := testing.AllocsPerRun(10, func() { in.Intern([]byte("MYMOD.CMD")) }); n != 0 {
		t.Errorf("interned template allocates %.0f times", n)
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	for name, segs := range map[string][]l7test.Segment{
		"keepalive": {{FromClient: true, Data: []byte(resp("GET", "user:1"))}, {Data: []byte("$5\r\nalice\r\n")}},
		"pipeline":  benchSegments(t),
	} {
		p := NewParser(l7.Server)
		chunks := l7test.Chunks(segs, l7.Server, 1, 1)
		out := make([]l7.Exchange, 0, 64)
		for _, c := range chunks { // warm up: interned templates, queue capacity
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

func benchSegments(tb testing.TB) []l7test.Segment {
	segs := l7test.Load(tb, "testdata/bench-set.chunks")
	return segs[:2]
}

func BenchmarkKeepAlive(b *testing.B) {
	req, rep := []byte(resp("GET", "user:1")), []byte("$5\r\nalice\r\n")
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu := l7test.StartCPU()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: rep, Size: len(rep)}, out[:0])
	}
	cpu.Report(b, b.N)
}

// BenchmarkPipelined is redis-benchmark -P 16's SET batch and its replies.
func BenchmarkPipelined(b *testing.B) {
	segs := benchSegments(b)
	p := NewParser(l7.Server)
	chunks := l7test.Chunks(segs, l7.Server, 1, 1)
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
// requests could fit in the request bytes, bounded state.
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
			if len(p.q) > maxPending+1 || p.req.depth > maxDepth || p.resp.depth > maxDepth {
				t.Fatalf("state beyond its bounds: %d pending", len(p.q))
			}
		}
		out = p.Flush(out)
		// The smallest request is an inline command of one letter and a
		// '\n'; a barrier's inferred requests answer replies of at least 3
		// bytes ("_\r\n"), which the request bytes do not bound.
		if len(out) > reqBytes/2+len(data)/3+1 {
			t.Fatalf("%d exchanges from %d request bytes", len(out), reqBytes)
		}
		for _, e := range out {
			if e.HasRequest && !tss[e.Start] || e.HasResponse && !tss[e.End] || !e.HasRequest && !e.HasResponse {
				t.Fatalf("exchange %+v: timestamps not from the chunks", e)
			}
			if len(e.API) > 2*maxName+1 {
				t.Fatalf("template %q too long", e.API)
			}
		}
		checkResplit(t, chunks, role, out, p.Desyncs())
	})
}

// checkResplit checks that a conversation that parses cleanly (no gap,
// no desync) parses the same when read in other chunks: messages whole in
// a chunk and messages cut by chunks take different paths through the
// parser. Timestamps aside: a re-cut chunk takes its first byte's.
func checkResplit(t *testing.T, chunks []l7.Chunk, role l7.Role, want []l7.Exchange, desyncs uint64) {
	t.Helper()
	for _, c := range chunks {
		if c.Size > len(c.Data) {
			return
		}
	}
	if desyncs != 0 {
		return
	}
	for _, n := range []int{1, 7} {
		p := NewParser(role)
		var got []l7.Exchange
		for _, c := range l7test.Resplit(chunks, n) {
			got = p.Feed(c, got)
		}
		got = p.Flush(got)
		if d := l7test.Diff(got, want, false); d != "" || p.Desyncs() != 0 {
			t.Fatalf("resplit %d: %d desyncs\n%s", n, p.Desyncs(), d)
		}
	}
}

// TestFuzzCorpus checks that the committed seed corpus of FuzzParser is
// the one built from the fixtures (GALAGO_L7_UPDATE=1 rewrites it).
func TestFuzzCorpus(t *testing.T) {
	l7test.CheckFuzzCorpus(t, "testdata/*.chunks", "testdata/fuzz/FuzzParser")
}

func TestFlushCutReply(t *testing.T) {
	// The connection closes in the middle of a reply: it answers the
	// oldest request; the next one is unanswered.
	p := NewParser(l7.Client)
	got := exchanges(t, p, resp("GET", "a")+resp("GET", "b"), "$100\r\nabc")
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET", ReqBytes: 20, RespBytes: 9},
		{HasRequest: true, Start: 1, API: "GET", ReqBytes: 20},
	}
	if !reflect.DeepEqual(got, want) || p.Desyncs() != 0 {
		t.Errorf("%+v, %d desyncs\nwant %+v", got, p.Desyncs(), want)
	}
}

func TestRepeatedCommandTemplate(t *testing.T) {
	// A parser remembers the last command whose name alone makes the
	// template: the same command again reuses it; a container command
	// (whose subcommand is part of the template) is never remembered.
	cmds := []struct{ req, api string }{
		{resp("GET", "a"), "GET"},
		{resp("GET", "b"), "GET"},
		{resp("get", "b"), "GET"},
		{resp("GET", "a", "b"), "GET"},
		{resp("CONFIG", "GET", "x"), "CONFIG GET"},
		{resp("CONFIG", "SET", "x", "y"), "CONFIG SET"},
		{resp("CONFIG"), "CONFIG"},
		{resp("CONFIG", "GET"), "CONFIG GET"},
		{resp("GETSET", "a", "b"), "GETSET"},
		{resp("GET", "a"), "GET"},
		{resp("SUBSCRIBE", "c"), "SUBSCRIBE"},
		{resp("GET", "a"), "GET"},
	}
	p := NewParser(l7.Client)
	var parts []string
	for _, c := range cmds {
		reply := "+OK\r\n"
		if c.api == "SUBSCRIBE" {
			reply = "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n"
		}
		parts = append(parts, c.req, reply)
	}
	got := exchanges(t, p, parts...)
	if len(got) != len(cmds) {
		t.Fatalf("%d exchanges, want %d: %+v", len(got), len(cmds), got)
	}
	for i, c := range cmds {
		if got[i].API != c.api {
			t.Errorf("#%d: %q, want %q", i, got[i].API, c.api)
		}
	}
}

func TestMessageSplitAnywhere(t *testing.T) {
	// A message whole in a chunk is read by a fast path, one cut by the
	// chunk's end by the general one: both give the same exchanges, at
	// any cut.
	conv := []string{
		resp("SUBSCRIBE", "a", "b"), "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
		resp("UNSUBSCRIBE"), "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n",
		resp("GET", "k"), "$-1\r\n",
		resp("LRANGE", "k", "0", "-1"), "*0\r\n",
		resp("LRANGE", "k", "0", "-1"), "*2\r\n$1\r\nx\r\n:7\n",
		resp("EXEC"), "*-1\r\n",
		resp("EXEC"), "*2\r\n*1\r\n+OK\r\n-ERR no\r\n",
		resp("XADD", "s", "*"), "-WRONGTYPE Operation\r\n",
		resp("HGETALL", "h"), "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
	}
	whole := exchanges(t, NewParser(l7.Client), conv...)
	if len(whole) != len(conv)/2 {
		t.Fatalf("%d exchanges: %+v", len(whole), whole)
	}
	for k := 0; k < len(conv); k++ {
		for cut := 1; cut < len(conv[k]); cut++ {
			p := NewParser(l7.Client)
			var out []l7.Exchange
			for i, s := range conv {
				dir := l7.Egress
				if i%2 == 1 {
					dir = l7.Ingress
				}
				parts := []string{s}
				if i == k {
					parts = []string{s[:cut], s[cut:]}
				}
				for _, part := range parts {
					out = p.Feed(l7.Chunk{Dir: dir, TS: uint64(i + 1), Data: []byte(part), Size: len(part)}, out)
				}
			}
			out = p.Flush(out)
			if d := l7test.Diff(out, whole, true); d != "" || p.Desyncs() != 0 {
				t.Fatalf("message %d cut at %d: %d desyncs\n%s", k, cut, p.Desyncs(), d)
			}
		}
	}
}
