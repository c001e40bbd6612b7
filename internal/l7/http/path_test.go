package http

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func pathParser(role l7.Role) *Parser {
	p := NewParser(role)
	p.KeepPaths()
	return p
}

// TestRawPath: each exchange carries its request line's path, query and
// fragment left out, next to the template.
func TestRawPath(t *testing.T) {
	long := "/files/" + strings.Repeat("x", 300)
	for _, c := range []struct {
		name      string
		chunks    []l7.Chunk
		apis      []string
		wantPaths []string
	}{
		{"pipelined, query and fragment stripped", []l7.Chunk{
			req(1, "GET /items/17?token=s3cret HTTP/1.1\r\n\r\nGET http://h:8080/users/5?x=1#f HTTP/1.1\r\n\r\nOPTIONS * HTTP/1.1\r\n\r\nGET http://h HTTP/1.1\r\n\r\n"),
			resp(2, ok200+nf404+ok200+ok200),
		}, []string{"GET /items/{id}", "GET /users/{id}", "OPTIONS *", "GET /"}, []string{"/items/17", "/users/5", "*", "/"}},
		{"CONNECT has no path", []l7.Chunk{
			req(1, "CONNECT example.org:443 HTTP/1.1\r\n\r\n"), resp(2, "HTTP/1.1 200 OK\r\n\r\n"),
		}, []string{"CONNECT"}, []string{""}},
		{"longer than MaxPath", []l7.Chunk{
			req(1, "GET "+long+"?q=1 HTTP/1.1\r\n\r\n"), resp(2, ok200),
		}, []string{"GET /files/{id}"}, []string{long[:l7.MaxPath-3] + "..."}},
		{"cut by the capture inside the path", []l7.Chunk{
			gapped(req(1, "GET /items/17/details?token=s3cret HTTP/1.1\r\n\r\n"), len("GET /items/17/det")), resp(2, ok200),
		}, []string{"GET /items/{id}/..."}, []string{"/items/17/det..."}},
		{"cut by the capture in the query: the path is whole", []l7.Chunk{
			gapped(req(1, "GET /items/17?token=s3cret HTTP/1.1\r\n\r\n"), len("GET /items/17?tok")), resp(2, ok200),
		}, []string{"GET /items/{id}"}, []string{"/items/17"}},
		{"request line across chunks", []l7.Chunk{
			req(1, "GET /ite"), req(2, "ms/42?a=b HTTP/1.1\r\n\r\n"), resp(3, ok200),
		}, []string{"GET /items/{id}"}, []string{"/items/42"}},
		{"no response (flushed)", []l7.Chunk{req(1, "GET /orders/9 HTTP/1.1\r\n\r\n")}, []string{"GET /orders/{id}"}, []string{"/orders/9"}},
	} {
		got, paths := l7test.RunPaths(pathParser(l7.Client), c.chunks)
		var apis []string
		for _, x := range got {
			apis = append(apis, x.API)
		}
		if !slices.Equal(apis, c.apis) || !slices.Equal(paths, c.wantPaths) {
			t.Errorf("%s: APIs %q paths %q, want %q %q", c.name, apis, paths, c.apis, c.wantPaths)
		}
		// Keeping paths changes nothing else.
		if plain := l7test.Run(NewParser(l7.Client), c.chunks); !slices.Equal(plain, got) {
			t.Errorf("%s: with paths %+v, without %+v", c.name, got, plain)
		}
	}
}

// TestRawPathReuse: paths lent for one Feed's exchanges are reused by
// later requests without mixing them up, and without allocating.
func TestRawPathReuse(t *testing.T) {
	var chunks []l7.Chunk
	var want []string
	for i := range 50 {
		path := fmt.Sprintf("/items/%d", i)
		want = append(want, path)
		// Two requests in flight at a time, answered together.
		if i%2 == 1 {
			prev := want[i-1]
			chunks = append(chunks, req(uint64(3*i), "GET "+prev+"?k=v HTTP/1.1\r\n\r\nGET "+path+" HTTP/1.1\r\n\r\n"), resp(uint64(3*i+1), ok200+ok200))
		}
	}
	_, paths := l7test.RunPaths(pathParser(l7.Client), chunks)
	if !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}

	p := pathParser(l7.Server)
	in := func(s string) l7.Chunk { c := req(1, s); c.Dir = l7.Ingress; return c }
	rq, rs := in("GET /items/17?token=s3cret HTTP/1.1\r\nHost: x\r\n\r\n"), resp(2, ok200)
	rs.Dir = l7.Egress
	out := make([]l7.Exchange, 0, 4)
	allocs := testing.AllocsPerRun(200, func() {
		out = p.Feed(rq, out[:0])
		out = p.Feed(rs, out)
		if len(out) != 1 || out[0].Path == nil || string(out[0].Path.Bytes()) != "/items/17" {
			t.Fatalf("%+v", out)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per exchange with paths kept", allocs)
	}
}

func TestRawPathUpgrade(t *testing.T) {
	upReq := "GET /u/1?x=y HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
	p := pathParser(l7.Client)
	feed(p, req(1, upReq), resp(2, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"))
	up, ok := p.Upgrade()
	if !ok || up.Path == nil || up.Path.String() != "/u/1" {
		t.Fatalf("upgrade %+v %v", up, ok)
	}
}

func TestRequestPath(t *testing.T) {
	for _, c := range []struct {
		method, target string
		partial        bool
		path           string
		pathPartial    bool
		ok             bool
	}{
		{"GET", "/a/b?c#d", false, "/a/b", false, true},
		{"GET", "/a/b#d", true, "/a/b", false, true},
		{"GET", "/a/b", true, "/a/b", true, true},
		{"GET", "https://h:1/p/q?r", false, "/p/q", false, true},
		{"GET", "https://h:1?r", false, "/", false, true},
		{"OPTIONS", "*", false, "*", false, true},
		{"CONNECT", "h:443", false, "", false, false},
		{"GET", "h:443", false, "", false, false},
		{"GET", "", false, "", false, false},
	} {
		path, partial, ok := RequestPath([]byte(c.method), []byte(c.target), c.partial)
		if string(path) != c.path || partial != c.pathPartial || ok != c.ok {
			t.Errorf("%s %s (partial %v): %q %v %v, want %q %v %v", c.method, c.target, c.partial, path, partial, ok, c.path, c.pathPartial, c.ok)
		}
	}
}
