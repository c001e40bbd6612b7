package taskstats

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// payload is a struct taskstats of the running layout, cut to n bytes.
func payload(t testing.TB, n int) []byte {
	t.Helper()
	ts := unix.Taskstats{Version: 16, Cpu_count: 7, Cpu_delay_total: 1000, Blkio_count: 3, Blkio_delay_total: 300,
		Swapin_count: 1, Swapin_delay_total: 11, Freepages_count: 2, Freepages_delay_total: 22,
		Thrashing_count: 4, Thrashing_delay_total: 44, Compact_count: 5, Compact_delay_total: 55,
		Wpcopy_count: 6, Wpcopy_delay_total: 66, Irq_count: 8, Irq_delay_total: 88}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
	return bytes.Clone(b[:n])
}

func TestParseStatsFull(t *testing.T) {
	s, err := ParseStats(payload(t, int(unsafe.Sizeof(unix.Taskstats{}))))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Kind]Delay{CPU: {7, 1000}, BlockIO: {3, 300}, SwapIn: {1, 11}, FreePages: {2, 22},
		Thrashing: {4, 44}, Compaction: {5, 55}, WPCopy: {6, 66}, IRQ: {8, 88}}
	for _, k := range Kinds {
		if !s.Has(k) || s.Delays[k] != want[k] {
			t.Errorf("%s: %+v (has %v), want %+v", k, s.Delays[k], s.Has(k), want[k])
		}
	}
	if s.Version != 16 {
		t.Errorf("version %d", s.Version)
	}
}

// An older kernel sends a shorter struct: the fields it lacks are absent,
// not zero.
func TestParseStatsOldKernel(t *testing.T) {
	var ts unix.Taskstats
	n := int(unsafe.Offsetof(ts.Thrashing_count)) // version 8: up to freepages
	s, err := ParseStats(payload(t, n))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{CPU, BlockIO, SwapIn, FreePages} {
		if !s.Has(k) {
			t.Errorf("%s absent", k)
		}
	}
	for _, k := range []Kind{Thrashing, Compaction, WPCopy, IRQ} {
		if s.Has(k) || s.Delays[k] != (Delay{}) {
			t.Errorf("%s present in a version-8 payload", k)
		}
	}
}

func TestParseStatsShort(t *testing.T) {
	for _, n := range []int{0, 1, 20} {
		if _, err := ParseStats(payload(t, n)); err == nil {
			t.Errorf("%d bytes: no error", n)
		}
	}
}

func reply(t testing.TB, tgid uint32, stats []byte) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.TASKSTATS_TYPE_AGGR_TGID, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.TASKSTATS_TYPE_TGID, tgid)
		nae.Bytes(unix.TASKSTATS_TYPE_STATS, stats)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseReply(t *testing.T) {
	s, err := ParseReply(reply(t, 4242, payload(t, int(unsafe.Sizeof(unix.Taskstats{})))))
	if err != nil {
		t.Fatal(err)
	}
	if s.TGID != 4242 || s.Delays[CPU].TotalNS != 1000 {
		t.Errorf("%+v", s)
	}
	if _, err := ParseReply(nil); err == nil {
		t.Error("empty reply: no error")
	}
}

func TestParseDelayAcct(t *testing.T) {
	for in, want := range map[string]bool{"0\n": false, "1\n": true} {
		if got, err := ParseDelayAcct([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseDelayAcct([]byte("2")); err == nil {
		t.Error("2: no error")
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add(reply(f, 1, payload(f, int(unsafe.Sizeof(unix.Taskstats{})))))
	f.Add(reply(f, 1, payload(f, 40)))
	f.Add([]byte{4, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseReply(b)
		if err != nil {
			return
		}
		if !s.Has(CPU) {
			t.Fatal("parsed without the CPU delay")
		}
	})
}
