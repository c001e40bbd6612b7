package http2

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// newVerifying returns a parser whose HPACK mirror is checked against the
// Decoder on every indexed field and named literal.
func newVerifying(role l7.Role) *Parser {
	p := NewParser(role)
	p.verify()
	return p
}

func (p *Parser) verify() { p.c.hp.verify, p.s.hp.verify = true, true }

func (p *Parser) mismatches() int { return p.c.hp.mismatches + p.s.hp.mismatches }

// checkMirror fails the test when the mirror disagreed with the Decoder.
func checkMirror(t testing.TB, p *Parser) {
	t.Helper()
	if n := p.mismatches(); n != 0 {
		t.Fatalf("the HPACK mirror disagreed with the Decoder %d times", n)
	}
}
