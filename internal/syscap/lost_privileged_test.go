package syscap

import (
	"testing"

	"github.com/cilium/ebpf"
)

// checkPollLost: the kernel's loss counters (conn_lost, ssl_lost, per
// CPU) reach OnLost at a poll, each growth once: the figures written into
// the maps are the ground truth. c's OnLost adds to *lost, 0 on entry; c
// is no longer read (run from TestCapturePrivileged, whose capture is
// loaded already).
func checkPollLost(t *testing.T, c *Capture, lost *uint64) {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	set := func(m *ebpf.Map, first, rest uint64) {
		t.Helper()
		per := make([]uint64, ncpu)
		for i := range per {
			per[i] = rest
		}
		per[0] = first
		if err := m.Put(uint32(0), per); err != nil {
			t.Fatal(err)
		}
	}
	set(c.objs.ConnLost, 3, 0)
	set(c.objs.SslLost, 2, 1)
	if err := c.PollLost(); err != nil {
		t.Fatal(err)
	}
	want := uint64(3 + 2 + ncpu - 1)
	if *lost != want {
		t.Fatalf("lost %d after the first poll, want %d", *lost, want)
	}
	if err := c.PollLost(); err != nil {
		t.Fatal(err)
	}
	if *lost != want {
		t.Fatalf("lost %d after a poll with no growth, want %d", *lost, want)
	}
	set(c.objs.SslLost, 7, 1)
	if err := c.PollLost(); err != nil {
		t.Fatal(err)
	}
	if *lost != want+5 {
		t.Fatalf("lost %d after ssl_lost grew by 5, want %d", *lost, want+5)
	}
}
