package sli

import (
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

func rowWith(kind sliSliKind, ns, count, maxNs uint64, bucket int) sliSliRow {
	var r sliSliRow
	r.S[kind].Ns, r.S[kind].Count, r.S[kind].Max = ns, count, maxNs
	r.S[kind].Buckets[bucket] = count
	return r
}

// TestRecords: a family's gauge row carries the summed latency of each kind
// measured in the period and omits the others; its histogram row comes
// with the histogram sub-item only; a family with nothing measured, or not
// enabled, has no row; container rows are keyed by container_id.
func TestRecords(t *testing.T) {
	now := time.Unix(1700000000, 0)
	row := addRows(rowWith(sliSliKindSLI_RUNDELAY, 5000, 2, 4000, 1), rowWith(sliSliKindSLI_BIO, 300, 1, 300, 0))
	cfg := probe.Config{SubItems: bitCPU | bitMem | bitIO | bitNode}
	recs := records(cfg, "", "host1", row, now, time.Second)
	if len(recs) != 2 || recs[0].Table != table.SliCpuNodeGauge || recs[1].Table != table.SliIoNodeGauge {
		t.Fatalf("got %d records %v", len(recs), recs)
	}
	g := recs[0]
	if g.Str("sli_node_key") != "host1" || g.Values[g.Table.MustIndex("cpu_rundelay")].Num != 5000 {
		t.Errorf("cpu gauge %+v", g.Values)
	}
	for _, f := range []string{"cpu_sleep", "cpu_iowait", "cpu_block", "cpu_wait", "cpu_longsys"} {
		if g.Values[g.Table.MustIndex(f)].Set {
			t.Errorf("%s set without a measurement", f)
		}
	}
	cfg.SubItems |= bitHist
	recs = records(cfg, "abcdef012345", "", row, now, time.Second)
	if len(recs) != 4 || recs[1].Table != table.SliCpuContainerHistogram || recs[1].Str("container_id") != "abcdef012345" {
		t.Fatalf("got %v", recs)
	}
	h := recs[1].Values[table.SliCpuContainerHistogram.MustIndex("cpu_rundelay_histo")].Hist
	if h.Count() != 2 || h.Counts[1] != 2 || h.Sum != 5000 || h.Max != 4000 {
		t.Errorf("histogram %+v", h)
	}
	if recs := records(probe.Config{SubItems: bitMem | bitNode}, "", "h", row, now, time.Second); len(recs) != 0 {
		t.Errorf("mem with nothing measured: %v", recs)
	}
}

// TestSumRows: per-CPU rows add up, maxima take the largest.
func TestSumRows(t *testing.T) {
	a := rowWith(sliSliKindSLI_RECLAIM, 10, 1, 10, 0)
	b := rowWith(sliSliKindSLI_RECLAIM, 30, 2, 20, 0)
	s := sumRows([]sliSliRow{a, b}).S[sliSliKindSLI_RECLAIM]
	if s.Ns != 40 || s.Count != 3 || s.Max != 20 || s.Buckets[0] != 3 {
		t.Errorf("sum %+v", s)
	}
}

// TestCheckSubItems: a configuration must select data and a view of it.
func TestCheckSubItems(t *testing.T) {
	for _, tc := range []struct {
		sub uint32
		ok  bool
	}{{bitCPU | bitNode, true}, {bitIO | bitCon | bitHist, true}, {bitNode | bitHist, false}, {bitCPU | bitHist, false}} {
		if err := checkSubItems(tc.sub); (err == nil) != tc.ok {
			t.Errorf("sub %#x: err %v", tc.sub, err)
		}
	}
}
