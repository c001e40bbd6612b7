package sli

import (
	"encoding/binary"
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

// TestTaskRecs: the walk's records add, kind by kind, into the row of
// their cgroup or the node-only row (max is the larger); a partial record
// is an error and adds nothing.
func TestTaskRecs(t *testing.T) {
	var a, b, c sliSliTaskRec
	a.Cgid, b.Cgid, c.Cgid = 7, 0, 7
	a.Sched.S[sliSliKindSLI_SLEEP].Ns, a.Sched.S[sliSliKindSLI_SLEEP].Count, a.Sched.S[sliSliKindSLI_SLEEP].Max = 900, 2, 600
	a.Sched.S[sliSliKindSLI_SLEEP].Buckets[2] = 2
	b.Sched.S[sliSliKindSLI_BLOCK].Ns, b.Sched.S[sliSliKindSLI_BLOCK].Count, b.Sched.S[sliSliKindSLI_BLOCK].Max = 50, 1, 50
	b.Sched.S[sliSliKindSLI_BLOCK].Buckets[7] = 1
	c.Sched.S[sliSliKindSLI_RUNDELAY].Ns, c.Sched.S[sliSliKindSLI_RUNDELAY].Count, c.Sched.S[sliSliKindSLI_RUNDELAY].Max = 30, 3, 20
	c.Sched.S[sliSliKindSLI_RUNDELAY].Buckets[0] = 3
	raw, err := binary.Append(nil, binary.NativeEndian, []sliSliTaskRec{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[uint64]sliSliRow{7: rowWith(sliSliKindSLI_SLEEP, 100, 1, 700, 2)}
	var alone sliSliRow
	if err := addTaskRecs(raw, rows, &alone); err != nil {
		t.Fatal(err)
	}
	if s := rows[7].S[sliSliKindSLI_SLEEP]; s.Ns != 1000 || s.Count != 3 || s.Max != 700 || s.Buckets[2] != 3 {
		t.Errorf("cgroup 7 sleep %+v", s)
	}
	if s := rows[7].S[sliSliKindSLI_RUNDELAY]; s.Ns != 30 || s.Count != 3 || s.Max != 20 || s.Buckets[0] != 3 {
		t.Errorf("cgroup 7 run delay %+v", s)
	}
	if s := alone.S[sliSliKindSLI_BLOCK]; s.Ns != 50 || s.Count != 1 || s.Max != 50 || s.Buckets[7] != 1 {
		t.Errorf("node-only block %+v", s)
	}
	if len(rows) != 1 || alone.S[sliSliKindSLI_SLEEP].Count != 0 {
		t.Errorf("rows %v, node-only %+v", rows, alone)
	}
	before := rows[7]
	if err := addTaskRecs(raw[:len(raw)-1], rows, &alone); err == nil || rows[7] != before {
		t.Errorf("a partial record: %v, row %+v", err, rows[7])
	}
}
