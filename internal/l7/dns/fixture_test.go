package dns

import (
	"path/filepath"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// The fixtures, with what the client asked and the server answered, as
// the test's ground truth: one "API class" per exchange, in the order of
// the responses ("-" for none). Sizes and timing are in
// testdata/<name>.golden (regenerate with GALAGO_L7_UPDATE=1 and review
// the diff). UDP fixtures are every datagram of the client's sockets, in
// order, as the server's socket sees them.
var fixtures = map[string]string{
	"dig-udp": "A www.example.test ok|AAAA db.example.test ok|A nosuch.example.test client_error|" +
		"A x.refused.test client_error|A x.fail.lan server_error|PTR {ip}.in-addr.arpa ok|TXT txt.example.test ok|" +
		"MX example.test ok|SRV _ldap._tcp.example.test ok|A {id}.{id}.example.test client_error",
	// dig takes the first +opcode for the query after the second: NOTIFY
	// (unbound refuses it), QUERY, and STATUS (not implemented).
	"dig-opcodes": "NOTIFY A www.example.test client_error|A www.example.test ok|STATUS CH TXT version.bind server_error",
	// A response truncated for UDP (TC) is a response.
	"dig-tc":  "TXT big.example.test ok",
	"dig-tcp": "A www.example.test ok|A nosuch.example.test client_error|TXT big.example.test ok",
	"go-tcp":  "TXT big.example.test ok",
	// Go asks A and AAAA at once, and asks again after a SERVFAIL.
	"go-udp": "A www.example.test ok|AAAA www.example.test ok|A nosuch.example.test client_error|" +
		"AAAA nosuch.example.test client_error|MX example.test ok|SRV _ldap._tcp.example.test ok|" +
		"PTR {ip}.in-addr.arpa ok|TXT x.fail.lan server_error|TXT x.fail.lan server_error",
	// Two questions in a query: FORMERR, the template is the first's.
	"raw-udp": "A www.example.test client_error|A {id}.example.test client_error",
}

// tcpFixtures are the fixtures recorded over TCP.
var tcpFixtures = map[string]bool{"dig-tcp": true, "go-tcp": true}

func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.chunks")
	if len(files) != len(fixtures) {
		t.Errorf("%d fixtures in testdata, %d described", len(files), len(fixtures))
	}
	for name, want := range fixtures {
		t.Run(name, func(t *testing.T) {
			segs := l7test.Load(t, filepath.Join("testdata", name+".chunks"))
			var golden string
			if tcpFixtures[name] {
				golden = l7test.CheckFixture(t, segs, func(r l7.Role) l7.Parser { return NewParser(r) }, want)
			} else {
				golden = l7test.CheckDatagrams(t, segs, func(r l7.Role) l7.Parser { return NewUDPParser(r) }, want)
			}
			l7test.CompareGolden(t, filepath.Join("testdata", name+".golden"), golden)
		})
	}
}
