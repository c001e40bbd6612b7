package l7

import (
	"strconv"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// TestRingSizePrivileged: a ring buffer size that is not a power of 2
// from 1 to 256 MiB is refused by Start, naming it, with nothing loaded;
// the same probe then starts with a good size (galago.l7_ringbuf_mb), and
// the kernel's ring buffer is that size.
func TestRingSizePrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	cfg := probe.Config{SubItems: bitBytes | bitRPC, Params: probe.DefaultParams()}
	p := New()
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	for _, bad := range []int{3 << 20, 512 << 10, 512 << 20, -1} {
		p.ringSize = bad
		err := p.Start(rt.Context(), cfg, rt)
		if err == nil {
			rt.Shutdown(t, p)
			t.Fatalf("ring size %d: started", bad)
		}
		if want := "ring buffer size " + strconv.Itoa(bad) + " bytes: must be a power of 2 from 1 MiB to 256 MiB"; !strings.Contains(err.Error(), want) {
			t.Errorf("ring size %d: %v, want it to say %q", bad, err, want)
		}
		if p.capture != nil || p.rt != nil {
			t.Errorf("ring size %d: refused but left a capture (%v) or runtime", bad, p.capture)
		}
	}
	const good = 1 << 20
	p.ringSize = good
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatalf("after refused sizes: %v", err)
	}
	got, err := p.capture.RingSize()
	rt.Shutdown(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if got != good {
		t.Errorf("ring of %d bytes, want %d", got, good)
	}
}
