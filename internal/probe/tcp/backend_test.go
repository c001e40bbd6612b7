package tcp

import (
	"net/netip"
	"testing"
)

// TestKeyOfServerOf: with cluster_ip_backend, a client connection's row is
// keyed by its backend; servers' rows and unset serverOf are untouched.
func TestKeyOfServerOf(t *testing.T) {
	backend := netip.MustParseAddrPort("10.200.0.2:8080")
	a := newAggregator()
	var asked []conn
	a.serverOf = func(c *conn) (netip.Addr, uint16) {
		asked = append(asked, *c)
		return backend.Addr(), backend.Port()
	}
	c := synth(recSnapshot, 7, 1, 40000, 0, 0) // client 10.231.1.1 -> 10.231.1.2:80
	e, ok := a.keyOf(&c, nil)
	if !ok || e.key.serverIP != "10.200.0.2" || e.key.serverPort != 8080 || e.key.clientIP != "10.231.1.1" {
		t.Fatalf("client key %+v, want server 10.200.0.2:8080", e.key)
	}
	if len(asked) != 1 || asked[0].raw.Cookie != 1 {
		t.Fatalf("serverOf asked %d times", len(asked))
	}
	s := synth(recSnapshot, 8, 2, 80, 0, 0)
	s.raw.Role = roleServer
	if e, _ := a.keyOf(&s, nil); e.key.serverIP != "10.231.1.1" || len(asked) != 1 {
		t.Fatalf("server key %+v (serverOf asked %d times): a server row is never looked up", e.key, len(asked))
	}
	a.serverOf = nil
	c2 := synth(recSnapshot, 7, 3, 40001, 0, 0)
	if e, _ := a.keyOf(&c2, nil); e.key.serverIP != "10.231.1.2" || e.key.serverPort != 80 {
		t.Fatalf("client key without cluster_ip_backend %+v", e.key)
	}
}
