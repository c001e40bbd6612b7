package http

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func TestAppendAPI(t *testing.T) {
	cases := []struct{ method, target, want string }{
		{"GET", "/", "GET /"},
		{"GET", "/api/users/123/orders", "GET /api/users/{id}/orders"},
		{"GET", "/api/users/123/orders?page=2&token=s3cr3t", "GET /api/users/{id}/orders"},
		{"GET", "/search#frag", "GET /search"},
		{"DELETE", "/users/550e8400-e29b-41d4-a716-446655440000", "DELETE /users/{id}"},
		{"GET", "/blobs/sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "GET /blobs/sha256:{id}"},
		{"GET", "/static/app.3f9a8b7c6d5e.js", "GET /static/app.{id}.js"},
		{"GET", "/orders/order-12345", "GET /orders/order-{id}"},
		{"GET", "/reports/2024-01-31", "GET /reports/{id}"},
		{"GET", "/v1/api/v2", "GET /v1/api/v2"},
		{"GET", "/users/john.doe@example.com/profile", "GET /users/{id}/profile"},
		{"GET", "/users/john.doe%40example.com", "GET /users/{id}"},
		{"GET", "/t/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "GET /t/{id}"},
		{"GET", "/s/aZ3kLm9QpR2sT7vX", "GET /s/{id}"},
		{"GET", "/docs/MyDocumentFinalVersion.pdf", "GET /docs/MyDocumentFinalVersion.pdf"},
		{"GET", "/k8s/x86_64/utf8", "GET /k8s/x86_{id}/utf8"}, // a number after a separator is taken as a value
		{"GET", "/caf\xc3\xa9/menu", "GET /{id}/menu"},
		{"GET", "/a//b/", "GET /a//b/"},
		{"GET", "http://example.com:8080/api/items/77?x=1", "GET /api/items/{id}"},
		{"GET", "http://example.com", "GET /"},
		{"CONNECT", "db.internal:5432", "CONNECT"},
		{"OPTIONS", "*", "OPTIONS *"},
		{"PROPFIND", "/dav/file", "PROPFIND /dav/file"},
		{"FOO", "/x/1", "_OTHER /x/{id}"},
		{"get", "/x", "_OTHER /x"},
		{"GET", "garbage", "GET"},
		{"GET", "", "GET"},
	}
	for _, c := range cases {
		got := string(AppendAPI(nil, []byte(c.method), []byte(c.target)))
		if got != c.want {
			t.Errorf("%s %q: %q, want %q", c.method, c.target, got, c.want)
		}
	}
}

func TestAppendAPIBounded(t *testing.T) {
	long := "/" + strings.Repeat("segment/", 40)
	got := string(AppendAPI(nil, []byte("GET"), []byte(long)))
	if len(got) > MaxAPI || !strings.HasSuffix(got, "/...") || !strings.HasPrefix(got, "GET /segment/segment/") {
		t.Errorf("%d bytes: %q", len(got), got)
	}
	// One segment longer than the bound is cut off whole.
	got = string(AppendAPI(nil, []byte("GET"), []byte("/users/"+strings.Repeat("ab-", 60))))
	if got != "GET /users/..." {
		t.Errorf("%q", got)
	}
	// A bound reached inside the last segment that fits cuts it.
	// "GET " + 5*21 + 16 = 125 bytes fit, "/..." would not.
	got = string(AppendAPI(nil, []byte("GET"), []byte(strings.Repeat("/"+strings.Repeat("a", 20), 5)+"/"+strings.Repeat("b", 15)+"/next")))
	if len(got) != MaxAPI || !strings.HasSuffix(got, "bbbbbbbbbbbb...") {
		t.Errorf("%d bytes: %q", len(got), got)
	}
	// Appending never grows a buffer with room for MaxAPI+64 bytes.
	buf := make([]byte, 0, MaxAPI+64)
	for _, target := range []string{long, "/" + strings.Repeat("a-1-", 300), "/" + strings.Repeat("x", 1000)} {
		out := AppendAPI(buf, []byte("PROPPATCH"), []byte(target))
		if &out[:1][0] != &buf[:1][0] {
			t.Errorf("%q: the template outgrew its buffer", target[:20])
		}
	}
}

func TestPartialTarget(t *testing.T) {
	got := string(appendAPI(nil, []byte("GET"), []byte("/api/users/12"), true))
	if got != "GET /api/users/..." {
		t.Errorf("%q", got)
	}
	got = string(appendAPI(nil, []byte("GET"), []byte("/api/users/12?tok"), true))
	if got != "GET /api/users/{id}" {
		t.Errorf("%q", got)
	}
}

func TestRequestAPI(t *testing.T) {
	cases := []struct {
		prefix, want string
		ok           bool
	}{
		{"GET /api/users/7/orders?x=1 HTTP/1.1\r\nHost: a\r\n", "GET /api/users/{id}/orders", true},
		{"GET /api/users/7/ord", "GET /api/users/{id}/...", true},
		{"GET /api/users/7/orders?to", "GET /api/users/{id}/orders", true},
		{"POST /v1/items HTTP/1.1\r\n", "POST /v1/items", true},
		{"DELETE /v1/items/99 HT", "DELETE /v1/items/{id}", true},
		{"GET", "", false},
		{"\x16\x03\x01\x00", "", false},
		{"GET /a HTTP/2.0\r\n", "", false},
	}
	for _, c := range cases {
		got, ok := RequestAPI(nil, []byte(c.prefix))
		if string(got) != c.want || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.prefix, got, ok, c.want, c.ok)
		}
	}
	if got := string(AppendAPIPrefix(nil, []byte("GET"), []byte("/a/b"))); got != "GET /a/..." {
		t.Errorf("prefix: %q", got)
	}
}

func TestStatus(t *testing.T) {
	cases := []struct {
		line          string
		status, minor int
		ok            bool
	}{
		{"HTTP/1.1 200 OK", 200, 1, true},
		{"HTTP/1.0 404 Not Found", 404, 0, true},
		{"HTTP/1.1 503", 503, 1, true},
		{"HTTP/1.1 204\r\n", 204, 1, true},
		{"HTTP/1.1 20", 0, 0, false},
		{"HTTP/2.0 200 OK", 0, 0, false},
		{"HTTP/1.1 2x0 OK", 0, 0, false},
		{"HTTP/1.1 099 X", 0, 0, false},
		{"HTTP/1.1 2000", 0, 0, false},
	}
	for _, c := range cases {
		s, m, ok := ParseStatusLine([]byte(c.line))
		if s != c.status || m != c.minor || ok != c.ok {
			t.Errorf("%q: %d %d %v", c.line, s, m, ok)
		}
	}
	classes := map[string]struct {
		c  l7.Class
		ok bool
	}{
		"HTTP/1.1 200 OK":      {l7.OK, true},
		"HTTP/1.1 101 Switchi": {l7.OK, true},
		"HTTP/1.1 100 Continu": {l7.OK, false},
		"HTTP/1.1 302 Found":   {l7.OK, true},
		"HTTP/1.1 404 Not Fou": {l7.ClientError, true},
		"HTTP/1.1 499 Client ": {l7.ClientError, true},
		"HTTP/1.1 500 Interna": {l7.ServerError, true},
		"HTTP/1.1 503 Service": {l7.ServerError, true},
		"SSH-2.0-OpenSSH_9.2":  {l7.OK, false},
	}
	for line, w := range classes {
		if c, ok := ResponseClass([]byte(line)); c != w.c || ok != w.ok {
			t.Errorf("%q: %v %v", line, c, ok)
		}
	}
}

// otherFirstBytes are what clients of other protocols send first.
var otherFirstBytes = map[string][]byte{
	"http2 preface":     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	"redis":             []byte("*1\r\n$4\r\nPING\r\n"),
	"redis inline":      []byte("PING\r\n"),
	"pgsql startup":     {0, 0, 0, 0x29, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 0},
	"pgsql ssl request": {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f},
	"mysql handshake":   {0x55, 0, 0, 1, 0x8d, 0xa6, 0xff, 0x09, 0, 0, 0, 1, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	"kafka apiversions": {0, 0, 0, 0x1c, 0, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 'g', 'a', 'l', 'a', 'g', 'o', 0},
	"mongo op_msg":      {0x3a, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0, 0, 0, 0, 0, 0},
	"memcached get":     []byte("get k\r\n"),
	"memcached set":     []byte("set k 0 0 1\r\nx\r\n"),
	"dns query":         {0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1},
	"tls client hello":  {0x16, 3, 1, 0, 0xc8, 1, 0, 0, 0xc4, 3, 3},
	"ssh":               []byte("SSH-2.0-OpenSSH_9.2p1\r\n"),
}

func TestDetect(t *testing.T) {
	for _, s := range []string{"GET / HTTP/1.1\r\n", "POST /api HTTP/1.1", "PUT /x", "DELETE /x", "HEAD /", "OPTIONS * HTTP/1.1", "PATCH /a",
		"CONNECT example.com:443 HTTP/1.1", "CONNECT [::1]:443 HTTP/1.1", "TRACE /", "GET http://example.com/ HTTP/1.1"} {
		if !Detect([]byte(s)) {
			t.Errorf("%q not detected", s)
		}
	}
	for name, b := range otherFirstBytes {
		if Detect(b) {
			t.Errorf("%s detected as HTTP/1", name)
		}
	}
	for _, s := range []string{"", "GET", "GET ", "GET  /", "get / HTTP/1.1", "GETX / HTTP/1.1", "BREW /pot HTTP/1.1", "HTTP/1.1 200 OK"} {
		if Detect([]byte(s)) {
			t.Errorf("%q detected", s)
		}
	}
	// Every fixture's client starts with a detected request.
	for _, f := range fixtures {
		segs := loadFixture(t, f.file)
		if !segs[0].FromClient || !Detect(segs[0].Data) {
			t.Errorf("%s: first client bytes not detected", f.file)
		}
	}
	// HTTP/2's fixtures are HTTP/1 only when they start with an upgrade.
	files, _ := filepath.Glob(filepath.Join("..", "http2", "testdata", "*.chunks"))
	if len(files) == 0 {
		t.Fatal("no http2 fixtures")
	}
	for _, file := range files {
		segs := l7test.Load(t, file)
		if got, want := Detect(segs[0].Data), strings.Contains(file, "upgrade"); got != want {
			t.Errorf("%s: detected %v", file, got)
		}
	}
}
