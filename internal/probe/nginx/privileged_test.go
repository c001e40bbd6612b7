package nginx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// streamModule is Debian's nginx stream module (libnginx-mod-stream).
const streamModule = "/usr/lib/nginx/modules/ngx_stream_module.so"

// countingListener counts the connections a test upstream accepted and
// the requests it served: the ground truth of how many links nginx made
// to it.
type countingListener struct {
	net.Listener
	accepts, requests atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
	}
	return c, err
}

func listen(t *testing.T) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &countingListener{Listener: l}
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// httpUpstream answers every request "ok" and counts them: nginx keeps
// its upstream connections alive, so requests, not connections, are how
// many client connections it linked to the upstream.
func httpUpstream(t *testing.T) *countingListener {
	l := listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		l.requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l
}

// echoUpstream echoes one line per connection.
func echoUpstream(t *testing.T) *countingListener {
	l := listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = io.WriteString(c, line)
				}
			}()
		}
	}()
	return l
}

// TestNginxLinkPrivileged: Debian's nginx proxies HTTP (L7) and TCP
// stream (L4) connections round-robin to two upstreams each, all on
// loopback. Each client connection makes one request (one line echoed);
// the links per upstream server equal the connections that server
// accepted, with the client, virtual (nginx's listening) and server
// addresses and is_l7 right.
func TestNginxLinkPrivileged(t *testing.T) {
	probetest.RequireTools(t, "nginx")
	if _, err := os.Stat(streamModule); err != nil {
		t.Fatalf("Debian's libnginx-mod-stream is needed: %v", err)
	}
	const nHTTP, nStream = 7, 5
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hA, hB, sC, sD := httpUpstream(t), httpUpstream(t), echoUpstream(t), echoUpstream(t)
	httpPort, err := realsrv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	streamPort, err := realsrv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	h2Port, err := realsrv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf(`load_module %[1]s;
daemon off; worker_processes 1; pid %[2]s/nginx.pid; error_log %[2]s/error.log;
events { worker_connections 1024; }
http {
  access_log off; client_body_temp_path %[2]s; proxy_temp_path %[2]s; fastcgi_temp_path %[2]s;
  uwsgi_temp_path %[2]s; scgi_temp_path %[2]s;
  upstream up { server 127.0.0.1:%[4]d; server 127.0.0.1:%[5]d; keepalive 4; }
  server { listen 127.0.0.1:%[3]d; location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:%[9]d http2; location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
stream {
  upstream sup { server 127.0.0.1:%[7]d; server 127.0.0.1:%[8]d; }
  server { listen 127.0.0.1:%[6]d; proxy_pass sup; }
}
`, streamModule, dir, httpPort, port(hA), port(hB), streamPort, port(sC), port(sD), h2Port)
	if err := realsrv.WriteFile(filepath.Join(dir, "nginx.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	procs := realsrv.NewProcs()
	defer procs.StopAll()
	ngx, err := procs.Start("nginx", exec.Command("nginx", "-c", filepath.Join(dir, "nginx.conf"), "-p", dir))
	if err != nil {
		t.Fatal(err)
	}
	// The master opens every listener before it starts the worker, so the
	// stream port listens once the http port answers; a connection to it
	// would be proxied and make a link of its own.
	if err := realsrv.WaitTCP(ctx, httpPort, "nginx"); err != nil {
		t.Fatalf("%v\n%s", err, ngx.Output.String())
	}

	p := New()
	p.reportEvery = time.Hour // reported by the test
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	probetest.WaitFor(t, "the uprobes on nginx and its stream module", func() bool {
		f := p.attachedFuncs()
		return len(f) == len(hooks)
	})

	// The clients' ports: each connection is a row of its own.
	httpPorts, streamPorts := &dialedPorts{}, &dialedPorts{}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: httpPorts.dial}}
	for i := range nHTTP {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/r%d", httpPort, i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	for i := range nStream {
		c, err := streamPorts.dial(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(streamPort))
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("line %d\n", i)
		_, _ = io.WriteString(c, msg)
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || got != msg {
			t.Fatalf("stream connection %d: %q %v", i, got, err)
		}
	}
	// Other nginx processes on the host are observed too: only this
	// nginx's listening ports are looked at.
	ours := map[uint16]bool{uint16(httpPort): true, uint16(streamPort): true, uint16(h2Port): true}
	probetest.WaitFor(t, "every link closed", func() bool {
		return p.closedLinks(ours) == nHTTP+nStream && p.openConns(ours) == 0
	})
	var rows map[rowKey]uint64
	p.onFlush = func(r map[rowKey]uint64) {
		rows = map[rowKey]uint64{}
		for k, n := range r {
			if ours[k.virtual.Port()] {
				rows[k] = n
			}
		}
	}
	p.report()

	lo := netip.MustParseAddr("127.0.0.1")
	want := map[rowKey]uint64{}
	for _, u := range []struct {
		n     int64
		l     *countingListener
		front int
		l7    bool
	}{{hA.requests.Load(), hA, httpPort, true}, {hB.requests.Load(), hB, httpPort, true},
		{sC.accepts.Load(), sC, streamPort, false}, {sD.accepts.Load(), sD, streamPort, false}} {
		if u.n > 0 {
			want[rowKey{client: lo, virtual: netip.AddrPortFrom(lo, uint16(u.front)), server: netip.AddrPortFrom(lo, uint16(port(u.l))), l7: u.l7}] = uint64(u.n)
		}
	}
	if hA.requests.Load()+hB.requests.Load() != nHTTP || sC.accepts.Load()+sD.accepts.Load() != nStream {
		t.Fatalf("upstreams served %d+%d http requests and accepted %d+%d stream connections, want %d and %d",
			hA.requests.Load(), hB.requests.Load(), sC.accepts.Load(), sD.accepts.Load(), nHTTP, nStream)
	}
	// nginx reused its upstream connections: the kept-alive path
	// (ngx_event_connect_peer answering NGX_DONE) is the one measured.
	if hA.accepts.Load()+hB.accepts.Load() >= nHTTP {
		t.Errorf("upstreams accepted %d connections for %d requests: nginx kept none alive", hA.accepts.Load()+hB.accepts.Load(), nHTTP)
	}
	// A row per client connection (its port), link_count 1; summed per
	// upstream, the connections each upstream served.
	perLink := map[rowKey]uint64{}
	for k, n := range rows {
		dialed := httpPorts
		if !k.l7 {
			dialed = streamPorts
		}
		if n != 1 || !dialed.has(k.clientPort) {
			t.Errorf("row %+v: %d, want 1 for a client port of %v", k, n, dialed.list())
		}
		k.clientPort = 0
		perLink[k] += n
	}
	if len(rows) != nHTTP+nStream {
		t.Errorf("%d rows, want one per client connection (%d)", len(rows), nHTTP+nStream)
	}
	if !equal(perLink, want) {
		t.Errorf("links per upstream %v, want %v", perLink, want)
	}
	var recs []*table.Record
	for _, r := range rt.Records() {
		if r.Table != table.NginxLink {
			t.Fatalf("record of %s", r.Table.Name)
		}
		if pt, _ := strconv.Atoi(r.Str("virtual_port")); ours[uint16(pt)] {
			recs = append(recs, r)
		}
	}
	if len(recs) != len(rows) {
		t.Fatalf("%d records, want %d", len(recs), len(rows))
	}
	for _, r := range recs {
		cp, _ := strconv.Atoi(r.Str("client_port"))
		if r.Str("client_ip") != "127.0.0.1" || (!httpPorts.has(uint16(cp)) && !streamPorts.has(uint16(cp))) {
			t.Errorf("record %v", r.Labels())
		}
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
	// The next period has nothing: every link closed in this one.
	p.report()
	if len(rows) != 0 {
		t.Errorf("next period %v", rows)
	}

	// One kept-alive client connection, HTTP/1.1 and then HTTP/2 (h2c,
	// whose streams are connections of their own inside nginx with the
	// client's fd), whose requests nginx spreads over both upstreams: one
	// link to each upstream that served one of them.
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	for _, c := range []struct {
		name  string
		front int
		major int
		tr    *http.Transport
	}{
		{"HTTP/1.1", httpPort, 1, &http.Transport{MaxConnsPerHost: 1}},
		{"HTTP/2", h2Port, 2, &http.Transport{MaxConnsPerHost: 1, Protocols: &h2}},
	} {
		dialed := &dialedPorts{}
		c.tr.DialContext = dialed.dial
		before := []int64{hA.requests.Load(), hB.requests.Load()}
		client = &http.Client{Transport: c.tr}
		for i := range 4 {
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/k%d", c.front, i))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != c.major {
				t.Fatalf("%s: answered over %s", c.name, resp.Proto)
			}
		}
		c.tr.CloseIdleConnections()
		if len(dialed.list()) != 1 {
			t.Fatalf("%s: %d client connections, want 1", c.name, len(dialed.list()))
		}
		want = map[rowKey]uint64{}
		for i, u := range []*countingListener{hA, hB} {
			if u.requests.Load() > before[i] {
				want[rowKey{client: lo, clientPort: dialed.list()[0], virtual: netip.AddrPortFrom(lo, uint16(c.front)), server: netip.AddrPortFrom(lo, uint16(port(u))), l7: true}] = 1
			}
		}
		probetest.WaitFor(t, c.name+": the kept-alive connection closed", func() bool {
			return p.closedLinks(ours) == uint64(len(want)) && p.openConns(ours) == 0
		})
		p.report()
		if len(want) != 2 || !equal(rows, want) {
			t.Errorf("%s kept-alive connection: links %v, want one to each of the two upstreams %v", c.name, rows, want)
		}
	}
}

// TestNginxElfPathPrivileged: elf_path names the binary to attach to; a
// file that is not nginx is refused at start and at reconfiguration,
// naming the file and the missing symbols, and changes nothing.
func TestNginxElfPathPrivileged(t *testing.T) {
	probetest.RequireTools(t, "nginx", "true")
	nginxBin, _ := exec.LookPath("nginx")
	notNginx, _ := exec.LookPath("true")
	cfg := probe.Config{Params: probe.DefaultParams()}

	cfg.Params.ElfPath = notNginx
	p := New()
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	err := p.Start(rt.Context(), cfg, rt)
	if err == nil || !strings.Contains(err.Error(), "elf_path "+notNginx) || !strings.Contains(err.Error(), "ngx_event_connect_peer") {
		t.Fatalf("start with elf_path %s: %v", notNginx, err)
	}

	cfg.Params.ElfPath = nginxBin
	p = New()
	rt = probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	f := p.attachedFuncs()
	if !f["ngx_event_connect_peer"] || !f["ngx_close_connection"] || !f["ngx_http_upstream_init"] {
		t.Fatalf("attached %v", f)
	}
	bad := cfg
	bad.Params.ElfPath = notNginx
	if err := p.Reconfigure(bad); err == nil || !strings.Contains(err.Error(), notNginx) {
		t.Fatalf("reconfigure with elf_path %s: %v", notNginx, err)
	}
	p.mu.Lock()
	kept := p.cfg.Params.ElfPath
	p.mu.Unlock()
	if kept != nginxBin {
		t.Fatalf("elf_path %q after a refused change, want %q", kept, nginxBin)
	}
}

// dialedPorts are the local ports of the connections a client dialed.
type dialedPorts struct {
	mu    sync.Mutex
	ports []uint16
}

func (d *dialedPorts) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.ports = append(d.ports, uint16(c.LocalAddr().(*net.TCPAddr).Port))
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialedPorts) list() []uint16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ports)
}

func (d *dialedPorts) has(port uint16) bool { return slices.Contains(d.list(), port) }
