package syscap

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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

// checkCallsFull: with calls (ssl_calls or go_tls_calls) filled by
// keys no thread has, each TLS call that run makes cannot be followed
// and counts once in ssl_lost: its growth equals the runs of the entry
// programs (the kernel's run counts) over run. key makes the i-th
// filler key.
func checkCallsFull(t *testing.T, c *Capture, calls *ebpf.Map, key func(i uint32) []byte, run func(), entries ...*ebpf.Program) {
	t.Helper()
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	val := make([]byte, calls.ValueSize())
	n := uint32(0)
	defer func() {
		for i := range n {
			_ = calls.Delete(key(i))
		}
	}()
	for ; n <= calls.MaxEntries(); n++ {
		if err := calls.Put(key(n), val); errors.Is(err, unix.E2BIG) {
			break
		} else if err != nil {
			t.Fatalf("filling %s: entry %d: %v", calls, n, err)
		}
	}
	if n > calls.MaxEntries() {
		t.Fatalf("%s takes more than its %d entries", calls, calls.MaxEntries())
	}
	runs := func() (n uint64) {
		for _, p := range entries {
			s, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			n += s.RunCount
		}
		return n
	}
	lost := func() (n uint64) {
		var per []uint64
		if err := c.objs.SslLost.Lookup(uint32(0), &per); err != nil {
			t.Fatal(err)
		}
		for _, v := range per {
			n += v
		}
		return n
	}
	runs0, lost0 := runs(), lost()
	run()
	dr, dl := runs()-runs0, lost()-lost0
	if dr == 0 || dl != dr {
		t.Errorf("%s full: ssl_lost grew by %d over %d TLS calls, want one per call", calls, dl, dr)
	}
}
