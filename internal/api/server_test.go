package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/testcert"
)

const (
	successReply  = `{ "result": "success", "message":"New config takes effect" }` + "\n"
	notFoundReply = `{ "result": "failed", "message":"url not found" }` + "\n"
)

func failedReply(msg string) string {
	return `{ "result": "failed", "message":"` + msg + `" }` + "\n"
}

// startServer serves s on a loopback port and returns its base URL. The
// cleanup shuts it down and checks that Serve returned nil.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Shutdown", err)
		}
	})
	scheme := "http"
	if s.cfg.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String()
}

func newTestServer(t *testing.T, cfg ServerConfig) (*fakeController, string) {
	t.Helper()
	fake := newFake()
	return fake, startServer(t, NewServer(cfg, fake, nil))
}

func do(t *testing.T, c *http.Client, method, url, ctype string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func expect(t *testing.T, resp *http.Response, body string, wantStatus int, wantBody string) {
	t.Helper()
	if resp.StatusCode != wantStatus || body != wantBody {
		t.Fatalf("%s %s = %d %q; want %d %q", resp.Request.Method, resp.Request.URL, resp.StatusCode, body, wantStatus, wantBody)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
}

func TestPutSuccess(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(`json={"state":"running"}`))
	expect(t, resp, body, 200, successReply)
	want := []call{{"put", "tcp", `{"state":"running"}`}}
	if got := fake.Calls(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("calls = %+v; want %+v", got, want)
	}
}

func TestPutPlainJSONBody(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	resp, body := do(t, nil, "PUT", base+"/tcp", "application/json", strings.NewReader(`{"state":"stopped"}`))
	expect(t, resp, body, 200, successReply)
	if got := fake.puts(); len(got) != 1 || got[0].Body != `{"state":"stopped"}` {
		t.Fatalf("puts = %+v", got)
	}
}

func TestPutErrorMessageEscaped(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	msg := "params.report_period invalid value 1, must be in [5, 600] \"q\" <b>\n\\"
	fake.putErr["tcp"] = errors.New(msg)
	resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(`json={"params":{"report_period":1}}`))
	expect(t, resp, body, 400,
		`{ "result": "failed", "message":"params.report_period invalid value 1, must be in [5, 600] \"q\" <b>\n\\" }`+"\n")
	var r struct{ Result, Message string }
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Result != "failed" || r.Message != msg {
		t.Fatalf("reply %q does not decode to the message: %+v, %v", body, r, err)
	}
}

func TestLongErrorNotTruncated(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	msg := strings.Repeat("x", 500)
	fake.putErr["tcp"] = errors.New(msg)
	resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(`json={}`))
	expect(t, resp, body, 400, failedReply(msg))
}

func TestNotFound(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"}, {"PUT", "/"}, {"GET", ""}, {"GET", "/haproxy"}, {"PUT", "/haproxy"}, {"GET", "/tcp/x"},
	} {
		resp, body := do(t, nil, tc.method, base+tc.path, form, strings.NewReader(`json={"state":"running"}`))
		expect(t, resp, body, 404, notFoundReply)
	}
	for _, c := range fake.Calls() {
		if c.Feature == "" {
			t.Fatalf("the controller was called for the root path: %+v", c)
		}
	}
}

func TestQueryIgnored(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	resp, body := do(t, nil, "GET", base+"/flowtracer?pretty=1&x=/tcp", "", nil)
	expect(t, resp, body, 200, string(fake.get["flowtracer"]))
}

func TestMethodNotAllowed(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	for _, m := range []string{"POST", "DELETE", "PATCH", "OPTIONS", "HEAD"} {
		resp, body := do(t, nil, m, base+"/tcp", form, strings.NewReader(`json={"state":"running"}`))
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s = %d; want 405", m, resp.StatusCode)
		}
		if a := resp.Header.Get("Allow"); a != "GET, PUT" {
			t.Fatalf("%s: Allow = %q", m, a)
		}
		if m != "HEAD" && body != failedReply("method not allowed") {
			t.Fatalf("%s: body %q", m, body)
		}
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Fatalf("the controller was called: %+v", c)
	}
}

func TestInvalidJSON(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	// gala-gopher's message first, then what is wrong.
	for _, c := range []struct{ body, msg string }{
		{`json={`, "invalid json format: unexpected end of JSON input (at byte 1)"},
		{`state=running`, "invalid json format: the body must be json=<JSON> or a JSON object"},
		{``, "invalid json format: the body is empty"},
		{`json=`, "invalid json format: the JSON is empty"},
		{`{"a":1`, "invalid json format: unexpected end of JSON input (at byte 6)"},
		{`json={"a":1}/*`, "invalid json format: unterminated /* comment or a lone '/'"},
		{`json=%7B%22a%22%3A%7D`, "invalid json format: invalid character '}' looking for beginning of value (at byte 6)"},
	} {
		resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(c.body))
		expect(t, resp, body, 400, failedReply(c.msg))
	}
	if p := fake.puts(); len(p) != 0 {
		t.Fatalf("invalid bodies reached the controller: %+v", p)
	}
}

// bodyOfSize is a curl -d body of exactly n bytes holding valid JSON.
func bodyOfSize(n int) string {
	const head, tail = `json={"state":"running"`, "}"
	return head + strings.Repeat(" ", n-len(head)-len(tail)) + tail
}

// noLength hides the length of a reader so the client sends it chunked.
type noLength struct{ io.Reader }

func TestBodyLimit(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(bodyOfSize(1<<20)))
	expect(t, resp, body, 200, successReply)

	tooBig := failedReply("put data size exceeds 1048576")
	resp, body = do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(bodyOfSize(1<<20+1)))
	expect(t, resp, body, 400, tooBig)
	if p := fake.puts(); len(p) != 1 {
		t.Fatalf("puts = %d; want only the 1 MiB one", len(p))
	}
}

// TestBodyLimitUnknownLength covers a chunked body, whose size is only
// known by reading it.
func TestBodyLimitUnknownLength(t *testing.T) {
	fake := newFake()
	h := NewServer(ServerConfig{}, fake, nil).Handler()
	for _, tc := range []struct {
		size       int
		status     int
		wantReply  string
		wantCalled bool
	}{
		{1 << 20, 200, successReply, true},
		{1<<20 + 1, 400, failedReply("put data size exceeds 1048576"), false},
	} {
		req := httptest.NewRequest("PUT", "/tcp", noLength{strings.NewReader(bodyOfSize(tc.size))})
		req.ContentLength = -1
		req.Header.Set("Content-Type", form)
		rec := httptest.NewRecorder()
		before := len(fake.puts())
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || rec.Body.String() != tc.wantReply {
			t.Fatalf("size %d: %d %q", tc.size, rec.Code, rec.Body.String())
		}
		if called := len(fake.puts()) > before; called != tc.wantCalled {
			t.Fatalf("size %d: controller called = %v", tc.size, called)
		}
	}
}

func TestBodyLimitConfigured(t *testing.T) {
	_, base := newTestServer(t, ServerConfig{MaxBody: 100})
	resp, body := do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(bodyOfSize(101)))
	expect(t, resp, body, 400, failedReply("put data size exceeds 100"))
	resp, body = do(t, nil, "PUT", base+"/tcp", form, strings.NewReader(bodyOfSize(100)))
	expect(t, resp, body, 200, successReply)
}

func TestGetPassthrough(t *testing.T) {
	fake, base := newTestServer(t, ServerConfig{})
	for _, f := range []string{"flamegraph", "tcp"} {
		resp, body := do(t, nil, "GET", base+"/"+f, "", nil)
		expect(t, resp, body, 200, string(fake.get[f]))
	}
	fake.getErr["tcp"] = errors.New("boom")
	resp, body := do(t, nil, "GET", base+"/tcp", "", nil)
	expect(t, resp, body, 500, failedReply("boom"))
}

// pki is a throw-away CA with a server and a client certificate, plus a
// client certificate from another CA.
type pki struct {
	pool           *x509.CertPool
	server, client tls.Certificate
	stranger       tls.Certificate
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca := testcert.NewCA(t, "galago test CA")
	other := testcert.NewCA(t, "another CA")
	return pki{
		pool:     ca.Pool(),
		server:   ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth),
		client:   ca.Issue(t, "client", x509.ExtKeyUsageClientAuth),
		stranger: other.Issue(t, "client", x509.ExtKeyUsageClientAuth),
	}
}

func tlsClient(p pki, certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS13,
	}}}
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	fake, base := newTestServer(t, ServerConfig{TLS: &tls.Config{
		Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS13,
	}})
	resp, body := do(t, tlsClient(p), "PUT", base+"/tcp", form, strings.NewReader(`json={"state":"running"}`))
	expect(t, resp, body, 200, successReply)
	if resp.TLS == nil {
		t.Fatal("the reply did not come over TLS")
	}
	if got := fake.puts(); len(got) != 1 || got[0].Body != `{"state":"running"}` {
		t.Fatalf("puts = %+v", got)
	}
	// Plain HTTP on the TLS port gets no configuration through.
	resp, _ = do(t, nil, "PUT", "http"+strings.TrimPrefix(base, "https")+"/tcp", form, strings.NewReader(`json={}`))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the TLS port: %d", resp.StatusCode)
	}
	if got := fake.puts(); len(got) != 1 {
		t.Fatalf("plain HTTP reached the controller: %+v", got)
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	fake, base := newTestServer(t, ServerConfig{TLS: &tls.Config{
		Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool,
	}})
	resp, body := do(t, tlsClient(p, p.client), "GET", base+"/flowtracer", "", nil)
	expect(t, resp, body, 200, string(fake.get["flowtracer"]))

	for name, c := range map[string]*http.Client{
		"no client certificate":       tlsClient(p),
		"certificate from another CA": tlsClient(p, p.stranger),
	} {
		req, _ := http.NewRequest("PUT", base+"/tcp", strings.NewReader(`json={"state":"running"}`))
		req.Header.Set("Content-Type", form)
		if resp, err := c.Do(req); err == nil {
			_ = resp.Body.Close()
			t.Fatalf("%s: request succeeded with %d", name, resp.StatusCode)
		}
	}
	if got := fake.puts(); len(got) != 0 {
		t.Fatalf("unauthenticated clients reached the controller: %+v", got)
	}
}

func TestSlowClientCutOff(t *testing.T) {
	s := NewServer(ServerConfig{}, newFake(), nil)
	s.srv.ReadHeaderTimeout = 200 * time.Millisecond
	base := startServer(t, s)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("GET /tcp HTTP/1.1\r\nHost: x\r\n")); err != nil { // never finishes the headers
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a connection whose headers never ended")
	}
	if bytes.Contains(b, []byte("200 OK")) {
		t.Fatalf("incomplete request answered: %q", b)
	}
}

func TestShutdownFinishesRequestInFlight(t *testing.T) {
	fake := newFake()
	fake.block = make(chan struct{})
	s := NewServer(ServerConfig{}, fake, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/x", form, nil) // warm-up: 405, not blocked
		if err == nil {
			_ = resp.Body.Close()
		}
		req, _ := http.NewRequest("PUT", "http://"+ln.Addr().String()+"/tcp", strings.NewReader(`json={}`))
		req.Header.Set("Content-Type", form)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		got <- result{resp.StatusCode, string(b), nil}
	}()
	for len(fake.puts()) == 0 {
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	close(fake.block)
	r := <-got
	if r.err != nil || r.status != 200 || r.body != successReply {
		t.Fatalf("request in flight during shutdown: %+v", r)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestExtraHandlers: an extra handler answers its exact path (any method);
// every other path is still the control plane's.
func TestExtraHandlers(t *testing.T) {
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.RawQuery)
	})
	fake, base := newTestServer(t, ServerConfig{Extra: map[string]http.Handler{"/flamegraph/pprof": extra}})
	for _, c := range []struct{ method, query, want string }{{"GET", "?type=oncpu", "GET type=oncpu"}, {"POST", "", "POST "}} {
		resp, body := do(t, nil, c.method, base+"/flamegraph/pprof"+c.query, "", nil)
		if resp.StatusCode != http.StatusTeapot || body != c.want {
			t.Errorf("%s: %d %q", c.method, resp.StatusCode, body)
		}
	}
	resp, body := do(t, nil, "GET", base+"/flamegraph", "", nil)
	expect(t, resp, body, 200, string(fake.get["flamegraph"]))
	resp, body = do(t, nil, "GET", base+"/flamegraph/pprof/x", "", nil)
	expect(t, resp, body, 404, notFoundReply)
}
