package l7

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

// helperEnv makes the test binary a Go HTTP/1.1 server or client of the
// Go tests (re-executed in the test's cgroup): "server" or "client".
const helperEnv = "GALAGO_L7_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "server":
		err := goServer()
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	case "client":
		if err := goClient(); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	default:
		if h, ok := helpers[os.Getenv(helperEnv)]; ok {
			if err := h(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", os.Getenv(helperEnv), err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(2)
}

// goServer serves HTTP/1.1 (TLS with GALAGO_L7_CERT and GALAGO_L7_KEY)
// on a loopback port it prints, until killed.
func goServer() error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "hello from galago's test server\n")
		}),
		// HTTP/1.1 only, TLS included (no h2 by ALPN).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if cert := os.Getenv("GALAGO_L7_CERT"); cert != "" {
		return srv.ServeTLS(ln, cert, os.Getenv("GALAGO_L7_KEY"))
	}
	return srv.Serve(ln)
}

// goClient sends GALAGO_L7_N requests over each of GALAGO_L7_CONNS
// keep-alive connections to GALAGO_L7_URL (trusting GALAGO_L7_CA), reads
// every response whole, and exits.
func goClient() error {
	n, _ := strconv.Atoi(os.Getenv("GALAGO_L7_N"))
	conns, _ := strconv.Atoi(os.Getenv("GALAGO_L7_CONNS"))
	tr := &http.Transport{MaxIdleConnsPerHost: conns, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	var err error
	if tr.TLSClientConfig, err = clientTLS(); err != nil {
		return err
	}
	url := os.Getenv("GALAGO_L7_URL")
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: tr}
			for i := range n {
				resp, err := c.Post(fmt.Sprintf("%s/items/%d", url, i%2), "text/plain", strings.NewReader("ping"))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %s", resp.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestGoHTTPPrivileged: a Go HTTP/1.1 server and client (this test binary,
// re-executed), plain and TLS (Go crypto/tls uprobes): 2 keep-alive
// connections of 150 requests each, counted exactly on both ends.
func TestGoHTTPPrivileged(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(sslLabel(tls), func(t *testing.T) { testGoHTTP(t, tls) })
	}
}

func testGoHTTP(t *testing.T, useTLS bool) {
	const conns, perConn = 2, 150
	const want = conns * perConn
	e := newEnv(t, []string{"http"}, useTLS)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cliEnv := []string{helperEnv + "=client", "GALAGO_L7_N=" + strconv.Itoa(perConn), "GALAGO_L7_CONNS=" + strconv.Itoa(conns)}
	var srvEnv []string
	scheme := "http"
	if useTLS {
		var cliTLS []string
		srvEnv, cliTLS = e.tlsFiles()
		cliEnv = append(cliEnv, cliTLS...)
		scheme = "https"
	}
	_, port := e.startHelper("server", srvEnv...)
	if useTLS {
		// The probe scans the server's executable (this binary, which the
		// client runs too) for crypto/tls.
		e.waitAttached("go crypto/tls", "")
	}
	cliCmd := exec.CommandContext(e.ctx, exe)
	cliCmd.Env = append(os.Environ(), append(cliEnv, fmt.Sprintf("GALAGO_L7_URL=%s://127.0.0.1:%d", scheme, port))...)
	start := time.Now()
	if out, err := e.procs.Run(e.ctx, cliCmd); err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	e.targets.remember(cliCmd.Process.Pid)
	t.Logf("client ran %v", time.Since(start))
	ssl := sslLabel(useTLS)
	recs, _ := e.check(map[string]expect{
		"go server": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: port, protocol: "http", ssl: ssl}, n: want},
		"go client": {m: rowMatch{tbl: table.L7Rpc, role: "client", port: port, protocol: "http", ssl: ssl}, n: want},
	})
	for _, role := range []string{"server", "client"} {
		if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: port, protocol: "http", ssl: ssl, api: "POST /items/{id}"}); s.req != want {
			t.Logf("%s l7_rpc_api rows: %v", role, apis(recs, port, role))
			t.Errorf("%s l7_rpc_api POST /items/{id}: %v, want %d requests", role, s, want)
		}
	}
	e.checkLost()
}

// apis lists the api values of the l7_rpc_api rows of a port and role.
func apis(recs []*table.Record, port int, role string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if r.Table == table.L7RpcApi && r.Str("server_port") == strconv.Itoa(port) && r.Str("l7_role") == role && !seen[r.Str("api")] {
			seen[r.Str("api")] = true
			out = append(out, r.Str("api"))
		}
	}
	return out
}
