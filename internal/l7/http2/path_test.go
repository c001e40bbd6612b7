package http2

import (
	"slices"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func get(path string) []string {
	return []string{":method", "GET", ":scheme", "http", ":path", path, ":authority", "svc:8080"}
}

// TestRawPath: each exchange carries its :path, query and fragment left
// out, whatever order the streams end in.
func TestRawPath(t *testing.T) {
	long := "/files/" + strings.Repeat("x", 300)
	c := newConn()
	c.preface()
	c.request(1, true, get("/items/17?token=s3cret")...)
	c.request(3, true, get("/users/5#frag")...)
	c.request(5, true, get(long+"?q=1")...)
	c.request(7, true, grpcReq...)
	c.request(9, true, ":method", "CONNECT", ":authority", "svc:443")
	c.request(11, true, get("/orders/9")...)
	for _, id := range []uint32{9, 7, 5, 3, 1} {
		kv := []string{":status", "200"}
		if id == 7 {
			kv = append(kv, "content-type", "application/grpc", "grpc-status", "0")
		}
		c.response(id, true, kv...)
	}
	p := NewParser(l7.Client)
	p.KeepPaths()
	got, paths := l7test.RunPaths(p, c.chunks)
	var apis []string
	for _, x := range got {
		apis = append(apis, x.API)
	}
	wantAPIs := []string{"", "/pkg.Svc/Get", "GET /files/...", "GET /users/{id}", "GET /items/{id}", "GET /orders/{id}"}
	wantPaths := []string{"", "/pkg.Svc/Get", long[:l7.MaxPath-3] + "...", "/users/5", "/items/17", "/orders/9"}
	if !slices.Equal(apis, wantAPIs) || !slices.Equal(paths, wantPaths) {
		t.Errorf("APIs %q paths %q,\nwant %q %q", apis, paths, wantAPIs, wantPaths)
	}
	// Keeping paths changes nothing else.
	if plain := l7test.Run(NewParser(l7.Client), c.chunks); !slices.Equal(plain, got) {
		t.Errorf("with paths %+v,\nwithout %+v", got, plain)
	}
	// Without KeepPaths, no path.
	for _, x := range l7test.Run(NewParser(l7.Client), c.chunks) {
		if x.Path != nil {
			t.Fatalf("a path kept without KeepPaths: %+v", x)
		}
	}
}

// TestRawPathSteadyState: with paths kept, a request/response per Feed
// pair allocates nothing once warm.
func TestRawPathSteadyState(t *testing.T) {
	c := newConn()
	c.preface()
	p := NewParser(l7.Client)
	p.KeepPaths()
	for _, ch := range c.chunks {
		p.Feed(ch, nil)
	}
	// The same header block each time: Go's encoder indexes the fields
	// once, then refers to them.
	out := make([]l7.Exchange, 0, 4)
	id := uint32(1)
	next := func() (l7.Chunk, l7.Chunk) {
		c.chunks = c.chunks[:0]
		c.request(id, true, get("/items/17?token=s3cret")...)
		c.response(id, true, ":status", "200")
		id += 2
		return c.chunks[0], c.chunks[1]
	}
	var rqs, rss []l7.Chunk
	for range 300 {
		rq, rs := next()
		rqs, rss = append(rqs, rq), append(rss, rs)
	}
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		out = p.Feed(rqs[i], out[:0])
		out = p.Feed(rss[i], out)
		i++
		if len(out) != 1 || out[0].Path == nil || string(out[0].Path.Bytes()) != "/items/17" {
			t.Fatalf("%+v", out)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per exchange with paths kept", allocs)
	}
}

// TestRawPathUpgrade: an h2c connection's stream 1 is the HTTP/1 upgrade
// request, whose path the HTTP/1 parser read.
func TestRawPathUpgrade(t *testing.T) {
	var path l7.Path
	path.Set([]byte("/u/1"), false)
	p := NewUpgradedParser(l7.Client, 1, "GET /u/{id}", 10)
	p.KeepPaths()
	p.SetUpgradePath(&path)
	c := newConn()
	c.response(1, true, ":status", "200")
	_, paths := l7test.RunPaths(p, c.chunks)
	if !slices.Equal(paths, []string{"/u/1"}) {
		t.Errorf("paths %q", paths)
	}
}
