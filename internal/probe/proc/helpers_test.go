package proc

import (
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// startFor starts a probe with the given sub-items and report period,
// observing pids.
func startFor(t *testing.T, period time.Duration, pids []int, items ...string) (*Probe, *probetest.Runtime) {
	t.Helper()
	f := probe.LookupBuiltin(Name)
	var sub uint32
	for _, item := range items {
		bit, ok := f.SubItemBit(item)
		if !ok {
			t.Fatalf("no sub-item %s", item)
		}
		sub |= bit
	}
	p := New(withPeriod(period))
	rt := probetest.NewRuntime(t)
	cfg := probe.Config{SubItems: sub, Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, pids...)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	return p, rt
}

// finish waits one more period (nothing more may come), stops the probe
// and returns everything it published; it fails t if it lost anything.
func finish(t *testing.T, p *Probe, rt *probetest.Runtime, period time.Duration) ([]*table.Record, []event.Event) {
	t.Helper()
	time.Sleep(period + 100*time.Millisecond)
	rt.Shutdown(t, p)
	recs, evs := rt.Take()
	if n := rt.LostCount(); n != 0 {
		t.Errorf("lost %d", n)
	}
	return recs, evs
}

func sum(recs []*table.Record, tbl *table.Table, field string, match func(*table.Record) bool) float64 {
	var s float64
	i := tbl.MustIndex(field)
	for _, r := range recs {
		if r.Table == tbl && match(r) && r.Values[i].Set {
			s += r.Values[i].Num
		}
	}
	return s
}
