package l7

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/galago-project/galago/internal/table"
)

// h2Paths are what the HTTP/2 server answers: each path its status.
var h2Paths = map[string]int{"/ok": http.StatusOK, "/missing": http.StatusNotFound, "/fail": http.StatusInternalServerError}

// h2Server serves HTTP/2 only: over TLS (h2 by ALPN) with GALAGO_L7_CERT
// and GALAGO_L7_KEY, else h2c with prior knowledge.
func h2Server() error {
	ln, err := listenLoopback()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		code, ok := h2Paths[r.URL.Path]
		if !ok || r.ProtoMajor != 2 {
			code = http.StatusTeapot // fails the client
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "galago h2 test\n")
	})}
	srv.Protocols = new(http.Protocols)
	if cert := os.Getenv("GALAGO_L7_CERT"); cert != "" {
		srv.Protocols.SetHTTP2(true)
		return srv.ServeTLS(ln, cert, os.Getenv("GALAGO_L7_KEY"))
	}
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv.Serve(ln)
}

// h2Client sends GALAGO_L7_N requests of each method (GET, POST) and path
// of h2Paths to GALAGO_L7_URL over HTTP/2 only (trusting GALAGO_L7_CA for
// TLS), 4 at a time on the connection, and prints the count of each
// "method path status" it got.
func h2Client() error {
	n := envInt("GALAGO_L7_N")
	tr := &http.Transport{Protocols: new(http.Protocols)}
	var err error
	if tr.TLSClientConfig, err = clientTLS(); err != nil {
		return err
	}
	if tr.TLSClientConfig != nil {
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	c := &http.Client{Transport: tr}
	url := os.Getenv("GALAGO_L7_URL")
	type call struct{ method, path string }
	calls := make(chan call)
	go func() {
		for range n {
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				for p := range h2Paths {
					calls <- call{m, p}
				}
			}
		}
		close(calls)
	}()
	var mu sync.Mutex
	counts := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for cl := range calls {
				var body io.Reader
				if cl.method == http.MethodPost {
					body = strings.NewReader("ping")
				}
				req, err := http.NewRequest(cl.method, url+cl.path, body)
				if err == nil {
					var resp *http.Response
					if resp, err = c.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.ProtoMajor != 2 || resp.StatusCode != h2Paths[cl.path] {
							err = fmt.Errorf("%s %s: %s %s", cl.method, cl.path, resp.Proto, resp.Status)
						}
						mu.Lock()
						counts[fmt.Sprintf("%s %s %d", cl.method, cl.path, resp.StatusCode)]++
						mu.Unlock()
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	printCounts(counts)
	return firstErr
}

// testGoHTTP2: a Go net/http server and client speaking HTTP/2 only (this
// test binary, re-executed), h2c with prior knowledge or h2 over TLS (Go
// crypto/tls uprobes): 50 requests of each of GET and POST to a 200, a 404
// and a 500 path, 4 streams at a time on one connection. On both ends the
// rows say http2, and the requests and their errors per API equal the
// client's own count of each method, path and status.
func testGoHTTP2(t *testing.T, e *env, useTLS bool) {
	const n = 50
	var srvEnv, cliEnv []string
	scheme := "http"
	if useTLS {
		srvEnv, cliEnv = e.tlsFiles()
		scheme = "https"
	}
	_, port := e.startHelper("h2server", srvEnv...)
	if useTLS {
		e.waitAttached("go crypto/tls", "")
	}
	got := e.runHelper("h2client", append(cliEnv, fmt.Sprintf("GALAGO_L7_N=%d", n), fmt.Sprintf("GALAGO_L7_URL=%s://127.0.0.1:%d", scheme, port))...)
	ssl := sslLabel(useTLS)
	var total float64
	for _, c := range got {
		total += c
	}
	if total != 2*3*n {
		t.Fatalf("client made %v requests, want %d: %v", total, 2*3*n, got)
	}
	recs, tallies := e.check(map[string]expect{
		"server": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: port, protocol: "http2", ssl: ssl}, n: total},
		"client": {m: rowMatch{tbl: table.L7Rpc, role: "client", port: port, protocol: "http2", ssl: ssl}, n: total},
	})
	for role, s := range tallies {
		// 404 and 500 answers are the errors.
		if want := float64(4 * n); s.errs != want {
			t.Errorf("%s l7_rpc err_count %v, want %v", role, s.errs, want)
		}
	}
	for _, role := range []string{"server", "client"} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			for p, code := range h2Paths {
				api := m + " " + p
				want := got[fmt.Sprintf("%s %s %d", m, p, code)]
				s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: port, protocol: "http2", ssl: ssl, api: api})
				var wantClient, wantServer float64
				switch {
				case code >= 500:
					wantServer = want
				case code >= 400:
					wantClient = want
				}
				if s.req != want || s.resp != want || s.clientErr != wantClient || s.serverEr != wantServer {
					t.Logf("%s l7_rpc_api rows: %v", role, apis(recs, port, role))
					t.Errorf("%s l7_rpc_api %q: %v, want %v requests and responses, %v client and %v server errors",
						role, api, s, want, wantClient, wantServer)
				}
			}
		}
	}
}
