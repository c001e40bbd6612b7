package flowtracer

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _FlowtracerBytes, []string{"flowtracer_x86_bpfel.o", "flowtracer_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		bpfspec.Programs(t, spec, map[string]bpfspec.Program{
			"flowtracer_sockops": {Type: ebpf.SockOps, AttachType: ebpf.AttachCGroupSockOps},
		})
		bpfspec.Maps(t, spec, map[string]bpfspec.Map{
			"origins":  {Type: ebpf.LRUHash, KeySize: 12, ValueSize: 8, MaxEntries: 65536},
			"ft_stats": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 3},
		})
		bpfspec.StructSize(t, spec, "ft_key", int(unsafe.Sizeof(flowtracerFtKey{})))
		bpfspec.StructSize(t, spec, "ft_origin", int(unsafe.Sizeof(flowtracerFtOrigin{})))
	})
}

// TestKeyLayout: addresses are kept as the kernel stores them (network
// order), ports in host order, and an origin decodes back to what was
// encoded; IPv4-mapped IPv6 addresses are their IPv4 address.
func TestKeyLayout(t *testing.T) {
	local, remote := netip.MustParseAddrPort("10.200.2.2:8080"), netip.MustParseAddrPort("[::ffff:10.200.2.1]:40000")
	k := keyOf(local, remote)
	b := (*[4]byte)(unsafe.Pointer(&k.LocalAddr))
	if *b != [4]byte{10, 200, 2, 2} || k.LocalPort != 8080 || k.RemotePort != 40000 {
		t.Errorf("key %+v", k)
	}
	if keyOf(netip.MustParseAddrPort("10.200.2.1:1"), remote).LocalAddr != k.RemoteAddr {
		t.Error("a mapped address is not its IPv4 address")
	}
	want := netip.MustParseAddrPort("10.200.1.2:51234")
	o := flowtracerFtOrigin{Addr: addr4(want.Addr()), Port: want.Port()}
	if got := originOf(o); got != want {
		t.Errorf("origin %v, want %v", got, want)
	}
	var nilTable *Origins
	if _, ok := nilTable.Lookup(local, remote); ok {
		t.Error("a nil table answers")
	}
	if _, ok := NewOrigins().Lookup(local, remote); ok {
		t.Error("a table of a stopped probe answers")
	}
}
