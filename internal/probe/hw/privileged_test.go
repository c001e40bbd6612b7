package hw

// Privileged tier: the carrier counters of a veth pair in a fresh network
// namespace, toggled a known number of times over netlink, compared with
// sysfs read here; the raw tracepoint programs driven by BPF_PROG_TEST_RUN
// with known arguments (no memory controller error or TX watchdog timeout
// can be produced on this VM). Runs when GALAGO_PRIVILEGED_TESTS=1 (CI
// always sets it), as root.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// netnsSysfs creates a network namespace and mounts a sysfs instance of it
// under a temporary root (a sysfs mount shows the network namespace of the
// thread that mounted it), so a probe rooted there sees that namespace's
// /sys/class/net. It returns the root and a netlink handle in the namespace.
func netnsSysfs(t *testing.T) (string, *netlink.Handle) {
	t.Helper()
	root := t.TempDir()
	sys := filepath.Join(root, "sys")
	if err := os.Mkdir(sys, 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ns  netns.NsHandle
		err error
	}
	done := make(chan result)
	go func() {
		// The thread ends up in the new namespace: it stays locked and is
		// thrown away when the goroutine exits.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err == nil {
			if err = unix.Mount("sysfs", sys, "sysfs", 0, ""); err != nil {
				err = fmt.Errorf("mount sysfs: %w", err)
			}
		}
		done <- result{ns, err}
	}()
	res := <-done
	if res.err != nil {
		t.Fatalf("netns: %v", res.err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(sys, unix.MNT_DETACH)
		_ = res.ns.Close()
	})
	h, err := netlink.NewHandleAt(res.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return root, h
}

func sysCount(t *testing.T, root, dev, file string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/class/net", dev, file))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func num(r *table.Record, f string) (float64, bool) {
	v := r.Values[r.Table.MustIndex(f)]
	return v.Num, v.Set
}

// TestCarrierPrivileged: a veth end's carrier follows its peer's
// administrative state; N down/up cycles of the peer add exactly N to the
// end's carrier_down_count and carrier_up_count.
func TestCarrierPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	root, h := netnsSysfs(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "hwa"}, PeerName: "hwb"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	a, err := h.LinkByName("hwa")
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.LinkByName("hwb")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []netlink.Link{a, b} {
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	up0, down0 := sysCount(t, root, "hwa", "carrier_up_count"), sysCount(t, root, "hwa", "carrier_down_count")

	p := New(WithHostPath(root), withInterval(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitNIC, Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)

	const cycles = 3
	for range cycles {
		if err := h.LinkSetDown(b); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(b); err != nil {
			t.Fatal(err)
		}
	}
	up, down := sysCount(t, root, "hwa", "carrier_up_count"), sysCount(t, root, "hwa", "carrier_down_count")
	if up-up0 != cycles || down-down0 != cycles {
		t.Fatalf("sysfs: carrier up %d->%d, down %d->%d, want +%d each", up0, up, down0, down, cycles)
	}
	t.Logf("hwa sysfs: carrier_up_count %d -> %d, carrier_down_count %d -> %d after %d cycles", up0, up, down0, down, cycles)
	if ch := sysCount(t, root, "hwa", "carrier_changes"); ch != up+down {
		t.Errorf("sysfs carrier_changes %d != up %d + down %d", ch, up, down)
	}
	recs := rt.WaitTable(t, table.NicFailure, 1, func(r *table.Record) bool {
		u, _ := num(r, "carrier_up_count")
		d, _ := num(r, "carrier_down_count")
		return r.Str("name") == "hwa" && u == float64(up) && d == float64(down)
	})
	r := recs[0]
	if r.Str("dev_name") != "hwa" || r.Str("driver") != "" || r.Str("queue_index") != "" {
		t.Errorf("labels: dev_name %q driver %q queue_index %q, want hwa and none", r.Str("dev_name"), r.Str("driver"), r.Str("queue_index"))
	}
	if _, set := num(r, "xmit_timeout_count"); set {
		t.Errorf("interface row has xmit_timeout_count: it belongs to the per-queue rows")
	}
	for _, r := range rt.Records() {
		u, _ := num(r, "carrier_up_count")
		d, _ := num(r, "carrier_down_count")
		if r.Str("name") == "hwa" && (u > float64(up) || d > float64(down)) {
			t.Errorf("row above sysfs: up %v down %v, sysfs %d %d", u, d, up, down)
		}
	}
	// The peer went through the same cycles.
	if got := sysCount(t, root, "hwb", "carrier_down_count"); got < cycles {
		t.Errorf("hwb carrier_down_count %d < %d", got, cycles)
	}
}

// TestTracepointProgramsPrivileged attaches both programs and then runs
// them with known arguments through BPF_PROG_TEST_RUN: the rows carry
// exactly the counts injected, and a TX timeout raises gala-gopher's event.
func TestTracepointProgramsPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	p := New(WithHostPath(t.TempDir()), withInterval(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitNIC | bitMem, Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	p.mu.Lock()
	if len(p.links) != 2 {
		t.Fatalf("%d links, want 2 (net_dev_xmit_timeout, mc_event)", len(p.links))
	}
	mc, xmit := p.coll.Programs["hw_mc_event"], p.coll.Programs["hw_xmit_timeout"]
	p.mu.Unlock()

	run := func(prog *ebpf.Program, args ...uint64) {
		t.Helper()
		ctx := make([]uint64, 12)
		copy(ctx, args)
		if _, err := prog.Run(&ebpf.RunOptions{Context: ctx}); err != nil {
			t.Fatalf("test run: %v", err)
		}
	}
	// mc_event(err_type=Uncorrected, msg, label=NULL, error_count, mc_index=1, top=2, mid=-1)
	minus1 := uint64(0xff)
	run(mc, 1, 0, 0, 5, 1, 2, minus1)
	run(mc, 1, 0, 0, 2, 1, 2, minus1)
	run(mc, 0, 0, 0, 1, 1, 2, minus1) // another error type: its own row
	run(mc, 3, 0, 0, 0, 1, 2, minus1) // a report of no error adds nothing
	// net_dev_xmit_timeout(dev=NULL, queue_index=7), twice
	run(xmit, 0, 7)
	run(xmit, 0, 7)

	sum := func(name, field string) float64 {
		var s float64
		for _, r := range rt.Records() {
			if r.Str("name") == name {
				v, _ := num(r, field)
				s += v
			}
		}
		return s
	}
	probetest.WaitFor(t, "injected counts", func() bool {
		return sum("mc1:2:-1:Uncorrected:", "error_count") == 7 && sum("mc1:2:-1:Corrected:", "error_count") == 1 &&
			sum(":7", "xmit_timeout_count") == 2
	})
	for _, r := range rt.Records() {
		if r.Str("err_type") == "Fatal" {
			t.Errorf("row for a report of 0 errors: %+v", r.Labels())
		}
		if r.Table == table.MemMcEvent && r.Str("name") == "mc1:2:-1:Uncorrected:" {
			if r.Str("err_type") != "Uncorrected" || r.Str("mc_index") != "1" || r.Str("top_layer") != "2" || r.Str("mid_layer") != "-1" {
				t.Errorf("mc row labels: %+v", r.Labels())
			}
		}
		if r.Table == table.NicFailure && r.Str("name") == ":7" && r.Str("queue_index") != "7" {
			t.Errorf("xmit row queue_index %q, want 7", r.Str("queue_index"))
		}
	}
	evs := rt.Events()
	if len(evs) == 0 {
		t.Fatal("no nic_xmit_timeout event")
	}
	e := evs[0]
	if e.Entity != "hw" || e.Metric != "nic_xmit_timeout" || e.Message != "HW nic nic_xmit_timeout (dev:  (), queue_index: 7)" {
		t.Errorf("event %+v", e)
	}
	// Nothing more happens: later periods add no row of either kind.
	n := len(rt.Records())
	time.Sleep(150 * time.Millisecond)
	for _, r := range rt.Records()[n:] {
		if r.Table == table.MemMcEvent || r.Str("queue_index") != "" {
			t.Errorf("row without new events: %s %+v", r.Table.Name, r.Labels())
		}
	}
	if rt.LostCount() != 0 {
		t.Errorf("lost %d", rt.LostCount())
	}
}

// TestMapFullPrivileged: error kinds beyond the map's 1024 keys are not
// stored; each refused report is counted as lost, never silently dropped.
func TestMapFullPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	p := New(WithHostPath(t.TempDir()), withInterval(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitMem, Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	p.mu.Lock()
	mc := p.coll.Programs["hw_mc_event"]
	p.mu.Unlock()
	const keys, extra = 1024, 5
	for i := range keys + extra {
		// distinct (mc_index, top_layer) per report, one error each
		ctx := []uint64{0, 0, 0, 1, uint64(i / 256), uint64(i % 256), 0, 0, 0, 0, 0, 0}
		if _, err := mc.Run(&ebpf.RunOptions{Context: ctx}); err != nil {
			t.Fatal(err)
		}
	}
	probetest.WaitFor(t, "lost reports counted", func() bool { return rt.LostCount() == extra })
	rows := rt.WaitTable(t, table.MemMcEvent, keys, nil)
	if len(rows) != keys {
		t.Errorf("%d rows, want %d", len(rows), keys)
	}
}
