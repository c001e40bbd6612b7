package tcp

import (
	"net/netip"

	"github.com/galago-project/galago/internal/conntrack"
)

// serverFunc is the server address and port of a client connection.
type serverFunc func(c *conn) (netip.Addr, uint16)

// syncBackendsLocked follows cluster_ip_backend: with 1 (or 2, served as
// 1) a client connection's row names the backend its service address was
// DNAT'd to, looked up once when the connection is first seen (keyOf);
// with 0 nothing is looked up.
func (p *Probe) syncBackendsLocked() {
	p.backends = conntrack.ForParam(p.backends, p.cfg.Params.ClusterIPBackend, conntrack.Options{
		Log: p.rt.Logger(), OnError: p.rt.Error,
	})
	r := p.backends
	if r == nil {
		p.agg.serverOf = nil
		return
	}
	p.agg.serverOf = func(c *conn) (netip.Addr, uint16) {
		b := r.Backend(conntrack.Tuple{
			Netns: c.raw.Netns, PID: c.raw.Tgid,
			Src: netip.AddrPortFrom(c.local, c.raw.Sport), Dst: netip.AddrPortFrom(c.remot, c.raw.Dport),
		})
		return b.Addr(), b.Port()
	}
}
