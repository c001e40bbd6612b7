package tcp

import (
	"net/netip"

	"github.com/galago-project/galago/internal/conntrack"
)

// serverFunc is the server address and port of a client connection.
type serverFunc func(c *conn) (netip.Addr, uint16)

// clientFunc is the real client address and port of a server connection,
// if known.
type clientFunc func(c *conn) (netip.AddrPort, bool)

// syncBackendsLocked follows cluster_ip_backend: with 1 or 2 a client
// connection's row names the backend its service address was DNAT'd to,
// looked up once when the connection is first seen (keyOf); with 2 a
// server connection's row also names the real client the flowtracer probe
// read from its SYN (when it runs); with 0 nothing is looked up.
func (p *Probe) syncBackendsLocked() {
	p.agg.clientOf = nil
	if o := p.origins; o != nil && p.cfg.Params.ClusterIPBackend == 2 {
		p.agg.clientOf = func(c *conn) (netip.AddrPort, bool) {
			return o.Lookup(c.raw.Netns, netip.AddrPortFrom(c.local, c.raw.Sport), netip.AddrPortFrom(c.remot, c.raw.Dport))
		}
	}
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
