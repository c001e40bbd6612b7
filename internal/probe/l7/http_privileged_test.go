package l7

import (
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
)

// nginxLocations answer the error paths of the tests.
const nginxLocations = `location = /notfound { return 404; } location = /fail { return 500; }`

// wrkScript makes each wrk thread send exactly args[1] requests, cycling
// through "/", "/notfound" (404) and "/fail" (500), and stop at its last
// response: with one connection per thread no request is in flight when
// wrk stops, so wrk's count is the whole truth. (wrk still runs for its
// -d: the threads stop long before.)
const wrkScript = `
local paths = {"/", "/notfound", "/fail"}
local max, sent, got = 0, 0, 0
function init(args) max = tonumber(args[1]) end
function request()
  sent = sent + 1
  return wrk.format("GET", paths[(sent - 1) % 3 + 1])
end
function response(status, headers, body)
  got = got + 1
  if got >= max then wrk.thread:stop() end
end
`

// startNginx starts nginx (TLS with a test certificate when tls) with the
// error locations, in the test's cgroup.
func (e *env) startNginx(tls bool) *realsrv.Nginx {
	e.t.Helper()
	dir := filepath.Join(e.dir, "nginx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	o := realsrv.NginxOptions{Workers: 2, Locations: nginxLocations}
	if tls {
		ca := testcert.NewCA(e.t, "galago-l7-test-ca")
		o.CertFile, o.KeyFile = testcert.WriteFiles(e.t, dir, "server", ca.Issue(e.t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	}
	n, err := realsrv.StartNginxWith(e.ctx, e.procs, dir, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// nginxRequests is nginx's own request count (stub_status).
func (e *env) nginxRequests(n *realsrv.Nginx) uint64 { return e.nginxCounters(n).Requests }

// nginxCounters are nginx's own counts of accepted connections and
// requests (stub_status).
func (e *env) nginxCounters(n *realsrv.Nginx) realsrv.Counters {
	e.t.Helper()
	c, err := n.Counters(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func sslLabel(tls bool) string {
	if tls {
		return "ssl"
	}
	return "no_ssl"
}

// TestNginxWrkPrivileged: wrk (2 threads, a keep-alive connection each,
// 300 requests each, a third 404 and a third 500) against nginx, plain
// and TLS. On both ends, requests and responses equal wrk's count and
// nginx's stub_status; errors equal the 404s and 500s, split client/server
// per API; the client's mean latency is within 20% of wrk's. The close
// case sends "Connection: close": a new connection per request from each
// of wrk's two threads (latency then includes wrk's connects, and is not
// compared).
func TestNginxWrkPrivileged(t *testing.T) {
	for _, c := range []struct {
		name       string
		tls, close bool
	}{{"no_ssl", false, false}, {"ssl", true, false}, {"close", false, true}} {
		t.Run(c.name, func(t *testing.T) { testNginxWrk(t, c.tls, c.close) })
	}
}

func testNginxWrk(t *testing.T, tls, close bool) {
	const threads, perThread = 2, 300
	const want = threads * perThread
	e := newEnv(t, []string{"http"}, tls, "nginx", "wrk")
	n := e.startNginx(tls)
	script := filepath.Join(e.dir, "count.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(threads), "-d3s", "--latency", "-s", script}
	if close {
		args = append(args, "-H", "Connection: close")
	}
	before := e.nginxCounters(n)
	out := e.run("wrk", append(args, fmt.Sprintf("%s://127.0.0.1:%d/", scheme, n.Port()), "--", strconv.Itoa(perThread))...)
	delta := e.nginxCounters(n).Sub(before)
	truth := delta.Requests
	// A connection per request (and maybe one a stopping thread opened).
	if close && delta.Conns < want {
		t.Fatalf("Connection: close: nginx accepted %d connections for %d requests", delta.Conns, want)
	}
	t.Logf("nginx accepted %d connections", delta.Conns)
	res, err := realsrv.ParseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	// The ground truth agrees with itself, or the test is wrong.
	if res.Requests != want || truth != want || res.Errors != 2*want/3 {
		t.Fatalf("wrk: %v requests, %d non-2xx; nginx: %d requests; want %d, %d non-2xx\n%s", res.Requests, res.Errors, truth, want, 2*want/3, out)
	}
	ssl := sslLabel(tls)
	server := rowMatch{tbl: table.L7Rpc, role: "server", port: n.Port(), protocol: "http", ssl: ssl}
	client := rowMatch{tbl: table.L7Rpc, role: "client", port: n.Port(), protocol: "http", ssl: ssl}
	recs, got := e.check(map[string]expect{"nginx (server)": {m: server, n: want}, "wrk (client)": {m: client, n: want}})
	for k, s := range got {
		if s.errs != 2*want/3 {
			t.Errorf("%s: err_count %v, want %d (404s and 500s)", k, s.errs, 2*want/3)
		}
	}
	for _, role := range []string{"server", "client"} {
		for _, api := range []struct {
			name           string
			client, server float64
		}{{"GET /", 0, 0}, {"GET /notfound", want / 3, 0}, {"GET /fail", 0, want / 3}} {
			s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: n.Port(), protocol: "http", ssl: ssl, api: api.name})
			if s.req != want/3 || s.resp != want/3 || s.clientErr != api.client || s.serverEr != api.server || s.errs != api.client+api.server {
				t.Errorf("%s l7_rpc_api %q: %v; want %d requests, client errors %v, server errors %v", role, api.name, s, want/3, api.client, api.server)
			}
		}
	}
	if c := got["wrk (client)"]; !close && math.Abs(c.latAvgMs()-res.MeanMs) > 0.2*res.MeanMs {
		t.Errorf("wrk's l7_rpc latency_avg %.3f ms, wrk's mean %.3f ms: more than 20%% apart", c.latAvgMs(), res.MeanMs)
	}
	e.checkLost()
}

// pyClient sends n requests to 127.0.0.1:port, one connection each, reads
// each response whole, and exits (os._exit: no cleanup) right after the
// last one. It prints the statuses.
const pyClient = `
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /py HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    print(data.split(b"\r\n", 1)[0].decode(), flush=True)
    if i < n - 1:
        s.close()
os._exit(0)
`

// TestConnPerRequestPrivileged: 30 one-shot curl processes and a Python
// client that opens a connection per request and exits right after its
// last response: every request is counted on both ends, each client's
// rows under its own process.
func TestConnPerRequestPrivileged(t *testing.T) {
	const curls, pyReqs = 30, 10
	e := newEnv(t, []string{"http"}, false, "nginx", "curl", "python3")
	n := e.startNginx(false)
	before := e.nginxRequests(n)
	url := fmt.Sprintf("http://127.0.0.1:%d/curl", n.Port())
	curlPids := map[int]bool{}
	for range curls {
		cmd := exec.CommandContext(e.ctx, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url)
		out, err := e.procs.Run(e.ctx, cmd)
		if cmd.Process != nil {
			e.targets.remember(cmd.Process.Pid)
			curlPids[cmd.Process.Pid] = true
		}
		if err != nil || string(out) != "200" {
			t.Fatalf("curl: %q, %v", out, err)
		}
	}
	script := filepath.Join(e.dir, "client.py")
	if err := os.WriteFile(script, []byte(pyClient), 0o644); err != nil {
		t.Fatal(err)
	}
	py := exec.CommandContext(e.ctx, "python3", script, strconv.Itoa(n.Port()), strconv.Itoa(pyReqs))
	out, err := e.procs.Run(e.ctx, py)
	if py.Process != nil {
		e.targets.remember(py.Process.Pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	if l := lines(out); len(l) != pyReqs || l[0] != "HTTP/1.1 200 OK" {
		t.Fatalf("python client: %q", out)
	}
	if truth := e.nginxRequests(n) - before; truth != curls+pyReqs {
		t.Fatalf("nginx counted %d requests, want %d", truth, curls+pyReqs)
	}
	_, got := e.check(map[string]expect{
		"nginx (server)": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: n.Port(), protocol: "http"}, n: curls + pyReqs},
		"curl (client)":  {m: rowMatch{tbl: table.L7Rpc, role: "client", port: n.Port(), protocol: "http", tgids: curlPids}, n: curls},
		"python (client)": {m: rowMatch{tbl: table.L7Rpc, role: "client", port: n.Port(), protocol: "http",
			tgids: map[int]bool{py.Process.Pid: true}}, n: pyReqs},
	})
	if c := got["curl (client)"]; len(c.tgids) != curls {
		t.Errorf("curl rows under %d processes, want %d", len(c.tgids), curls)
	}
	e.checkLost()
}
