package redis

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// The fixtures, with what the client sent and the server answered, as the
// test's ground truth: one "API class" per exchange, in order ("-" for no
// reply). Sizes and timing are in testdata/<name>.golden (regenerate with
// GALAGO_L7_UPDATE=1 and review the diff).
var fixtures = map[string]string{
	"basic": "COMMAND DOCS ok|PING ok|SET ok|GET ok|GET ok|INCR ok|LPUSH ok|LRANGE ok|HSET ok|HGETALL ok|" +
		"CONFIG GET ok|CLIENT SETNAME ok|CLIENT GETNAME ok|XADD ok|XINFO STREAM ok|DEL ok",
	"errors": "FOO client_error|GET client_error|SET ok|INCR client_error|LPUSH ok|GET client_error|CONFIG SET ok|" +
		"SET server_error|CONFIG SET ok|EVAL client_error|SCRIPT KILL client_error|DEL ok",
	// EXEC's nested WRONGTYPE does not make EXEC an error; a command
	// refused while queueing does, and so does the EXEC it aborts.
	"multi": "MULTI ok|SET ok|INCR ok|LPUSH ok|GET ok|EXEC ok|MULTI ok|SET ok|GETT client_error|EXEC client_error|DEL ok",
	// redis-cli -3 sends HELLO 3 first; DEBUG PROTOCOL push answers with a
	// push and then a reply.
	"resp3": "HELLO ok|COMMAND DOCS ok|HSET ok|HGETALL ok|SADD ok|SMEMBERS ok|ZADD ok|ZSCORE ok|GET ok|EXISTS ok|" +
		"DEBUG ok|DEBUG ok|DEBUG ok|DEL ok",
	"resp3-types":     "HELLO ok|" + strings.Repeat("DEBUG ok|", 13) + "HELLO ok|DEBUG ok|DEBUG ok",
	"bench-set":       strings.TrimSuffix(strings.Repeat("SET ok|", 64), "|"),
	"bench-get":       strings.TrimSuffix(strings.Repeat("GET ok|", 64), "|"),
	"bench-set-d3000": strings.TrimSuffix(strings.Repeat("SET ok|", 32), "|"),
	// Published messages answer nothing; UNSUBSCRIBE's two replies are
	// one exchange.
	"pubsub-resp2":  "SUBSCRIBE ok|PSUBSCRIBE ok|PING ok|UNSUBSCRIBE ok|PUNSUBSCRIBE ok|GET ok",
	"pubsub-resp3":  "HELLO ok|SUBSCRIBE ok|GET ok|UNSUBSCRIBE ok|CLIENT TRACKING ok|GET ok|PING ok",
	"cli-subscribe": "SUBSCRIBE ok",
	"cli-monitor":   "MONITOR ok",
	// The blank line is no command; CLIENT REPLY SKIP silences itself and
	// SET a 1, CLIENT REPLY OFF itself and SET b 2.
	"inline": "PING ok|SET ok|GET ok|CLIENT SETNAME ok|NOSUCHCMD client_error|CLIENT REPLY -|SET -|GET ok|" +
		"CLIENT REPLY -|SET -|CLIENT REPLY ok|GET ok|DEL ok|QUIT ok",
	"big": "SET ok|GET ok|RPUSH ok|LRANGE ok|SET ok|GET ok|GET ok|DEL ok",
}

func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.chunks")
	if len(files) != len(fixtures) {
		t.Errorf("%d fixtures in testdata, %d described", len(files), len(fixtures))
	}
	for name, want := range fixtures {
		t.Run(name, func(t *testing.T) {
			segs := l7test.Load(t, filepath.Join("testdata", name+".chunks"))
			golden := checkFixture(t, segs, func(r l7.Role) l7.Parser { return NewParser(r) }, want)
			compareGolden(t, filepath.Join("testdata", name+".golden"), golden)
		})
	}
}

// checkFixture feeds a recorded conversation to parsers on both sides,
// whole, re-split and truncated, checks what must hold and returns the
// golden text (whole, then each truncation).
func checkFixture(t *testing.T, segs []l7test.Segment, newParser func(l7.Role) l7.Parser, want string) string {
	t.Helper()
	var golden strings.Builder
	var whole []l7.Exchange
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		chunks := l7test.Chunks(segs, role, 1000, 1000)
		p := newParser(role)
		got := l7test.Run(p, chunks)
		if p.Desyncs() != 0 {
			t.Errorf("%v: %d desyncs on whole chunks", role, p.Desyncs())
		}
		if s := summary(got); s != want {
			t.Errorf("%v: exchanges\n got %s\nwant %s", role, s, want)
		}
		if whole == nil {
			whole = got
			fmt.Fprintf(&golden, "# whole, either role, re-split at 1, 2, 7, 64 bytes: %d exchanges\n%s", len(got), describe(got))
		} else if !reflect.DeepEqual(got, whole) {
			t.Errorf("server role differs from client role:\n%s", diff(describe(whole), describe(got)))
		}
		for _, n := range []int{1, 2, 7, 64} {
			p := newParser(role)
			re := l7test.Run(p, l7test.Resplit(chunks, n))
			if p.Desyncs() != 0 || !sameResplit(re, whole, n) {
				t.Errorf("%v re-split at %d: %d desyncs\n%s", role, n, p.Desyncs(), diff(describe(whole), describe(re)))
			}
		}
	}
	for _, max := range []int{4096, 256, 64} {
		var first string
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := newParser(role)
			got := l7test.Run(p, l7test.Truncate(l7test.Chunks(segs, role, 1000, 1000), max))
			d := describe(got)
			s := fmt.Sprintf("\n# truncated to %d: %d exchanges, %d desyncs\n", max, len(got), p.Desyncs())
			if d == describe(whole) {
				s += "(as whole)\n"
			} else {
				s += d
			}
			if role == l7.Client {
				first = s
				golden.WriteString(s)
			} else if s != first {
				t.Errorf("truncated to %d: server role differs from client role:\n%s", max, diff(first, s))
			}
		}
	}
	return golden.String()
}

// sameResplit compares exchanges of re-split chunks with those of the
// whole ones. Cut at every byte, each byte keeps its chunk's timestamp, so
// all must be equal; cut at n bytes, a chunk that joins the end of one
// segment and the start of the next has the first one's timestamp, so
// timestamps may be earlier, never later.
func sameResplit(re, whole []l7.Exchange, n int) bool {
	if n == 1 || len(re) != len(whole) {
		return reflect.DeepEqual(re, whole)
	}
	for i := range re {
		a, b := re[i], whole[i]
		if a.Start > b.Start || a.End > b.End {
			return false
		}
		a.Start, a.End, b.Start, b.End = 0, 0, 0, 0
		if a != b {
			return false
		}
	}
	return true
}

// summary is "API class|..." ("-" for no reply).
func summary(ex []l7.Exchange) string {
	var b strings.Builder
	for i, e := range ex {
		if i > 0 {
			b.WriteByte('|')
		}
		c := e.Class.String()
		if !e.HasResponse {
			c = "-"
		}
		if !e.HasRequest {
			c = "orphan " + c
		}
		fmt.Fprintf(&b, "%s %s", e.API, c)
	}
	return b.String()
}

// describe writes one line per exchange; timestamps as the index of the
// fixture segment (Chunks was given ts0 1000, step 1000).
func describe(ex []l7.Exchange) string {
	var b strings.Builder
	for _, e := range ex {
		fmt.Fprintf(&b, "%q %s", e.API, e.Class)
		if e.HasRequest {
			fmt.Fprintf(&b, " req=%d@%d", e.ReqBytes, (e.Start-1000)/1000)
		} else {
			b.WriteString(" no-request")
		}
		if e.HasResponse {
			fmt.Fprintf(&b, " resp=%d@%d", e.RespBytes, (e.End-1000)/1000)
		} else {
			b.WriteString(" no-response")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("first difference at line %d:\n want %s\n  got %s", i+1, a, b)
		}
	}
	return "(no difference)"
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if os.Getenv("GALAGO_L7_UPDATE") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (GALAGO_L7_UPDATE=1 writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n%s", path, diff(string(want), got))
	}
}
