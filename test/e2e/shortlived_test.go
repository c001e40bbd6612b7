package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the bytes its connections read and wrote: the
// server side's ground truth of what clients sent and received.
type countingListener struct {
	net.Listener
	read, written atomic.Int64
	conns         atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
	}
	return &countingConn{Conn: c, l: l}, err
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.written.Add(int64(n))
	return n, err
}

// pythonClient opens n connections one after another: sends up bytes,
// reads down bytes, closes; and exits right after the last one.
const pythonClient = `
import socket, sys
port, n, up, down = (int(a) for a in sys.argv[1:5])
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"u" * up)
    got = 0
    while got < down:
        b = s.recv(65536)
        if not b:
            raise SystemExit("short read")
        got += len(b)
    s.close()
`

// TestShortLivedProcessesObserved: with proc_name snoopers, processes that
// start after the PUT and live for one request (curl) or exit right after
// their last connection (a Python client) are observed from their first
// connection to their last: tcp_link bytes and endpoint_tcp active opens
// equal what the servers counted, exactly, and nothing is reported lost.
func TestShortLivedProcessesObserved(t *testing.T) {
	requireE2E(t)
	for _, tool := range []string{"curl", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: %v", tool, err)
		}
	}
	d := startDaemon(t, daemonOpts{})
	snoopers := `{"proc_name":[{"comm":"^curl$"},{"comm":"^python3$","cmdline":"galago-shortlived"}]}`
	for feature, item := range map[string]string{"tcp": "tcp_stats", "socket": "tcp_socket"} {
		body := fmt.Sprintf(`{"cmd":{"probe":[%q]},"snoopers":%s,"params":{"report_period":5},"state":"running"}`, item, snoopers)
		if code, reply := d.put(feature, body); code != http.StatusOK {
			t.Fatalf("PUT /%s: %d %s", feature, code, reply)
		}
	}
	time.Sleep(time.Second) // probes attached

	// curl: an HTTP server counting its bytes; 20 POSTs, one process each.
	httpLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := &countingListener{Listener: httpLn}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "got %d bytes\n", n)
	})}
	go srv.Serve(hl)
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(body, []byte(strings.Repeat("x", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	const curls = 20
	httpPort := httpLn.Addr().(*net.TCPAddr).Port
	for i := 0; i < curls; i++ {
		out, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-H", "Connection: close",
			"--data-binary", "@"+body, fmt.Sprintf("http://127.0.0.1:%d/", httpPort)).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v %s", err, out)
		}
	}

	// Python: a raw server; one process making 200 connections, exiting
	// right after the last.
	rawLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &countingListener{Listener: rawLn}
	defer rl.Close()
	const pyConns, up, down = 200, 3000, 700
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := rl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := io.CopyN(io.Discard, c, up); err != nil {
					return
				}
				_, _ = c.Write(make([]byte, down))
			}()
		}
	}()
	rawPort := rawLn.Addr().(*net.TCPAddr).Port
	py := exec.Command("/usr/bin/python3", "-c", pythonClient, fmt.Sprint(rawPort), fmt.Sprint(pyConns), fmt.Sprint(up), fmt.Sprint(down), "galago-shortlived")
	if out, err := py.CombinedOutput(); err != nil {
		t.Fatalf("python client: %v %s", err, out)
	}
	wg.Wait()
	if hl.conns.Load() != curls || rl.conns.Load() != pyConns {
		t.Fatalf("servers accepted %d and %d connections, want %d and %d", hl.conns.Load(), rl.conns.Load(), curls, pyConns)
	}

	pyTgid := fmt.Sprintf(`tgid="%d"`, py.Process.Pid)
	hport, rport := fmt.Sprintf(`server_port="%d"`, httpPort), fmt.Sprintf(`server_port="%d"`, rawPort)
	type check struct {
		name   string
		family string
		want   float64
		labels []string
		s      *seriesTotals
	}
	checks := []*check{
		{"curl tx_bytes", "gala_gopher_tcp_link_tx_bytes", float64(hl.read.Load()), []string{`comm="curl"`, `role="client"`, hport}, newSeriesTotals()},
		{"curl rx_bytes", "gala_gopher_tcp_link_rx_bytes", float64(hl.written.Load()), []string{`comm="curl"`, `role="client"`, hport}, newSeriesTotals()},
		{"curl active_open", "gala_gopher_endpoint_tcp_active_open", curls, []string{`comm="curl"`, hport}, newSeriesTotals()},
		{"python tx_bytes", "gala_gopher_tcp_link_tx_bytes", pyConns * up, []string{pyTgid, `role="client"`, rport}, newSeriesTotals()},
		{"python rx_bytes", "gala_gopher_tcp_link_rx_bytes", pyConns * down, []string{pyTgid, `role="client"`, rport}, newSeriesTotals()},
		{"python active_open", "gala_gopher_endpoint_tcp_active_open", pyConns, []string{pyTgid, rport}, newSeriesTotals()},
	}
	scrape := func() string {
		expo := d.scrape()
		for _, c := range checks {
			c.s.add(t, expo, c.family, c.labels...)
		}
		return expo
	}
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		scrape()
		done := true
		for _, c := range checks {
			done = done && c.s.sum() >= c.want
		}
		if done {
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(6 * time.Second) // one more period: nothing counted twice
	expo := scrape()
	for _, c := range checks {
		if got := c.s.sum(); got != c.want {
			t.Errorf("%s = %v, want %v (series %v)", c.name, got, c.want, c.s.total)
		}
	}
	if t.Failed() {
		t.Logf("python pid %d; last exposition of tcp_link tx_bytes and endpoint_tcp active_open:\n%s\n%s", py.Process.Pid,
			strings.Join(samples(expo, "gala_gopher_tcp_link_tx_bytes"), "\n"),
			strings.Join(samples(expo, "gala_gopher_endpoint_tcp_active_open"), "\n"))
	}
	// Every curl process has its own rows: 20 tgids.
	tgids := map[string]bool{}
	for key := range checks[0].s.total {
		for _, l := range strings.Split(strings.Trim(key, "{}"), ",") {
			if strings.HasPrefix(l, "tgid=") {
				tgids[l] = true
			}
		}
	}
	if len(tgids) != curls {
		t.Errorf("curl rows of %d processes, want %d", len(tgids), curls)
	}
	for _, l := range samples(expo, "galago_probe_events_lost_total") {
		if !strings.HasSuffix(l, " 0") {
			t.Errorf("loss reported: %s", l)
		}
	}
	// Only the snooped processes: no row of this test process or the servers.
	self := fmt.Sprintf(`tgid="%d"`, os.Getpid())
	for _, l := range samples(expo, "gala_gopher_tcp_link_tx_bytes") {
		if strings.Contains(l, self) {
			t.Errorf("series of an unobserved process: %s", l)
		}
	}
}
