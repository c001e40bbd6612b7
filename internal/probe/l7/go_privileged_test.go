package l7

import (
	"crypto/tls"
	"crypto/x509"
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

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
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
	if ca := os.Getenv("GALAGO_L7_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
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
	srvEnv := []string{helperEnv + "=server"}
	cliEnv := []string{helperEnv + "=client", "GALAGO_L7_N=" + strconv.Itoa(perConn), "GALAGO_L7_CONNS=" + strconv.Itoa(conns)}
	scheme := "http"
	if useTLS {
		ca := testcert.NewCA(t, "galago-l7-test-ca")
		cert, key := testcert.WriteFiles(t, e.dir, "server", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
		srvEnv = append(srvEnv, "GALAGO_L7_CERT="+cert, "GALAGO_L7_KEY="+key)
		cliEnv = append(cliEnv, "GALAGO_L7_CA="+ca.WriteCA(t, e.dir, "ca"))
		scheme = "https"
	}
	srvCmd := exec.Command(exe)
	srvCmd.Env = append(os.Environ(), srvEnv...)
	srv, err := e.procs.Start("go server", srvCmd)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	probetest.WaitFor(t, "the Go server's port", func() bool {
		out := srv.Output.String()
		if i := strings.Index(out, "port "); i >= 0 {
			if j := strings.IndexByte(out[i:], '\n'); j > 0 {
				port, _ = strconv.Atoi(out[i+5 : i+j])
			}
		}
		return port > 0
	})
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
