package http

import (
	"fmt"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// Client-side chunks: requests are egress.
func req(ts uint64, s string) l7.Chunk {
	return l7.Chunk{Dir: l7.Egress, TS: ts, Data: []byte(s), Size: len(s)}
}

func resp(ts uint64, s string) l7.Chunk {
	return l7.Chunk{Dir: l7.Ingress, TS: ts, Data: []byte(s), Size: len(s)}
}

// gapped keeps the first n bytes of c as captured.
func gapped(c l7.Chunk, n int) l7.Chunk {
	c.Data = c.Data[:n]
	return c
}

func feed(p *Parser, chunks ...l7.Chunk) []l7.Exchange {
	var out []l7.Exchange
	for _, c := range chunks {
		out = p.Feed(c, out)
	}
	return p.Flush(out)
}

const (
	ok200 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	nf404 = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
)

func TestOrphanResponse(t *testing.T) {
	p := NewParser(l7.Client)
	got := feed(p, resp(5, ok200), req(10, "GET /a HTTP/1.1\r\n\r\n"), resp(20, nf404))
	want := []l7.Exchange{
		{HasResponse: true, End: 5, RespBytes: len(ok200)},
		{HasRequest: true, HasResponse: true, Start: 10, End: 20, Class: l7.ClientError, API: "GET /a", ReqBytes: 19, RespBytes: len(nf404)},
	}
	diff(t, "orphan", got, want)
}

func TestMidMessageStart(t *testing.T) {
	// The capture begins inside a request body and a response body.
	p := NewParser(l7.Server)
	in := func(ts uint64, s string) l7.Chunk { c := req(ts, s); c.Dir = l7.Ingress; return c }
	out := func(ts uint64, s string) l7.Chunk { c := resp(ts, s); c.Dir = l7.Egress; return c }
	got := feed(p, in(1, `"tail of a json body"}`), out(2, "more body bytes\r\n"),
		in(3, "POST /x/9 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), out(4, ok200))
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 3, End: 4, API: "POST /x/{id}", ReqBytes: 44, RespBytes: len(ok200)}}
	diff(t, "mid-message", got, want)
	if p.Desyncs() != 2 {
		t.Errorf("%d desyncs, want 2", p.Desyncs())
	}
}

func TestGapInBody(t *testing.T) {
	body := strings.Repeat("x", 10000)
	r := "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + body
	p := NewParser(l7.Client)
	got := feed(p, req(1, "GET /big HTTP/1.1\r\n\r\n"), gapped(resp(2, r), 64), req(3, "GET /a HTTP/1.1\r\n\r\n"), resp(4, nf404))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET /big", ReqBytes: 21, RespBytes: len(r)},
		{HasRequest: true, HasResponse: true, Start: 3, End: 4, Class: l7.ClientError, API: "GET /a", ReqBytes: 19, RespBytes: len(nf404)},
	}
	diff(t, "gap in body", got, want)
	if p.Desyncs() != 0 {
		t.Errorf("%d desyncs", p.Desyncs())
	}
}

func TestGapHidesChunkSize(t *testing.T) {
	// A chunked response written in three calls; the capture of the first
	// ends inside chunk data and hides the next chunk-size line: the
	// response is taken to end there, and the later chunks are stepped
	// through without being taken for responses.
	head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	first := head + "a\r\n0123456789\r\n5\r\nabcde\r\n"
	p := NewParser(l7.Client)
	got := feed(p,
		req(1, "GET /s HTTP/1.1\r\n\r\n"),
		gapped(resp(2, first), len(head)+6),
		resp(3, "4\r\nHTTP\r\n"),
		resp(4, "0\r\n\r\n"),
		req(5, "GET /a HTTP/1.1\r\n\r\n"), resp(6, nf404))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET /s", ReqBytes: 19, RespBytes: len(first)},
		{HasRequest: true, HasResponse: true, Start: 5, End: 6, Class: l7.ClientError, API: "GET /a", ReqBytes: 19, RespBytes: len(nf404)},
	}
	diff(t, "chunk-size gap", got, want)
	if p.Desyncs() != 0 {
		t.Errorf("%d desyncs, want 0: the response was counted, nothing was lost", p.Desyncs())
	}
}

func TestHiddenRequest(t *testing.T) {
	// Two pipelined requests; the capture ends exactly after the first:
	// the second is a hole, so its response is not paired with GET /c.
	two := "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"
	p := NewParser(l7.Client)
	got := feed(p, gapped(req(1, two), 19), resp(2, ok200), resp(3, nf404), req(4, "GET /c HTTP/1.1\r\n\r\n"), resp(5, ok200))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET /a", ReqBytes: 19, RespBytes: len(ok200)},
		{HasResponse: true, End: 3, Class: l7.ClientError, RespBytes: len(nf404)},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "GET /c", ReqBytes: 19, RespBytes: len(ok200)},
	}
	diff(t, "hole", got, want)
	if p.Desyncs() != 1 {
		t.Errorf("%d desyncs, want 1", p.Desyncs())
	}
}

func TestPipelineOverflow(t *testing.T) {
	var b strings.Builder
	n := MaxPending + 3
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "GET /r/%d HTTP/1.1\r\n\r\n", i)
	}
	var rs []l7.Chunk
	for i := 0; i < n; i++ {
		rs = append(rs, resp(uint64(10+i), ok200))
	}
	p := NewParser(l7.Client)
	got := feed(p, append([]l7.Chunk{req(1, b.String())}, rs...)...)
	if len(got) != n {
		t.Fatalf("%d exchanges, want %d", len(got), n)
	}
	for i, x := range got {
		paired := i < MaxPending
		if x.HasRequest != paired || !x.HasResponse || x.End != uint64(10+i) || paired && x.API != "GET /r/{id}" {
			t.Errorf("%d: %+v", i, x)
		}
	}
	if p.Desyncs() != 3 {
		t.Errorf("%d desyncs, want 3", p.Desyncs())
	}
	// The queue is usable again.
	got = feed(p, req(500, "GET /a HTTP/1.1\r\n\r\n"), resp(501, ok200))
	if len(got) != 1 || !got[0].HasRequest || got[0].API != "GET /a" {
		t.Errorf("after overflow: %+v", got)
	}
}

func TestH2CUpgrade(t *testing.T) {
	upReq := "GET /u/1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
	sw := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
	frames := "\x00\x00\x00\x04\x00\x00\x00\x00\x00" // an empty SETTINGS frame
	for _, capture := range []int{len(sw) + len(frames), 40} {
		p := NewParser(l7.Client)
		c := gapped(resp(2, sw+frames), capture)
		got := feed(p, req(1, upReq), c, req(3, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		if len(got) != 0 {
			t.Errorf("capture %d: exchanges %+v", capture, got)
		}
		up, ok := p.Upgrade()
		if !ok || up.Protocol != l7.HTTP2 || up.Dir != l7.Ingress || up.Start != 1 || up.API != "GET /u/{id}" || up.ReqBytes != len(upReq) {
			t.Fatalf("capture %d: %+v %v", capture, up, ok)
		}
		rest := up.Rest(c)
		if capture > len(sw) && (string(rest.Data) != frames || rest.Size != len(frames)) {
			t.Errorf("rest %q %d", rest.Data, rest.Size)
		}
		if capture == 40 && (len(rest.Data) != 0 || rest.Size != len(sw)+len(frames)-40) {
			t.Errorf("rest of a cut 101: %q %d", rest.Data, rest.Size)
		}
	}
	// A server that declines the upgrade keeps HTTP/1.
	p := NewParser(l7.Client)
	got := feed(p, req(1, upReq), resp(2, ok200), req(3, "GET /a HTTP/1.1\r\n\r\n"), resp(4, nf404))
	if _, ok := p.Upgrade(); ok || len(got) != 2 || got[1].API != "GET /a" {
		t.Errorf("declined upgrade: %+v", got)
	}
}

func TestBadRequestFraming(t *testing.T) {
	// A request body with a non-chunked transfer coding cannot be stepped
	// over: the request is counted, its boundaries are lost until a chunk
	// starts a request.
	p := NewParser(l7.Client)
	got := feed(p,
		req(1, "POST /z HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b..."),
		req(2, "more body"),
		resp(3, nf404),
		req(4, "GET /a HTTP/1.1\r\n\r\n"), resp(5, ok200))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 3, Class: l7.ClientError, API: "POST /z", ReqBytes: 45, RespBytes: len(nf404)},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "GET /a", ReqBytes: 19, RespBytes: len(ok200)},
	}
	diff(t, "bad framing", got, want)
	if p.Desyncs() != 1 {
		t.Errorf("%d desyncs, want 1", p.Desyncs())
	}
}

func TestLongRequestLine(t *testing.T) {
	// A request line longer than LineCap, over several chunks: the
	// template comes from what was kept.
	target := "/api/items/" + strings.Repeat("k", LineCap+100) + "/x"
	line := "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"
	p := NewParser(l7.Client)
	var chunks []l7.Chunk
	for i := 0; i < len(line); i += 300 {
		chunks = append(chunks, req(uint64(1+i), line[i:min(i+300, len(line))]))
	}
	got := feed(p, append(chunks, resp(9999, ok200))...)
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 1, End: 9999, API: "GET /api/items/...", ReqBytes: len(line), RespBytes: len(ok200)}}
	diff(t, "long line", got, want)
}

func TestEarlyResponse(t *testing.T) {
	// The server answers 413 before the body is sent; the client then
	// sends it anyway (it had started).
	p := NewParser(l7.Client)
	r413 := "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n"
	hdr := "PUT /f HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
	got := feed(p, req(1, hdr), resp(2, r413), req(3, "hello"), req(4, "GET /a HTTP/1.1\r\n\r\n"), resp(5, ok200))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, Class: l7.ClientError, API: "PUT /f", ReqBytes: len(hdr), RespBytes: len(r413)},
		{HasRequest: true, HasResponse: true, Start: 4, End: 5, API: "GET /a", ReqBytes: 19, RespBytes: len(ok200)},
	}
	diff(t, "early response", got, want)
}

func TestFlushPending(t *testing.T) {
	p := NewParser(l7.Client)
	got := feed(p, req(1, "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"), resp(2, ok200))
	want := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 1, End: 2, API: "GET /a", ReqBytes: 19, RespBytes: len(ok200)},
		{HasRequest: true, Start: 1, API: "POST /b", ReqBytes: 43},
	}
	diff(t, "flush", got, want)
	// A response cut by the connection's end still counts.
	p = NewParser(l7.Client)
	got = feed(p, req(1, "GET /a HTTP/1.1\r\n\r\n"), resp(2, "HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\npart"))
	want = []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 1, End: 2, Class: l7.ServerError, API: "GET /a", ReqBytes: 19, RespBytes: 46}}
	diff(t, "cut response", got, want)
}

func TestUnknownMethod(t *testing.T) {
	p := NewParser(l7.Client)
	got := feed(p, req(1, "BREW /pot/42 HTTP/1.1\r\n\r\n"), resp(2, "HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n"))
	if len(got) != 1 || got[0].API != "_OTHER /pot/{id}" || got[0].Class != l7.ClientError {
		t.Errorf("%+v", got)
	}
}

func TestIgnoresOtherDirections(t *testing.T) {
	p := NewParser(l7.Client)
	got := feed(p, l7.Chunk{Dir: 0, TS: 1, Data: []byte("GET / HTTP/1.1\r\n\r\n"), Size: 18}, req(2, "GET /a HTTP/1.1\r\n\r\n"), resp(3, ok200))
	if len(got) != 1 || got[0].Start != 2 {
		t.Errorf("%+v", got)
	}
}

func TestHeaderSplitAnywhere(t *testing.T) {
	// Header lines whole in a chunk are read by a fast path, the rest
	// byte by byte: a message cut in two at any offset frames the same.
	rq := "POST /a HTTP/1.1\r\nHost: x\r\ncontent-length: 3\r\nUpgrade: h2c\r\n\r\nabc"
	rs := "HTTP/1.1 200 OK\r\nServer: y\r\nTransfer-Encoding: gzip, chunked\r\nContent-Type: text/plain\r\n\r\n2\r\nok\r\n0\r\n\r\n"
	want := []l7.Exchange{{HasRequest: true, HasResponse: true, Start: 1, End: 3, API: "POST /a", ReqBytes: len(rq), RespBytes: len(rs)}}
	for i := 1; i < len(rq); i++ {
		for _, j := range []int{i % len(rs), (i * 7) % len(rs)} {
			if j == 0 {
				continue
			}
			p := NewParser(l7.Client)
			got := feed(p, req(1, rq[:i]), req(2, rq[i:]), resp(3, rs[:j]), resp(4, rs[j:]))
			diff(t, fmt.Sprintf("split %d/%d", i, j), got, want)
			if p.Desyncs() != 0 {
				t.Errorf("split %d/%d: %d desyncs", i, j, p.Desyncs())
			}
		}
	}
}

func TestRepeatedRequestTemplate(t *testing.T) {
	// A parser remembers the last request's template by its method and
	// target: a request that differs in either, or whose line was cut
	// (at LineCap, over several chunks), gets its own.
	cut := "GET /a/1/" + strings.Repeat("k", LineCap) + " HTTP/1.1\r\n\r\n"
	reqs := []struct{ s, api string }{
		{"GET /a/1 HTTP/1.1\r\n\r\n", "GET /a/{id}"},
		{"GET /a/1 HTTP/1.1\r\n\r\n", "GET /a/{id}"},
		{"GET /a/1 HTTP/1.0\r\n\r\n", "GET /a/{id}"},
		{"GET /a/1b HTTP/1.1\r\n\r\n", "GET /a/1b"},
		{"PUT /a/1b HTTP/1.1\r\n\r\n", "PUT /a/1b"},
		{"PUT /a/1 HTTP/1.1\r\n\r\n", "PUT /a/{id}"},
		{"GET /" + strings.Repeat("b", 300) + "/c HTTP/1.1\r\n\r\n", "GET /{id}/c"}, // too long to remember
		{"PUT /a/1 HTTP/1.1\r\n\r\n", "PUT /a/{id}"},
		{cut, "GET /a/{id}/..."},
		{"GET /a/1 HTTP/1.1\r\n\r\n", "GET /a/{id}"},
		{cut, "GET /a/{id}/..."},
		{"GET /c HTTP/1.1\r\n\r\n", "GET /c"},
	}
	p := NewParser(l7.Client)
	var chunks []l7.Chunk
	var want []l7.Exchange
	for i, r := range reqs {
		ts := uint64(2*i + 1)
		chunks = append(chunks, req(ts, r.s[:len(r.s)/2]), req(ts, r.s[len(r.s)/2:]), resp(ts+1, nf404))
		want = append(want, l7.Exchange{HasRequest: true, HasResponse: true, Start: ts, End: ts + 1, Class: l7.ClientError, Status: 404, API: r.api, ReqBytes: len(r.s), RespBytes: len(nf404)})
	}
	diff(t, "repeated", feed(p, chunks...), want)
	if p.Desyncs() != 0 {
		t.Errorf("%d desyncs", p.Desyncs())
	}
}
