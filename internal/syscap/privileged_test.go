package syscap

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/testcert"
)

// recorder is a Handler that keeps everything.
type recorder struct {
	mu     sync.Mutex
	conns  map[uint64]Conn
	data   map[uint64][]l7.Chunk
	closed map[uint64]bool
}

func newRecorder() *recorder {
	return &recorder{conns: map[uint64]Conn{}, data: map[uint64][]l7.Chunk{}, closed: map[uint64]bool{}}
}

func (r *recorder) Conn(c *Conn) { r.mu.Lock(); r.conns[c.ID] = *c; r.mu.Unlock() }
func (r *recorder) Data(d *Data) {
	r.mu.Lock()
	r.data[d.ConnID] = append(r.data[d.ConnID], l7.Chunk{Dir: d.Dir, TS: d.TS, Data: bytes.Clone(d.Bytes), Size: d.Size})
	r.mu.Unlock()
}
func (r *recorder) Close(c *Close) { r.mu.Lock(); r.closed[c.ConnID] = true; r.mu.Unlock() }

// streams joins the captured bytes of a connection per direction.
func (r *recorder) streams(id uint64) (egress, ingress []byte, sizes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.data[id] {
		if c.Dir == l7.Egress {
			egress = append(egress, c.Data...)
		} else {
			ingress = append(ingress, c.Data...)
		}
		sizes += c.Size
	}
	return
}

// selfTargets observes this test process only.
type selfTargets struct{ ch chan struct{} }

func (selfTargets) Mode() snoop.Mode             { return snoop.Whitelist }
func (selfTargets) Observed(pid int) bool        { return pid == os.Getpid() }
func (selfTargets) PIDs() []int                  { return []int{os.Getpid()} }
func (selfTargets) CgroupIDs() []uint64          { return nil }
func (selfTargets) Labels(int) map[string]string { return nil }
func (s selfTargets) Changed() <-chan struct{}   { return s.ch }

// openCapture opens a capture reporting to opts.Handler, tracing protos for
// targets (nil: every process); it is closed when the test ends.
func openCapture(t *testing.T, opts Options, targets snoop.Targets, protos ...l7.Protocol) *Capture {
	t.Helper()
	c, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if (c.socks == nil) != opts.NoSockHooks {
		t.Fatalf("sock hooks attached: %v, want %v", c.socks != nil, !opts.NoSockHooks)
	}
	if err := c.SetConfig(Config{Protocols: protos}); err != nil {
		t.Fatal(err)
	}
	exits := exitSyscalls(c.socks != nil, slices.Contains(protos, l7.DNS))
	if _, forced := os.LookupEnv(EnvAttach); opts.Attach == AttachAuto && !forced && (c.exit.rawLink != nil || len(c.exit.tps) != len(exits)) {
		t.Fatalf("auto mode: want the %d per-syscall tracepoints only, have raw %v and %d", len(exits), c.exit.rawLink != nil, len(c.exit.tps))
	}
	if err := c.SetTargets(targets); err != nil {
		t.Fatal(err)
	}
	return c
}

// runCapture reads c's records until stop, which lets the last ones
// arrive first and fails the test if Run failed.
func runCapture(t *testing.T, c *Capture) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCapturePrivileged: an HTTP/1.1 keep-alive exchange between a client
// and a server of this process is captured on both ends, byte for byte,
// with the protocol and roles inferred in the kernel; a connection of a
// protocol not enabled and a regular file are not; close() is reported.
// It runs on the raw sys_exit tracepoint (AttachRaw) without the sock
// hooks, so sys_exit takes every data syscall, as on kernels without the
// sock tracepoints; the other capture tests (and the l7, ksli and
// postgre_sli probes') run on the per-syscall exits beside the sock
// hooks: both attachments and both data paths are tested without loading
// the capture twice per test (the load is most of a test's time).
func TestCapturePrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	rec := newRecorder()
	var lost uint64
	c := openCapture(t, Options{Handler: rec, OnLost: func(n uint64) { lost += n }, Attach: AttachRaw, NoSockHooks: true}, selfTargets{}, l7.HTTP)
	if c.exit.rawLink == nil || len(c.exit.tps) != 0 {
		t.Fatalf("not attached to the raw tracepoint only: %+v", c.exit)
	}
	stop := runCapture(t, c)

	body := bytes.Repeat([]byte("b"), 3000)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(body)
	})}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	url := fmt.Sprintf("http://%s/x", ln.Addr())
	for i := 0; i < 3; i++ {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) != len(body) {
			t.Fatalf("body %d", len(b))
		}
	}
	client.CloseIdleConnections()
	// Redis is not enabled: a RESP exchange is not traced.
	rc, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rc.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	rc.Close()
	// A regular file.
	f, _ := os.CreateTemp(t.TempDir(), "x")
	_, _ = f.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Close()

	stop()
	rec.mu.Lock()
	conns := rec.conns
	rec.mu.Unlock()
	var client0, server0 *Conn
	for id := range conns {
		cn := conns[id]
		if cn.Proto != l7.HTTP || cn.TGID != uint32(os.Getpid()) || cn.L4 != TCP {
			t.Errorf("unexpected conn %+v", cn)
			continue
		}
		switch cn.Role {
		case l7.Client:
			client0 = &cn
		case l7.Server:
			server0 = &cn
		}
	}
	if len(conns) != 2 || client0 == nil || server0 == nil {
		t.Fatalf("conns %+v, want one client and one server", conns)
	}
	if client0.Remote != server0.Local || server0.Remote != client0.Local {
		t.Errorf("addresses: client %v->%v server %v->%v", client0.Local, client0.Remote, server0.Local, server0.Remote)
	}
	ce, ci, _ := rec.streams(client0.ID)
	se, si, _ := rec.streams(server0.ID)
	if !bytes.Equal(ce, si) || !bytes.Equal(se, ci) {
		t.Errorf("client sent %d bytes, server got %d; server sent %d, client got %d", len(ce), len(si), len(se), len(ci))
	}
	if n := bytes.Count(ce, []byte("GET /x HTTP/1.1")); n != 3 {
		t.Errorf("%d requests captured, want 3", n)
	}
	if !rec.closed[client0.ID] || !rec.closed[server0.ID] {
		t.Errorf("close not reported: %v", rec.closed)
	}
	if lost != 0 {
		t.Errorf("lost %d", lost)
	}
	checkPollLost(t, c, &lost)
}

// nginxTLS starts Debian's nginx serving TLS on 127.0.0.1 with a page of
// body, and returns its port.
func nginxTLS(t *testing.T, body string) int {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "galago-test-ca")
	certFile, keyFile := testcert.WriteFiles(t, dir, "server", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := fmt.Sprintf(`daemon off; master_process off; worker_processes 1; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen 127.0.0.1:%[2]d ssl; ssl_certificate %[3]s; ssl_certificate_key %[4]s; root %[1]s; } }
`, dir, port, certFile, keyFile)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nginx", "-c", cf, "-e", filepath.Join(dir, "error.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return port
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	t.Fatalf("nginx did not listen on %d: %s", port, log)
	return 0
}

// TestOpenSSLPrivileged: curl (libssl) fetches a page over TLS from nginx
// (libssl): with the TLS uprobes on libssl, both ends' plaintext is
// captured on their TLS connections (marked SSL), the HTTP request and
// response in full, and none of the ciphertext.
func TestOpenSSLPrivileged(t *testing.T) {
	probetest.RequireTools(t, "nginx", "curl")
	lib := "/usr/lib/x86_64-linux-gnu/libssl.so.3"
	if _, err := os.Stat(lib); err != nil {
		matches, _ := filepath.Glob("/usr/lib/*/libssl.so.3")
		if len(matches) == 0 {
			t.Fatalf("no libssl.so.3: %v", err)
		}
		lib = matches[0]
	}
	rec := newRecorder()
	c := openCapture(t, Options{Handler: rec}, nil, l7.HTTP)
	if ok, err := c.AttachOpenSSL(lib); err != nil || !ok {
		t.Fatalf("attach %s: %v %v", lib, ok, err)
	}
	if ok, err := c.AttachOpenSSL(lib); err != nil || ok {
		t.Fatalf("second attach of %s: %v %v, want a no-op", lib, ok, err)
	}
	stop := runCapture(t, c)

	page := strings.Repeat("galago ", 1000)
	port := nginxTLS(t, page)
	// Each curl runs while one more idle plain connection holds an fd of
	// nginx: a new connection's SSL object often reuses the address of the
	// one before it, but its fd differs, so a socket remembered for the
	// address would be another connection's.
	const fetches = 12
	for i := 0; i < fetches; i++ {
		idle, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
		body, err := exec.Command("curl", "-sk", "--http1.1", fmt.Sprintf("https://127.0.0.1:%d/index.html", port)).Output()
		if err != nil || string(body) != page {
			t.Fatalf("curl %d: %v, %d bytes", i, err, len(body))
		}
	}
	stop()
	rec.mu.Lock()
	conns := maps.Clone(rec.conns)
	rec.mu.Unlock()
	clients := map[netip.AddrPort]Conn{}
	servers := map[netip.AddrPort]Conn{} // by the client's address
	for _, cn := range conns {
		if cn.Remote.Port() != uint16(port) && cn.Local.Port() != uint16(port) {
			continue
		}
		if !cn.SSL || cn.Proto != l7.HTTP {
			t.Errorf("conn %+v: want SSL HTTP", cn)
		}
		switch cn.Role {
		case l7.Client:
			clients[cn.Local] = cn
		case l7.Server:
			servers[cn.Remote] = cn
		}
	}
	if len(clients) != fetches || len(servers) != fetches {
		t.Fatalf("%d client and %d server TLS connections traced, want %d of each (one per curl): %+v", len(clients), len(servers), fetches, conns)
	}
	for addr, client := range clients {
		server, ok := servers[addr]
		if !ok || client.TGID == server.TGID {
			t.Errorf("curl's connection from %v: no nginx connection with its plaintext", addr)
			continue
		}
		ce, ci, _ := rec.streams(client.ID)
		se, si, _ := rec.streams(server.ID)
		if !bytes.HasPrefix(ce, []byte("GET /index.html HTTP/1.1\r\n")) || !bytes.Equal(ce, si) {
			t.Errorf("request from %v: curl sent %q, nginx read %q", addr, ce, si)
		}
		if !bytes.HasPrefix(se, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasPrefix(ci, []byte("HTTP/1.1 200 OK\r\n")) {
			t.Errorf("response to %v: nginx sent %q..., curl read %q...", addr, se[:min(len(se), 40)], ci[:min(len(ci), 40)])
		}
		// The client reads the whole page (the first chunk of the turn in
		// full, the rest as sizes); no byte is missing from the sizes.
		var got int
		rec.mu.Lock()
		for _, ch := range rec.data[client.ID] {
			if ch.Dir == l7.Ingress {
				got += ch.Size
			}
		}
		rec.mu.Unlock()
		if hdr := bytes.Index(ci, []byte("\r\n\r\n")); hdr < 0 || got != hdr+4+len(page) {
			t.Errorf("curl read %d plaintext bytes, want headers + %d", got, len(page))
		}
	}
	// A full ssl_calls: every SSL_read/SSL_write (curl's and nginx's)
	// counts in the loss.
	checkCallsFull(t, c, c.objs.SslCalls, func(i uint32) []byte {
		k := make([]byte, 8) // a pid_tgid no thread has
		binary.NativeEndian.PutUint64(k, 1<<62|uint64(i))
		return k
	}, func() {
		body, err := exec.Command("curl", "-sk", "--http1.1", fmt.Sprintf("https://127.0.0.1:%d/index.html", port)).Output()
		if err != nil || string(body) != page {
			t.Fatalf("curl: %v, %d bytes", err, len(body))
		}
	}, c.objs.SslReadEnter, c.objs.SslWriteEnter, c.objs.SslReadExEnter, c.objs.SslWriteExEnter)
}

// TestSizePrefixReadPrivileged: a Kafka broker reads a request's 4-byte
// size, then the rest; its side of the connection is still found to be
// Kafka's server side, and its ingress bytes are the whole request.
func TestSizePrefixReadPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	rec := newRecorder()
	c := openCapture(t, Options{Handler: rec}, selfTargets{}, l7.Kafka)
	stop := runCapture(t, c)

	// ApiVersions v0, correlation id 7, client id "galago".
	body := []byte{0, 18, 0, 0, 0, 0, 0, 7, 0, 6, 'g', 'a', 'l', 'a', 'g', 'o'}
	req := append([]byte{0, 0, 0, byte(len(body))}, body...)
	resp := []byte{0, 0, 0, 6, 0, 0, 0, 7, 0, 0}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer s.Close()
		size := make([]byte, 4)
		if _, err := io.ReadFull(s, size); err != nil {
			served <- err
			return
		}
		rest := make([]byte, int(size[3]))
		if _, err := io.ReadFull(s, rest); err != nil {
			served <- err
			return
		}
		_, err = s.Write(resp)
		served <- err
	}()
	cl, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Write(req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(resp))
	if _, err := io.ReadFull(cl, got); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	stop()
	var server *Conn
	for _, cn := range rec.conns {
		if cn.Proto == l7.Kafka && cn.Role == l7.Server {
			cn := cn
			server = &cn
		}
	}
	if server == nil {
		t.Fatalf("no Kafka server connection traced: %+v", rec.conns)
	}
	se, si, _ := rec.streams(server.ID)
	if !bytes.Equal(si, req) || !bytes.Equal(se, resp) {
		t.Errorf("broker read %v, want %v; wrote %v, want %v", si, req, se, resp)
	}
}

// buildGoTLS builds testdata/gotls, stripped (-s -w) or not.
func buildGoTLS(t *testing.T, stripped bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gotls")
	args := []string{"build", "-o", out}
	if stripped {
		args = append(args, "-ldflags=-s -w")
	}
	args = append(args, "./testdata/gotls")
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// checkGoTLSConn checks the TLS connection of gotls process pid: each
// end's plaintext is what the other read, with n requests (prefix) and n
// responses.
func checkGoTLSConn(t *testing.T, rec *recorder, pid int, prefix string, n int) {
	t.Helper()
	rec.mu.Lock()
	conns := maps.Clone(rec.conns)
	rec.mu.Unlock()
	var client, server *Conn
	for _, cn := range conns {
		if cn.TGID != uint32(pid) {
			continue
		}
		if !cn.SSL || cn.Proto != l7.HTTP {
			t.Errorf("conn %+v: want SSL HTTP", cn)
		}
		cn := cn
		if cn.Role == l7.Client {
			client = &cn
		} else {
			server = &cn
		}
	}
	if client == nil || server == nil {
		t.Fatalf("conns of gotls: %+v", conns)
	}
	ce, ci, _ := rec.streams(client.ID)
	se, si, _ := rec.streams(server.ID)
	if !bytes.Equal(ce, si) || !bytes.Equal(se, ci) {
		t.Errorf("client sent %d bytes, server read %d; server sent %d, client read %d", len(ce), len(si), len(se), len(ci))
		if len(ce)+len(si)+len(se)+len(ci) < 4096 {
			t.Errorf("client sent %q, server read %q; server sent %q, client read %q", ce, si, se, ci)
		}
	}
	if c := bytes.Count(ce, []byte(prefix)); c != n {
		t.Errorf("%d requests %q..., want %d", c, prefix, n)
	}
	if c := bytes.Count(se, []byte("HTTP/1.1 200 OK")); c != n {
		t.Errorf("%d responses, want %d", c, n)
	}
}

// TestGoTLSPrivileged: a Go program (with symbols, and stripped) makes
// HTTPS requests to its own crypto/tls server; the Go TLS uprobes (entry
// and every RET of crypto/tls.(*Conn).Write/Read) capture both ends'
// plaintext on their TLS connections, request and response in full.
func TestGoTLSPrivileged(t *testing.T) {
	probetest.RequireTools(t, "go")
	for _, stripped := range []bool{false, true} {
		t.Run(fmt.Sprintf("stripped=%v", stripped), func(t *testing.T) {
			bin := buildGoTLS(t, stripped)
			rec := newRecorder()
			c := openCapture(t, Options{Handler: rec}, nil, l7.HTTP)
			if ok, err := c.AttachGoTLS(bin); err != nil || !ok {
				t.Fatalf("attach: %v %v", ok, err)
			}
			stop := runCapture(t, c)
			cmd := exec.Command(bin, "3")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("gotls: %v", err)
			}
			if string(out) != "hello /item/0\nhello /item/1\nhello /item/2\n" {
				t.Fatalf("gotls printed %q", out)
			}
			if !stripped {
				// Requests written at every call depth up to 600: at some,
				// Write's prologue grows the stack and runs Write from its
				// entry again; each is captured once.
				deep := exec.Command(bin, "deep", "600")
				if out, err := deep.Output(); err != nil || string(out) != "deep 600\n" {
					t.Fatalf("gotls deep: %v %q", err, out)
				}
				stop()
				checkGoTLSConn(t, rec, deep.Process.Pid, "GET /deep/", 600)
			} else {
				stop()
			}
			checkGoTLSConn(t, rec, cmd.Process.Pid, "GET /item/", 3)
			if !stripped {
				return
			}
			// gotls exited with its server's Read pending: the sweep
			// frees that entry.
			if err := c.sweep(); err != nil {
				t.Fatal(err)
			}
			var k goTLSKey
			v := make([]byte, c.objs.GoTlsCalls.ValueSize())
			if it := c.objs.GoTlsCalls.Iterate(); it.Next(&k, &v) {
				t.Errorf("go_tls_calls keeps %+v after gotls exited and a sweep", k)
			}
			// A full go_tls_calls: every Read counts in the loss.
			checkCallsFull(t, c, c.objs.GoTlsCalls, func(i uint32) []byte {
				k := make([]byte, 16) // struct go_tls_key of a tgid no process has
				binary.NativeEndian.PutUint32(k, 1<<31)
				binary.NativeEndian.PutUint64(k[8:], uint64(i))
				return k
			}, func() {
				if out, err := exec.Command(bin, "2").Output(); err != nil || len(out) == 0 {
					t.Fatalf("gotls: %v %q", err, out)
				}
			}, c.objs.GoTlsReadEnter)
		})
	}
}

// TestWholeIovecsPrivileged: a chunk of a whole-captured protocol sent as
// several iovecs (memcached answers a get with a sendmsg of the VALUE
// line, the value and the trailer) is captured whole past the first 4
// KiB, across the iovecs' and the records' boundaries, on both ends.
func TestWholeIovecsPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	rec := newRecorder()
	c := openCapture(t, Options{Handler: rec}, selfTargets{}, l7.Memcached)
	if err := c.SetConfig(Config{Protocols: []l7.Protocol{l7.Memcached}, Whole: []l7.Protocol{l7.Memcached}, WholeMax: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	stop := runCapture(t, c)
	fds := loopbackPair(t)
	value := bytes.Repeat([]byte("0123456789abcdef"), 600) // 9 600 bytes: three records of the value alone
	head := fmt.Appendf(nil, "VALUE k 0 %d\r\n", len(value))
	tail := []byte("\r\nEND\r\n")
	reply := slices.Concat(head, value, tail)
	req := []byte("get k\r\n")
	if _, err := unix.Write(fds.clOut, req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(reply))
	if _, err := io.ReadFull(fdReader(fds.srvIn), got[:len(req)]); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Writev(fds.srvOut, [][]byte{head, value, tail}); err != nil || n != len(reply) {
		t.Fatalf("writev: %d, %v", n, err)
	}
	if _, err := io.ReadFull(fdReader(fds.clIn), got); err != nil {
		t.Fatal(err)
	}
	stop()
	var client, server *Conn
	for _, cn := range rec.conns {
		cn := cn
		if cn.Role == l7.Client {
			client = &cn
		} else {
			server = &cn
		}
	}
	if client == nil || server == nil {
		t.Fatalf("connections %+v", rec.conns)
	}
	se, si, _ := rec.streams(server.ID)
	ce, ci, _ := rec.streams(client.ID)
	if !bytes.Equal(si, req) || !bytes.Equal(ce, req) {
		t.Errorf("request: server read %q, client wrote %q; want %q", si, ce, req)
	}
	if !bytes.Equal(se, reply) {
		t.Errorf("server's writev of %d bytes in 3 iovecs captured as %d bytes (equal prefix %d)", len(reply), len(se), commonPrefix(se, reply))
	}
	if !bytes.Equal(ci, reply) {
		t.Errorf("client's read of %d bytes captured as %d bytes (equal prefix %d)", len(reply), len(ci), commonPrefix(ci, reply))
	}
}

// fdReader reads a blocking fd.
type fdReader int

func (f fdReader) Read(b []byte) (int, error) { return unix.Read(int(f), b) }

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
