package flowtracer

import (
	"net/netip"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
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

// Lookup returns the client's own address and port of the connection a
// server in network namespace netns (its inode number) sees from local
// (its own address) to remote (the peer after any NAT), when the client's
// SYN carried flowtracer's option. IPv4 and IPv4-mapped IPv6 addresses
// are the same connection; an IPv4 client is returned as IPv4.
func (o *Origins) Lookup(netns uint32, local, remote netip.AddrPort) (netip.AddrPort, bool) {
	if o == nil || !local.Addr().IsValid() || !remote.Addr().IsValid() {
		return netip.AddrPort{}, false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.m == nil {
		return netip.AddrPort{}, false
	}
	k := keyOf(netns, local, remote)
	var v flowtracerFtOrigin
	if err := o.m.Lookup(&k, &v); err != nil { // ErrKeyNotExist: no option seen
		return netip.AddrPort{}, false
	}
	return originOf(v), true
}

// sweep deletes the entries of connections closed at or before
// closedBefore (bpf_ktime_get_ns), returning how many it deleted.
func (o *Origins) sweep(closedBefore uint64) (int, error) {
	o.mu.RLock()
	m := o.m
	o.mu.RUnlock()
	if m == nil {
		return 0, nil
	}
	return bpfrt.DeleteIf(m, func(_ flowtracerFtKey, v flowtracerFtOrigin) bool {
		return v.ClosedNs != 0 && v.ClosedNs <= closedBefore
	})
}

// addr16 is an address as the BPF side stores it: IPv6 in network order,
// IPv4 as IPv4-mapped, laid in the key's native-endian words.
func addr16(a netip.Addr) [4]uint32 {
	b := a.As16()
	return *(*[4]uint32)(unsafe.Pointer(&b))
}

func keyOf(netns uint32, local, remote netip.AddrPort) flowtracerFtKey {
	return flowtracerFtKey{
		Netns:     netns,
		LocalAddr: addr16(local.Addr()), RemoteAddr: addr16(remote.Addr()),
		LocalPort: local.Port(), RemotePort: remote.Port(),
	}
}

func originOf(v flowtracerFtOrigin) netip.AddrPort {
	b := *(*[16]byte)(unsafe.Pointer(&v.Addr))
	return netip.AddrPortFrom(netip.AddrFrom16(b).Unmap(), v.Port)
}
