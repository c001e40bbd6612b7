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
			"origins":  {Type: ebpf.Hash, KeySize: 40, ValueSize: 32, MaxEntries: 65536},
			"ft_stats": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 4},
		})
		bpfspec.StructSize(t, spec, "ft_key", int(unsafe.Sizeof(flowtracerFtKey{})))
		bpfspec.StructSize(t, spec, "ft_origin", int(unsafe.Sizeof(flowtracerFtOrigin{})))
	})
}

// TestKeyLayout: addresses are kept as the kernel stores them (network
// order, IPv4 as IPv4-mapped IPv6), ports in host order, the namespace
// apart, and an origin decodes back to what was encoded (an IPv4 one as
// IPv4).
func TestKeyLayout(t *testing.T) {
	local, remote := netip.MustParseAddrPort("10.200.2.2:8080"), netip.MustParseAddrPort("[::ffff:10.200.2.1]:40000")
	k := keyOf(7, local, remote)
	b := (*[16]byte)(unsafe.Pointer(&k.LocalAddr))
	if *b != [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 200, 14: 2, 15: 2} || k.LocalPort != 8080 || k.RemotePort != 40000 || k.Netns != 7 {
		t.Errorf("key %+v", k)
	}
	if keyOf(7, netip.MustParseAddrPort("10.200.2.1:1"), remote).LocalAddr != k.RemoteAddr {
		t.Error("an IPv4 address is not its IPv4-mapped form")
	}
	k6 := keyOf(7, netip.MustParseAddrPort("[fd00:200:2::2]:8080"), remote)
	if b := (*[16]byte)(unsafe.Pointer(&k6.LocalAddr)); *b != netip.MustParseAddr("fd00:200:2::2").As16() {
		t.Errorf("IPv6 key %x", *b)
	}
	for _, want := range []netip.AddrPort{netip.MustParseAddrPort("10.200.1.2:51234"), netip.MustParseAddrPort("[fd00:200:1::2]:51234")} {
		o := flowtracerFtOrigin{Addr: addr16(want.Addr()), Port: want.Port()}
		if got := originOf(o); got != want {
			t.Errorf("origin %v, want %v", got, want)
		}
	}
	var nilTable *Origins
	if _, ok := nilTable.Lookup(7, local, remote); ok {
		t.Error("a nil table answers")
	}
	if _, ok := NewOrigins().Lookup(7, local, remote); ok {
		t.Error("a table of a stopped probe answers")
	}
}
