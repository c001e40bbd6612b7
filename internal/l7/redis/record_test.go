package redis

import (
	"bufio"
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

// TestRecordFixtures re-records testdata/*.chunks from a real redis-server
// with real clients (redis-cli, redis-benchmark) and, where a conversation
// needs precise timing or a second connection (pub/sub, tracking, typed
// inline commands), a hand-written client speaking raw RESP. Run with
// GALAGO_L7_RECORD=1 (needs Debian's redis-server and redis-tools).
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to re-record the fixtures from a real redis-server")
	}
	srv := startRedis(t)
	version := strings.TrimSpace(run(t, "", "redis-server", "--version"))
	cli := func(args ...string) string {
		return fmt.Sprintf("%s; client: redis-cli %s", version, strings.Join(args, " "))
	}

	// redis-cli reading commands from stdin: one connection, one command
	// at a time.
	cliFixture := func(name string, flags []string, cmds string) {
		r := l7test.Record(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		args := append([]string{"-h", host, "-p", port}, flags...)
		run(t, cmds, "redis-cli", args...)
		writeFixture(t, name, cli(flags...)+" < commands:\n"+indent(cmds), one(t, r.Connections()))
	}
	cliFixture("basic", nil, `PING
SET user:1 alice
GET user:1
GET nosuchkey
INCR counter
LPUSH list a b c
LRANGE list 0 -1
HSET h f1 v1 f2 v2
HGETALL h
CONFIG GET maxmemory
CLIENT SETNAME app1
CLIENT GETNAME
XADD s 1-1 f v
XINFO STREAM s
DEL user:1 list h s counter
`)
	cliFixture("resp3", []string{"-3"}, `HSET h a 1 b 2
HGETALL h
SADD s x y
SMEMBERS s
ZADD z 1.5 m
ZSCORE z m
GET nosuch
EXISTS h
DEBUG PROTOCOL verbatim
DEBUG PROTOCOL true
DEBUG PROTOCOL push
DEL h s z
`)

	// A hand-written client, one command per write: errors of both
	// kinds, transactions, every RESP3 type.
	rawFixture := func(name string, cmds ...string) {
		r := l7test.Record(t, srv)
		c := dial(t, r.Addr())
		for _, cmd := range cmds {
			c.do(cmd)
		}
		c.close()
		writeFixture(t, name, version+"; client: hand-written RESP client, one command per write:\n"+indent(strings.Join(cmds, "\n")), one(t, r.Connections()))
	}
	rawFixture("errors", "FOO bar", "GET", "SET k v", "INCR k", "LPUSH l x", "GET l", "CONFIG SET maxmemory 1", "SET other v",
		"CONFIG SET maxmemory 0", "EVAL return(redis.call('nosuch')) 0", "SCRIPT KILL", "DEL k l")
	rawFixture("multi", "MULTI", "SET m 1", "INCR m", "LPUSH m x", "GET m", "EXEC", "MULTI", "SET m 2", "GETT m", "EXEC", "DEL m")
	rawFixture("resp3-types", "HELLO 3", "DEBUG PROTOCOL string", "DEBUG PROTOCOL integer", "DEBUG PROTOCOL double",
		"DEBUG PROTOCOL bignum", "DEBUG PROTOCOL null", "DEBUG PROTOCOL array", "DEBUG PROTOCOL set", "DEBUG PROTOCOL map",
		"DEBUG PROTOCOL attrib", "DEBUG PROTOCOL push", "DEBUG PROTOCOL verbatim", "DEBUG PROTOCOL true", "DEBUG PROTOCOL false",
		"HELLO 2", "DEBUG PROTOCOL map", "DEBUG PROTOCOL null")

	// redis-benchmark opens one connection per test (and one to read the
	// server's configuration): each pipelined test's connection is a
	// fixture.
	{
		r := l7test.Record(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		args := []string{"-h", host, "-p", port, "-n", "64", "-c", "1", "-P", "16", "-t", "set,get"}
		run(t, "", "redis-benchmark", args...)
		var set, get []l7test.Segment
		for _, c := range r.Connections() {
			if len(c) > 0 && strings.Contains(string(c[0].Data), "SET") {
				set = c
			} else if len(c) > 0 && strings.Contains(string(c[0].Data), "GET\r\n$16\r\nkey:") {
				get = c
			}
		}
		comment := version + "; client: redis-benchmark " + strings.Join(args[4:], " ")
		writeFixture(t, "bench-set", comment+" (the SET connection)", set)
		writeFixture(t, "bench-get", comment+" (the GET connection)", get)
	}
	{
		r := l7test.Record(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		args := []string{"-h", host, "-p", port, "-n", "32", "-c", "1", "-P", "16", "-d", "3000", "-t", "set"}
		run(t, "", "redis-benchmark", args...)
		var set []l7test.Segment
		for _, c := range r.Connections() {
			if len(c) > 0 && strings.Contains(string(c[0].Data), "SET") {
				set = c
			}
		}
		writeFixture(t, "bench-set-d3000", version+"; client: redis-benchmark "+strings.Join(args[4:], " ")+" (the SET connection)", set)
	}

	// A RESP2 subscriber (raw client through the proxy) and a publisher
	// straight to the server.
	{
		r := l7test.Record(t, srv)
		sub := dial(t, r.Addr())
		pub := dial(t, srv)
		sub.do("SUBSCRIBE news sport")
		pub.do("PUBLISH news hello")
		pub.do("PUBLISH sport goal")
		sub.do("PSUBSCRIBE n*")
		pub.do("PUBLISH news again")
		sub.do("PING")
		sub.do("UNSUBSCRIBE")
		sub.do("PUNSUBSCRIBE")
		sub.do("GET x")
		sub.close()
		pub.close()
		writeFixture(t, "pubsub-resp2", version+"; client: hand-written RESP client (the subscriber, recorded) and a publisher on another connection:\n"+
			indent("SUBSCRIBE news sport; [PUBLISH news hello; PUBLISH sport goal]; PSUBSCRIBE n*; [PUBLISH news again];\nPING; UNSUBSCRIBE; PUNSUBSCRIBE; GET x"), one(t, r.Connections()))
	}
	{
		r := l7test.Record(t, srv)
		sub := dial(t, r.Addr())
		pub := dial(t, srv)
		sub.do("HELLO 3")
		sub.do("SUBSCRIBE news")
		pub.do("PUBLISH news hello")
		sub.do("GET x")
		sub.do("UNSUBSCRIBE news")
		sub.do("CLIENT TRACKING ON")
		sub.do("GET tracked")
		pub.do("SET tracked 1")
		sub.do("PING")
		pub.do("DEL tracked")
		sub.close()
		pub.close()
		writeFixture(t, "pubsub-resp3", version+"; client: hand-written RESP client (recorded) and a second connection:\n"+
			indent("HELLO 3; SUBSCRIBE news; [PUBLISH news hello]; GET x; UNSUBSCRIBE news;\nCLIENT TRACKING ON; GET tracked; [SET tracked 1: an invalidation push]; PING"), one(t, r.Connections()))
	}

	// redis-cli in its subscribe and monitor modes, killed after the feed.
	feed := func(name string, args []string, other []string) {
		r := l7test.Record(t, srv)
		host, port, _ := net.SplitHostPort(r.Addr())
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		o := dial(t, srv)
		for _, c := range other {
			o.do(c)
		}
		o.close()
		time.Sleep(300 * time.Millisecond)
		cancel()
		_ = cmd.Wait()
		writeFixture(t, name, cli(args...)+" (killed after the feed); other connection: "+strings.Join(other, "; "), one(t, r.Connections()))
	}
	feed("cli-subscribe", []string{"SUBSCRIBE", "news"}, []string{"PUBLISH news one", "PUBLISH news two"})
	feed("cli-monitor", []string{"MONITOR"}, []string{"SET k v", "GET k", "DEL k"})

	// Commands typed by hand (inline), reply modes, and large values.
	{
		r := l7test.Record(t, srv)
		c := dial(t, r.Addr())
		for _, l := range []string{"PING\r\n", "SET greeting hello\r\n", "   \r\n", "GET greeting\n", "CLIENT SETNAME typed\r\n",
			"NOSUCHCMD arg\r\n", "CLIENT REPLY SKIP\r\n", "SET a 1\r\n", "GET a\r\n", "CLIENT REPLY OFF\r\n", "SET b 2\r\n",
			"CLIENT REPLY ON\r\n", "GET b\r\n", "DEL a b greeting\r\n", "QUIT\r\n"} {
			c.raw(l)
		}
		c.close()
		writeFixture(t, "inline", version+"; client: inline commands written as typed (telnet-like), one line per write:\n"+
			indent("PING; SET greeting hello; <blank line>; GET greeting (LF only); CLIENT SETNAME typed; NOSUCHCMD arg;\nCLIENT REPLY SKIP; SET a 1; GET a; CLIENT REPLY OFF; SET b 2; CLIENT REPLY ON; GET b; DEL a b greeting; QUIT"), one(t, r.Connections()))
	}
	{
		r := l7test.Record(t, srv)
		c := dial(t, r.Addr())
		big := strings.Repeat("x", 20000)
		c.raw(resp("SET", "big", big))
		c.raw(resp("GET", "big"))
		args := []string{"RPUSH", "biglist"}
		for i := range 1000 {
			args = append(args, fmt.Sprintf("element-%011d", i))
		}
		c.raw(resp(args...))
		c.raw(resp("LRANGE", "biglist", "0", "-1"))
		c.raw(resp("SET", "a", "1") + resp("GET", "big") + resp("GET", "a"))
		c.raw(resp("DEL", "big", "biglist", "a"))
		c.close()
		writeFixture(t, "big", version+"; client: hand-written RESP client:\n"+
			indent("SET big <20000 bytes>; GET big; RPUSH biglist <1000 elements of 19 bytes>; LRANGE biglist 0 -1;\nSET a 1 + GET big + GET a in one write; DEL big biglist a"), one(t, r.Connections()))
	}
}

func startRedis(t *testing.T) string {
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--enable-debug-command", "yes", "--logfile", filepath.Join(dir, "log"))
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
	t.Fatal("redis-server did not start")
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

func run(t *testing.T, stdin, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func one(t *testing.T, conns [][]l7test.Segment) []l7test.Segment {
	if len(conns) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(conns))
	}
	return conns[0]
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
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

// rawClient is a minimal RESP client: each call writes and then reads
// until the server has been quiet for a while, so that every reply (and
// every push it provokes elsewhere) is in before the next step.
type rawClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *rawClient) do(cmd string) { c.raw(resp(strings.Fields(cmd)...)) }

func (c *rawClient) raw(b string) {
	if _, err := c.c.Write([]byte(b)); err != nil {
		c.t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		_ = c.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.r.Read(buf); err != nil {
			return
		}
	}
}

func (c *rawClient) close() {
	c.c.Close()
	time.Sleep(50 * time.Millisecond)
}

func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}
