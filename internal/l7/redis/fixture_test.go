package redis

import (
	"path/filepath"
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
			golden := l7test.CheckFixture(t, segs, func(r l7.Role) l7.Parser { return NewParser(r) }, want)
			l7test.CompareGolden(t, filepath.Join("testdata", name+".golden"), golden)
		})
	}
}
