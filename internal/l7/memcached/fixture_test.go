package memcached

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

func rep(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+"|", n), "|") }

// The fixtures, with what the client sent and the server answered, as the
// test's ground truth: one "API class" per exchange, in order ("-" for no
// response). Sizes and timing are in testdata/<name>.golden (regenerate
// with GALAGO_L7_UPDATE=1 and review the diff).
var fixtures = map[string]string{
	// noreply commands and quit come out at once, without a response; an
	// unknown command has no template; a malformed set is answered
	// CLIENT_ERROR and has no data block.
	"text": "version ok|set ok|set ok|get ok|gets ok|cas ok|cas ok|add ok|replace ok|append ok|prepend ok|set ok|" +
		"incr ok|decr ok|incr client_error|touch ok|gat ok|gats ok|delete ok|delete ok|set -|incr -|touch -|delete -|" +
		"get ok|stats ok|stats slabs ok|stats settings ok|stats reset ok|lru_crawler metadump ok|verbosity ok|" +
		" client_error|set client_error|flush_all -|flush_all ok|quit -",
	// The quiet pipeline: ms's HD, the miss's EN are left out (those
	// commands come out without a response when a later response passes
	// them); the other answers pair by order and opaque.
	"meta":      "ms ok|mg ok|mg ok|mg ok|ma ok|ma ok|ma ok|md ok|md ok|me ok|mn ok|ms -|mg ok|mg -|md ok|ma client_error|mn ok|mg client_error",
	"too-large": "set server_error|get ok|set ok",
	"big":       "set ok|get ok|" + rep("set ok", 10) + "|get ok|delete ok",
	// memcslap -B writes its ten sets and quit at once: quit, unanswered,
	// comes out first.
	// watch's log lines answer nothing.
	"watch":             "watch ok",
	"memcstat":          "version ok|stats ok|quit -",
	"memccp":            "set ok|quit -",
	"memccat":           "get ok|get ok|quit -",
	"slap-set":          rep("set ok", 10) + "|quit -",
	"slap-get":          rep("get ok", 10) + "|quit -",
	"slap-mget":         "get ok|quit -",
	"slap-set-buffered": "quit -|" + rep("set ok", 10),
}

func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.chunks")
	if len(files) != len(fixtures)+1 { // and slap-binary, for Detect
		t.Errorf("%d fixtures in testdata, %d described", len(files), len(fixtures)+1)
	}
	for name, want := range fixtures {
		t.Run(name, func(t *testing.T) {
			segs := l7test.Load(t, filepath.Join("testdata", name+".chunks"))
			golden := l7test.CheckFixture(t, segs, func(r l7.Role) l7.Parser { return NewParser(r) }, want)
			l7test.CompareGolden(t, filepath.Join("testdata", name+".golden"), golden)
		})
	}
}
