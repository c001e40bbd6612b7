package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestRecordFixtures regenerates testdata/*.chunks from real servers and
// clients: Debian's nginx driven by curl and by Go's net/http client, and
// Go net/http servers driven by hand-written requests (pipelining, 1xx,
// HTTP/1.0, Upgrade, CONNECT). Run with GALAGO_L7_RECORD=1 (needs nginx
// and curl: apt-get install nginx curl).
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record fixtures from real servers")
	}
	t.Run("nginx_curl", func(t *testing.T) {
		addr := startNginx(t)
		r := l7test.Record(t, addr)
		base := "http://" + r.Addr()
		out, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-o", "/dev/null", base+"/index.html", base+"/api/users/42/orders?page=2",
			"--next", "-sS", "-o", "/dev/null", "-I", base+"/index.html",
			"--next", "-sS", "-o", "/dev/null", "--compressed", base+"/big.txt",
			"--next", "-sS", "-o", "/dev/null", base+"/missing/0a1b2c3d4e5f6a7b",
			"--next", "-sS", "-o", "/dev/null", "-d", "name=galago&id=7", base+"/api/users/550e8400-e29b-41d4-a716-446655440000",
			"--next", "-sS", "-o", "/dev/null", base+"/err", // nginx closes the connection after a 500: last
		).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		save(t, r, "nginx_curl.chunks", fmt.Sprintf("nginx %s (Debian, root www dir, gzip on, /api/ returns 200, /err returns 500) driven by %s:\n"+
			"curl -o /dev/null /index.html /api/users/42/orders?page=2 --next -I /index.html --next --compressed /big.txt --next /missing/0a1b2c3d4e5f6a7b --next -d 'name=galago&id=7' /api/users/550e8400-e29b-41d4-a716-446655440000 --next /err",
			nginxVersion(t), curlVersion(t)))
	})
	t.Run("nginx_go", func(t *testing.T) {
		addr := startNginx(t)
		r := l7test.Record(t, addr)
		base := "http://" + r.Addr()
		tr := &nethttp.Transport{MaxConnsPerHost: 1}
		c := &nethttp.Client{Transport: tr}
		do := func(method, path, body string) {
			req, err := nethttp.NewRequest(method, base+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body == "" {
				req.Body = nil
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		do("GET", "/index.html", "")
		do("GET", "/big.txt", "") // Go asks for gzip: nginx answers chunked
		do("HEAD", "/big.txt", "")
		do("GET", "/api/orders/123456/items/9?sort=asc", "")
		do("POST", "/api/orders", `{"item":"galago","qty":2}`)
		do("DELETE", "/api/orders/123456", "")
		do("GET", "/nope.html", "")
		do("GET", "/err", "")
		tr.CloseIdleConnections()
		save(t, r, "nginx_go.chunks", fmt.Sprintf("nginx %s (Debian, as for nginx_curl) driven by Go %s net/http client (one keep-alive connection):\n"+
			"GET /index.html, GET /big.txt (gzip, chunked), HEAD /big.txt, GET /api/orders/123456/items/9?sort=asc, POST /api/orders (JSON body), DELETE /api/orders/123456, GET /nope.html (404), GET /err (500)",
			nginxVersion(t), runtime.Version()))
	})
	t.Run("go_pipelined", func(t *testing.T) {
		addr := startGoServer(t)
		r := l7test.Record(t, addr)
		conn := dialRaw(t, r.Addr())
		// Batch 1: five requests in one write.
		conn.roundTrips(t, 5,
			"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"+
				"HEAD /users/1234 HTTP/1.1\r\nHost: x\r\n\r\n"+
				"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"+
				"GET /status/404 HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /status/500?debug=1 HTTP/1.1\r\nHost: x\r\n\r\n")
		// Batch 2: a chunked request body with trailers, a chunked response
		// with trailers, 204, 304.
		conn.roundTrips(t, 4,
			"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n"+
				"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"+
				"DELETE /users/1234 HTTP/1.1\r\nHost: x\r\n\r\n"+
				"GET /cached HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v1\"\r\n\r\n")
		// 100 Continue: headers first, the body after the interim response.
		conn.write(t, "PUT /upload/7 HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\nExpect: 100-continue\r\n\r\n")
		conn.readResponse(t, "PUT")
		conn.write(t, "galago!\n")
		conn.readResponse(t, "PUT")
		// 103 Early Hints, then 200.
		conn.roundTrips(t, 1, "GET /hints HTTP/1.1\r\nHost: x\r\n\r\n")
		conn.roundTrips(t, 1, "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		conn.Close()
		save(t, r, "go_pipelined.chunks", fmt.Sprintf("Go %s net/http server (handlers in record_test.go) driven by hand-written requests on one connection:\n"+
			"batch of 5 pipelined (GET, HEAD, POST 11 bytes, 404, 500), batch of 4 (chunked POST with trailer, chunked response with trailer, 204, 304), "+
			"PUT with Expect: 100-continue, GET answered 103 then 200, GET with Connection: close", runtime.Version()))
	})
	t.Run("go_http10", func(t *testing.T) {
		addr := startGoServer(t)
		r := l7test.Record(t, addr)
		conn := dialRaw(t, r.Addr())
		conn.write(t, "GET /stream HTTP/1.0\r\nHost: x\r\n\r\n")
		b, _ := io.ReadAll(conn)
		conn.Close()
		if !bytes.HasPrefix(b, []byte("HTTP/1.0 200")) || bytes.Contains(b, []byte("Content-Length")) {
			t.Fatalf("not a close-delimited HTTP/1.0 response: %q", b)
		}
		save(t, r, "go_http10.chunks", fmt.Sprintf("Go %s net/http server: GET /stream HTTP/1.0, answered by a handler that flushes (no length: the body runs to the connection's end)", runtime.Version()))
	})
	t.Run("go_websocket", func(t *testing.T) {
		addr := startGoServer(t)
		r := l7test.Record(t, addr)
		conn := dialRaw(t, r.Addr())
		conn.roundTrips(t, 1, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
		conn.write(t, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		conn.readResponse(t, "GET")
		// A masked text frame "GET / HTTP/1.1" that must not parse as HTTP.
		conn.write(t, "\x81\x8e\x00\x00\x00\x00GET / HTTP/1.1")
		echo := make([]byte, 16)
		if _, err := io.ReadFull(conn, echo); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		save(t, r, "go_websocket.chunks", fmt.Sprintf("Go %s net/http server: GET /a, then GET /ws with Upgrade: websocket answered 101 by a hijacking handler, then a WebSocket text frame each way", runtime.Version()))
	})
	t.Run("go_connect", func(t *testing.T) {
		addr := startGoServer(t)
		r := l7test.Record(t, addr)
		conn := dialRaw(t, r.Addr())
		conn.write(t, "CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\n")
		conn.readResponse(t, "CONNECT")
		conn.write(t, "GET /inside HTTP/1.1\r\n\r\n") // tunnelled bytes, not HTTP to the proxy
		echo := make([]byte, 24)
		if _, err := io.ReadFull(conn, echo); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		save(t, r, "go_connect.chunks", fmt.Sprintf("Go %s net/http server: CONNECT db.internal:5432 answered 200 by a hijacking handler, then tunnelled bytes echoed back", runtime.Version()))
	})
}

func save(t *testing.T, r *l7test.Recorder, name, comment string) {
	t.Helper()
	segs := r.Segments()
	if len(segs) == 0 {
		t.Fatal("nothing recorded")
	}
	var b bytes.Buffer
	if err := l7test.Write(&b, comment+"\nRecorded by TestRecordFixtures (GALAGO_L7_RECORD=1).", segs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func nginxVersion(t *testing.T) string {
	out, err := exec.Command("nginx", "-v").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: nginx/")
}

func curlVersion(t *testing.T) string {
	out, err := exec.Command("curl", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(string(out), " (", 2)[0]
}

// startNginx runs Debian's nginx on a free loopback port with everything
// under a temporary directory, and returns its address.
func startNginx(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	www := filepath.Join(dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(www, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("index.html", "<html><body>galago</body></html>\n")
	// 64 KiB of words: gzip's output spans several chunks.
	words := []string{"observe", "kernel", "socket", "latency", "request", "galago", "probe", "metric", "packet", "thread"}
	rng := rand.New(rand.NewPCG(1, 2))
	var big strings.Builder
	for big.Len() < 64<<10 {
		big.WriteString(words[rng.IntN(len(words))])
		fmt.Fprintf(&big, " %d\n", rng.IntN(100000))
	}
	write("big.txt", big.String())
	port := freePort(t)
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	types { text/html html; text/plain txt; }
	default_type application/octet-stream;
	gzip on;
	gzip_types text/plain;
	gzip_min_length 0;
	server {
		listen 127.0.0.1:%[2]d;
		root %[3]s;
		location /api/ { default_type text/plain; return 200 "ok\n"; }
		location = /err { return 500; }
	}
}
`, dir, port, www)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nginx", "-c", cf, "-p", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitListening(t, addr)
	return addr
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitListening(t *testing.T, addr string) {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s is not listening", addr)
}

// startGoServer serves the handlers the Go fixtures exercise.
func startGoServer(t *testing.T) string {
	t.Helper()
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/a", func(w nethttp.ResponseWriter, r *nethttp.Request) { _, _ = io.WriteString(w, "a\n") })
	mux.HandleFunc("/users/", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Method == "DELETE" {
			w.WriteHeader(nethttp.StatusNoContent)
			return
		}
		_, _ = io.WriteString(w, `{"id":1234,"name":"galago"}`)
	})
	mux.HandleFunc("/echo", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/upload/", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body) // reading sends 100 Continue
		w.WriteHeader(nethttp.StatusCreated)
		fmt.Fprintf(w, "%d bytes\n", len(b))
	})
	mux.HandleFunc("/status/404", func(w nethttp.ResponseWriter, r *nethttp.Request) { nethttp.NotFound(w, r) })
	mux.HandleFunc("/status/500", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Error(w, "boom", nethttp.StatusInternalServerError)
	})
	mux.HandleFunc("/stream", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Trailer", "X-Count")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "part %d\n", i)
			w.(nethttp.Flusher).Flush()
		}
		w.Header().Set("X-Count", "3")
	})
	mux.HandleFunc("/cached", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(nethttp.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, "v1\n")
	})
	mux.HandleFunc("/hints", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Add("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(nethttp.StatusEarlyHints)
		_, _ = io.WriteString(w, "hinted\n")
	})
	mux.HandleFunc("/ws", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		conn, brw, err := nethttp.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		_ = brw.Flush()
		frame := make([]byte, 20)
		if _, err := io.ReadFull(brw, frame); err != nil {
			return
		}
		// Unmasked echo of the 14-byte payload.
		_, _ = conn.Write(append([]byte{0x81, 14}, frame[6:]...))
	})
	handler := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Method == nethttp.MethodConnect {
			conn, brw, err := nethttp.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = brw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n")
			_ = brw.Flush()
			b := make([]byte, 24)
			if _, err := io.ReadFull(brw, b); err == nil {
				_, _ = conn.Write(b)
			}
			return
		}
		mux.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &nethttp.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) Read(b []byte) (int, error) { return c.br.Read(b) }

func (c *rawConn) write(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		t.Fatal(err)
	}
}

// roundTrips writes reqs in one write and reads n responses, using the
// requests' methods for HEAD.
func (c *rawConn) roundTrips(t *testing.T, n int, reqs string) {
	t.Helper()
	c.write(t, reqs)
	br := bufio.NewReader(strings.NewReader(reqs))
	for i := 0; i < n; i++ {
		req, err := nethttp.ReadRequest(br)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, req.Body)
		c.readResponse(t, req.Method)
	}
}

// readResponse reads one response (interim ones included, which
// net/http's reader hands over as their own responses).
func (c *rawConn) readResponse(t *testing.T, method string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := nethttp.ReadResponse(c.br, &nethttp.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	if method != "CONNECT" { // a tunnel's bytes are not a body
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if resp.StatusCode == nethttp.StatusEarlyHints {
		c.readResponse(t, method)
	}
}
