package dns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestRecordFixtures re-records testdata/*.chunks from a real resolver,
// unbound, serving a local zone on 127.0.0.1 (with a dnsmasq that refuses
// everything as the forwarder of fail.lan, for SERVFAIL), queried by dig
// (UDP and TCP) and Go's resolver, and a hand-written malformed query.
// UDP fixtures are every datagram of all the client's sockets, in order,
// as the server's one socket sees them. Run with GALAGO_L7_RECORD=1
// (needs Debian's unbound, dnsmasq-base and bind9-dnsutils).
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to re-record the fixtures from a real unbound")
	}
	srv := startUnbound(t)
	ub := "unbound " + strings.TrimPrefix(firstLine(run(t, "unbound", "-V")), "Version ")
	digV := firstLine(run(t, "dig", "-v"))
	server := ub + " (local zone example.test, refused.test refused, fail.lan forwarded to a refusing dnsmasq)"

	digUDP := func(name string, args ...string) {
		r := l7test.RecordUDP(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		run(t, "dig", append([]string{"@" + host, "-p", port, "+tries=1", "+time=3"}, args...)...)
		writeFixture(t, name, server+"; client: "+digV+" "+strings.Join(args, " "), r.Segments())
	}
	digUDP("dig-udp", "www.example.test", "A", "db.example.test", "AAAA", "nosuch.example.test", "A",
		"x.refused.test", "A", "x.fail.lan", "A", "-x", "10.0.0.2", "txt.example.test", "TXT", "example.test", "MX",
		"_ldap._tcp.example.test", "SRV", "a1b2c3d4e5f6.session-12345.example.test", "A")
	digUDP("dig-opcodes", "+opcode=status", "www.example.test", "+opcode=notify", "www.example.test", "+opcode=query", "version.bind", "CH", "TXT")
	digUDP("dig-tc", "+noedns", "+ignore", "big.example.test", "TXT")

	// dig over TCP: three queries on one connection.
	{
		r := l7test.Record(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		args := []string{"+tcp", "+keepopen", "www.example.test", "A", "nosuch.example.test", "A", "big.example.test", "TXT"}
		run(t, "dig", append([]string{"@" + host, "-p", port, "+tries=1", "+time=3"}, args...)...)
		writeFixture(t, "dig-tcp", server+"; client: "+digV+" "+strings.Join(args, " "), one(t, r.Connections()))
	}

	// Go's resolver (PreferGo), its connections sent to the recorder.
	goResolver := func(network string, r interface{ Addr() string }) *net.Resolver {
		return &net.Resolver{PreferGo: true, StrictErrors: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.Addr())
		}}
	}
	lookups := func(res *net.Resolver) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = res.LookupHost(ctx, "www.example.test")
		_, _ = res.LookupHost(ctx, "nosuch.example.test")
		_, _ = res.LookupMX(ctx, "example.test")
		_, _, _ = res.LookupSRV(ctx, "ldap", "tcp", "example.test")
		_, _ = res.LookupAddr(ctx, "10.0.0.2")
		_, _ = res.LookupTXT(ctx, "x.fail.lan")
	}
	{
		r := l7test.RecordUDP(t, srv)
		lookups(goResolver("udp", r))
		writeFixture(t, "go-udp", server+"; client: Go "+strings.TrimPrefix(runtimeVersion(), "go")+
			" net.Resolver (PreferGo, UDP): LookupHost www.example.test, LookupHost nosuch.example.test,\n"+
			"LookupMX example.test, LookupSRV ldap tcp example.test, LookupAddr 10.0.0.2, LookupTXT x.fail.lan", r.Segments())
	}
	{
		r := l7test.Record(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = goResolver("tcp", r).LookupTXT(ctx, "big.example.test")
		cancel()
		writeFixture(t, "go-tcp", server+"; client: Go "+strings.TrimPrefix(runtimeVersion(), "go")+
			" net.Resolver (PreferGo, TCP): LookupTXT big.example.test", one(t, r.Connections()))
	}

	// A malformed query (two questions, which unbound answers FORMERR)
	// and a query of a name with a label over 32 bytes, by hand.
	{
		r := l7test.RecordUDP(t, srv)
		c, err := net.Dial("udp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		q := func(id uint16, qd byte, names ...string) []byte {
			b := []byte{byte(id >> 8), byte(id), 0x01, 0x00, 0, qd, 0, 0, 0, 0, 0, 0}
			for _, n := range names {
				for _, l := range strings.Split(n, ".") {
					b = append(b, byte(len(l)))
					b = append(b, l...)
				}
				b = append(b, 0, 0, 1, 0, 1)
			}
			return b
		}
		for _, m := range [][]byte{
			q(0x1234, 2, "www.example.test", "db.example.test"),
			q(0x1235, 1, strings.Repeat("k", 40)+".example.test"),
		} {
			if _, err := c.Write(m); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
		}
		c.Close()
		writeFixture(t, "raw-udp", server+"; client: hand-written queries: www.example.test A and db.example.test A in one message "+
			"(QDCOUNT 2), then kkkk...(40).example.test A", r.Segments())
	}
}

func runtimeVersion() string { return strings.TrimSpace(run(nil, "go", "env", "GOVERSION")) }

func startUnbound(t *testing.T) string {
	dir := t.TempDir()
	refuser := freePort(t, "udp")
	dm := exec.Command("dnsmasq", "--keep-in-foreground", "--no-daemon", "--port="+refuser, "--listen-address=127.0.0.1",
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--user=root", "--pid-file="+filepath.Join(dir, "dm.pid"))
	if err := dm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dm.Process.Kill(); _ = dm.Wait() })
	port := freePort(t, "tcp")
	big := strings.Repeat("x", 200)
	conf := fmt.Sprintf(`server:
  interface: 127.0.0.1
  port: %s
  do-daemonize: no
  use-syslog: no
  logfile: ""
  username: ""
  chroot: ""
  directory: "%s"
  pidfile: "%s/unbound.pid"
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  do-not-query-localhost: no
  qname-minimisation: no
  local-zone: "example.test." static
  local-data: "example.test. 300 IN SOA ns.example.test. admin.example.test. 1 3600 600 86400 300"
  local-data: "www.example.test. 300 IN A 10.0.0.1"
  local-data: "www.example.test. 300 IN AAAA fd00::1"
  local-data: "db.example.test. 300 IN A 10.0.0.2"
  local-data: "db.example.test. 300 IN AAAA fd00::2"
  local-data: 'txt.example.test. 300 IN TXT "hello world"'
  local-data: 'big.example.test. 300 IN TXT "%s" "%s" "%s"'
  local-data: "example.test. 300 IN MX 10 mail.example.test."
  local-data: "_ldap._tcp.example.test. 300 IN SRV 0 0 389 db.example.test."
  local-data-ptr: "10.0.0.2 db.example.test."
  local-zone: "refused.test." refuse
remote-control:
  control-enable: no
forward-zone:
  name: "fail.lan."
  forward-addr: 127.0.0.1@%s
`, port, dir, dir, big, big, big, refuser)
	path := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "unbound-checkconf", path)
	cmd := exec.Command("unbound", "-d", "-c", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("unbound did not start")
	return ""
}

func freePort(t *testing.T, network string) string {
	var addr string
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = pc.LocalAddr().String()
		pc.Close()
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	_, port, _ := net.SplitHostPort(addr)
	return port
}

func run(t *testing.T, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil && t != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func one(t *testing.T, conns [][]l7test.Segment) []l7test.Segment {
	if len(conns) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(conns))
	}
	return conns[0]
}

func writeFixture(t *testing.T, name, comment string, segs []l7test.Segment) {
	if len(segs) == 0 {
		t.Fatalf("%s: nothing recorded", name)
	}
	f, err := os.Create(filepath.Join("testdata", name+".chunks"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := l7test.Write(f, comment, segs); err != nil {
		t.Fatal(err)
	}
}
