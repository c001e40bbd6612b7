package flamegraph

import (
	"errors"
	"testing"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

func bits(t *testing.T, names ...string) uint32 {
	t.Helper()
	f := probe.LookupBuiltin(Name)
	var b uint32
	for _, n := range names {
		bit, ok := f.SubItemBit(n)
		if !ok {
			t.Fatalf("no sub-item %s", n)
		}
		b |= bit
	}
	return b
}

// TestUnbuiltSubItems: only unbuilt sub-items are refused before anything
// is loaded; alongside a built one they are named in one warning.
func TestUnbuiltSubItems(t *testing.T) {
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	p := New()
	err := p.Start(rt.Context(), probe.Config{SubItems: bits(t, "mem", "io")}, rt)
	if !errors.Is(err, probe.ErrNotImplemented) || err.Error() != "flamegraph: sub-items mem,io: not supported in the current version" {
		t.Fatalf("Start(mem, io) = %v", err)
	}
	if err := p.checkSubItems(bits(t, "oncpu", "mem_glibc")); err != nil {
		t.Fatal(err)
	}
	var warned []probetest.LogEntry
	for _, e := range rt.LogEntries() {
		if e.Msg == "flamegraph: sub-items not built in this version, ignored" {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 || warned[0].Attrs["sub_items"] != "mem_glibc" {
		t.Errorf("warnings %+v", warned)
	}
	if err := p.checkSubItems(0); err == nil {
		t.Error("no sub-item accepted")
	}
}
