package memcached

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

// TestRecordFixtures re-records testdata/*.chunks from a real memcached
// with the libmemcached tools (memcslap, memcstat, memccp, memccat) and
// hand-written text sessions (one command per write, as typed). Run with
// GALAGO_L7_RECORD=1 (needs Debian's memcached and libmemcached-tools).
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to re-record the fixtures from a real memcached")
	}
	srv := startMemcached(t)
	small := startMemcached(t, "-I", "1k", "-o", "slab_chunk_max=512") // items of 1 KiB at most: SERVER_ERROR object too large
	version := "memcached " + strings.TrimPrefix(strings.TrimSpace(run(t, "memcached", "-V")), "memcached ")
	slapVersion := strings.TrimSpace(strings.Split(run(t, "memcslap", "--version"), "\n")[0])

	session := func(name, upstream, what string, lines ...string) {
		r := l7test.Record(t, upstream)
		c := dial(t, r.Addr())
		for _, l := range lines {
			c.do(l)
		}
		c.close()
		writeFixture(t, name, version+" "+what+"; client: hand-written text session, one write each:\n"+indent(strings.Join(lines, "")), one(t, r.Connections()))
	}
	session("text", srv, "(-U 0)",
		"version\r\n",
		"set user:1 0 0 5\r\nalice\r\n",
		"set user:2 42 3600 3\r\nbob\r\n",
		"get user:1 user:2 user:3\r\n",
		"gets user:1\r\n",
		"cas user:1 0 0 3 1\r\nnew\r\n",
		"cas nosuch 0 0 1 1\r\nx\r\n",
		"add user:1 0 0 1\r\nx\r\n",
		"replace user:2 0 0 5\r\ncarol\r\n",
		"append user:2 0 0 1\r\n!\r\n",
		"prepend user:2 0 0 1\r\n@\r\n",
		"set counter 0 0 1\r\n5\r\n",
		"incr counter 10\r\n",
		"decr counter 3\r\n",
		"incr user:2 1\r\n",
		"touch user:1 100\r\n",
		"gat 200 user:1\r\n",
		"gats 300 user:2 nosuch\r\n",
		"delete user:1\r\n",
		"delete user:1\r\n",
		"set quiet 0 0 2 noreply\r\nhi\r\n",
		"incr counter 1 noreply\r\n",
		"touch quiet 10 noreply\r\n",
		"delete quiet noreply\r\n",
		"get counter\n",
		"stats\r\n",
		"stats slabs\r\n",
		"stats settings\r\n",
		"stats reset\r\n",
		"lru_crawler metadump all\r\n",
		"verbosity 1\r\n",
		"bogus command\r\n",
		"set bad 0 0 notanumber\r\n",
		"flush_all noreply\r\n",
		"flush_all\r\n",
		"quit\r\n")
	session("meta", srv, "(-U 0)",
		"ms m1 5 T0 F3\r\nhello\r\n",
		"mg m1 v f t\r\n",
		"mg missing v\r\n",
		"mg m1 s k c Oabc\r\n",
		"ma n1 N0 J7 v\r\n",
		"ma n1 v\r\n",
		"ma n1 MD D2\r\n",
		"md m1\r\n",
		"md m1\r\n",
		"me n1\r\n",
		"mn\r\n",
		// a quiet pipeline in one write, closed by mn: only what is not
		// left out comes back
		"ms q1 2 q\r\nhi\r\nmg q1 v q O1\r\nmg missing v q O2\r\nmd missing q O3\r\nma q1 q O4\r\nmn\r\n",
		"mg\r\n")
	session("too-large", small, "(-U 0 -I 1k -o slab_chunk_max=512)",
		"set big 0 0 2000\r\n"+strings.Repeat("x", 2000)+"\r\n",
		"get big\r\n",
		"set ok 0 0 2\r\nok\r\n")
	{
		val := strings.Repeat("v", 20000)
		var mset, mget strings.Builder
		mget.WriteString("get")
		for i := range 10 {
			fmt.Fprintf(&mset, "set k%d 0 0 3000\r\n%s\r\n", i, strings.Repeat(string(rune('a'+i)), 3000))
			fmt.Fprintf(&mget, " k%d", i)
		}
		mget.WriteString("\r\n")
		session("big", srv, "(-U 0)",
			"set big 0 0 20000\r\n"+val+"\r\n",
			"get big\r\n",
			mset.String(),
			mget.String(),
			"delete big\r\n")
	}
	{
		// watch: OK, then a log line per mutation made elsewhere
		r := l7test.Record(t, srv)
		w := dial(t, r.Addr())
		w.do("watch mutations\r\n")
		o := dial(t, srv)
		o.do("set w 0 0 1\r\n1\r\n")
		o.do("delete w\r\n")
		o.close()
		w.wait()
		w.close()
		writeFixture(t, "watch", version+" (-U 0); client: hand-written: watch mutations, then another connection: set w, delete w", one(t, r.Connections()))
	}

	// libmemcached's tools; memcslap loads its keys on a connection of
	// its own before a get test: the fixture is the connection whose
	// first command is the test's.
	tool := func(first, name string, args ...string) []l7test.Segment {
		r := l7test.Record(t, srv)
		all := append([]string{"--servers=" + r.Addr()}, args...)
		if name == "memcslap" {
			all = append([]string{"-s", r.Addr()}, args...)
		}
		run(t, name, all...)
		var got []l7test.Segment
		for _, c := range r.Connections() {
			if len(c) > 0 && c[0].FromClient && strings.HasPrefix(string(c[0].Data), first) {
				got = c
			}
		}
		return got
	}
	writeFixture(t, "memcstat", version+"; client: memcstat ("+slapVersion+")", tool("", "memcstat"))
	writeFixture(t, "memccp", version+"; client: memccp f1.txt ("+slapVersion+")", tool("set", "memccp", writeFile(t, "f1.txt", "hello\n")))
	writeFixture(t, "memccat", version+"; client: memccat f1.txt nosuch ("+slapVersion+")", tool("get", "memccat", "f1.txt", "nosuch"))
	for _, s := range []struct{ name, first, args string }{
		{"slap-set", "set", "-t set -e 10 -c 1"},
		{"slap-get", "get", "-t get -e 10 -c 1"},
		{"slap-mget", "get", "-t mget -e 10 -c 1"},
		{"slap-set-buffered", "set", "-t set -e 10 -c 1 -B"},
		{"slap-binary", "\x80", "-t set -e 5 -c 1 -b"},
	} {
		writeFixture(t, s.name, version+"; client: "+slapVersion+" "+s.args+" (the test's connection)", tool(s.first, "memcslap", strings.Fields(s.args)...))
	}
}

func startMemcached(t *testing.T, extra ...string) string {
	port := freePort(t)
	cmd := exec.Command("memcached", append([]string{"-u", "root", "-l", "127.0.0.1", "-p", port, "-U", "0"}, extra...)...)
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
	t.Fatal("memcached did not start")
	return ""
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// run runs a client in dir (where memccp reads its files); memccat
// fails on a missing key, which its fixture asks for.
func run(t *testing.T, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = filesDir
	out, err := cmd.CombinedOutput()
	if err != nil && name != "memccat" {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// filesDir holds the files memccp stores (named by their base name).
var filesDir = os.TempDir()

func writeFile(t *testing.T, name, content string) string {
	if err := os.WriteFile(filepath.Join(filesDir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func one(t *testing.T, conns [][]l7test.Segment) []l7test.Segment {
	if len(conns) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(conns))
	}
	return conns[0]
}

func indent(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\r\n", "\\r\\n ")
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	var b strings.Builder
	for len(s) > 100 {
		i := strings.LastIndexByte(s[:100], ' ')
		if i <= 0 {
			i = 100
		}
		b.WriteString("  " + s[:i] + "\n")
		s = s[i:]
	}
	b.WriteString("  " + s)
	return b.String()
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

// rawClient writes and then reads until the server has been quiet for a
// while, so that each response is in before the next command.
type rawClient struct {
	t *testing.T
	c net.Conn
}

func dial(t *testing.T, addr string) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &rawClient{t: t, c: c}
}

func (c *rawClient) do(b string) {
	if _, err := c.c.Write([]byte(b)); err != nil {
		c.t.Fatal(err)
	}
	c.wait()
}

func (c *rawClient) wait() {
	buf := make([]byte, 64<<10)
	for {
		_ = c.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.c.Read(buf); err != nil {
			return
		}
	}
}

func (c *rawClient) close() {
	c.c.Close()
	time.Sleep(50 * time.Millisecond)
}
