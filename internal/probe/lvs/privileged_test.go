package lvs

// Privileged tier: the probe's answer about this kernel. On a kernel
// without IPVS (this project's CI kernel: CONFIG_IP_VS off, no loadable
// modules) it must refuse to start saying so; on one with IPVS it must
// start, and its link counts must add up to the live connections the
// kernel lists, counted here independently. Runs when
// GALAGO_PRIVILEGED_TESTS=1 (CI always sets it), as root.

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
)

func TestKernelPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	// /proc/net/ip_vs (the service list) is registered with the
	// connection table by the ip_vs module: an independent witness.
	_, statErr := os.Stat("/proc/net/ip_vs")
	haveIPVS := statErr == nil
	p := New(procfs.FS{}, withInterval(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt)
	if !haveIPVS {
		if !errors.Is(err, probe.ErrNotSupported) || !strings.Contains(err.Error(), "no IPVS") {
			t.Fatalf("kernel without IPVS: Start = %v, want the not-supported error", err)
		}
		t.Logf("kernel without IPVS, as the probe says: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("kernel with IPVS: Start = %v", err)
	}
	defer rt.Shutdown(t, p)
	// Count live connections from the kernel's table independently.
	f, err := os.Open("/proc/1/net/ip_vs_conn")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && fs[0] != "Pro" && fs[0] != "IP" && fs[7] != "CLOSE" {
			want++
		}
	}
	f.Close()
	time.Sleep(120 * time.Millisecond)
	got := 0.0
	var last time.Time
	for _, r := range rt.Records() {
		if r.Time.After(last) {
			last, got = r.Time, 0
		}
		if r.Time.Equal(last) {
			got += r.Values[r.Table.MustIndex("link_count")].Num
		}
	}
	if int(got) != want {
		t.Errorf("links %v, kernel lists %d (connections may have changed in between)", got, want)
	}
}
