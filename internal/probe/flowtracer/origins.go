package flowtracer

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
)

// Origins is what the running flowtracer probe learnt from the SYNs its
// servers received: a server-side connection -> the client's own address.
// The tcp probe reads it with cluster_ip_backend=2. Safe for concurrent
// use; empty (every Lookup fails) while the probe is stopped.
type Origins struct {
	mu sync.RWMutex
	m  *ebpf.Map
}

// NewOrigins returns an empty table, for the flowtracer probe to fill and
// the probes that label server-side connections to read.
func NewOrigins() *Origins { return &Origins{} }

func (o *Origins) set(m *ebpf.Map) {
	o.mu.Lock()
	o.m = m
	o.mu.Unlock()
}

// Lookup returns the client's own address and port of the IPv4 connection
// a server sees from local (its own address) to remote (the peer after any
// NAT), when the client's SYN carried flowtracer's option.
func (o *Origins) Lookup(local, remote netip.AddrPort) (netip.AddrPort, bool) {
	if o == nil || !local.Addr().Is4() && !local.Addr().Is4In6() {
		return netip.AddrPort{}, false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.m == nil {
		return netip.AddrPort{}, false
	}
	k := keyOf(local, remote)
	var v flowtracerFtOrigin
	if err := o.m.Lookup(&k, &v); err != nil { // ErrKeyNotExist: no option seen
		return netip.AddrPort{}, false
	}
	return originOf(v), true
}

// addr4 is an IPv4 address as the kernel stores it (network order) read
// as a native-endian integer.
func addr4(a netip.Addr) uint32 {
	b := a.Unmap().As4()
	return binary.NativeEndian.Uint32(b[:])
}

func keyOf(local, remote netip.AddrPort) flowtracerFtKey {
	return flowtracerFtKey{
		LocalAddr: addr4(local.Addr()), RemoteAddr: addr4(remote.Addr()),
		LocalPort: local.Port(), RemotePort: remote.Port(),
	}
}

func originOf(v flowtracerFtOrigin) netip.AddrPort {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v.Addr)
	return netip.AddrPortFrom(netip.AddrFrom4(b), v.Port)
}
