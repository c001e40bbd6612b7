package sli

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// bounds are the histogram buckets' upper bounds in ns, as sli.bpf.c's
// bucket_of: 1 µs, 10 µs, 100 µs, 1 ms, 10 ms, 100 ms, 1 s (then +Inf).
var bounds = []float64{1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// field names a kind's gauge; its histogram is the name + "_histo".
type field struct {
	kind sliSliKind
	name string
}

// view is one family of tables: the kinds a sub-item measures and its
// node and container gauge and histogram tables.
type view struct {
	sub                      uint32
	fields                   []field
	nodeG, nodeH, conG, conH *table.Table
}

var views = []view{
	{bitCPU, []field{{sliSliKindSLI_SLEEP, "cpu_sleep"}, {sliSliKindSLI_IOWAIT, "cpu_iowait"}, {sliSliKindSLI_BLOCK, "cpu_block"}, {sliSliKindSLI_RUNDELAY, "cpu_rundelay"}},
		table.SliCpuNodeGauge, table.SliCpuNodeHistogram, table.SliCpuContainerGauge, table.SliCpuContainerHistogram},
	{bitMem, []field{{sliSliKindSLI_RECLAIM, "mem_reclaim"}, {sliSliKindSLI_COMPACT, "mem_compact"}},
		table.SliMemNodeGauge, table.SliMemNodeHistogram, table.SliMemContainerGauge, table.SliMemContainerHistogram},
	{bitIO, []field{{sliSliKindSLI_BIO, "bio_latency"}},
		table.SliIoNodeGauge, table.SliIoNodeHistogram, table.SliIoContainerGauge, table.SliIoContainerHistogram},
}

func addRows(a, b sliSliRow) sliSliRow {
	for k := range a.S {
		a.S[k].Ns += b.S[k].Ns
		a.S[k].Count += b.S[k].Count
		a.S[k].Max = max(a.S[k].Max, b.S[k].Max)
		for i := range a.S[k].Buckets {
			a.S[k].Buckets[i] += b.S[k].Buckets[i]
		}
	}
	return a
}

// addSched adds a thread's record (scheduler kinds only) to row.
func addSched(row *sliSliRow, r *sliSliTaskRec) {
	for k, st := range r.Sched.S {
		to := &row.S[k]
		to.Ns += st.Ns
		to.Count += st.Count
		to.Max = max(to.Max, st.Max)
		for i := range to.Buckets {
			to.Buckets[i] += st.Buckets[i]
		}
	}
}

// decodeTaskRecs decodes sli_take's output: whole struct sli_task_rec
// records.
func decodeTaskRecs(b []byte) ([]sliSliTaskRec, error) {
	size := binary.Size(sliSliTaskRec{})
	if len(b)%size != 0 {
		return nil, fmt.Errorf("sli: iter/task wrote %d bytes, not a whole number of %d-byte records", len(b), size)
	}
	recs := make([]sliSliTaskRec, len(b)/size)
	if _, err := binary.Decode(b, binary.NativeEndian, recs); err != nil {
		return nil, fmt.Errorf("sli: decode iter/task records: %w", err)
	}
	return recs, nil
}

func sumRows(per []sliSliRow) sliSliRow {
	var out sliSliRow
	for _, r := range per {
		out = addRows(out, r)
	}
	return out
}

// records are the rows of one node (containerID "") or container for the
// sub-items of cfg: a gauge row (each kind's summed latency in the period,
// ns, set only when at least one latency of that kind was measured) and,
// with histogram, a histogram row. Nothing for a family with no latency.
func records(cfg probe.Config, containerID, nodeKey string, row sliSliRow, now time.Time, period time.Duration) []*table.Record {
	var out []*table.Record
	for _, v := range views {
		if !cfg.Has(v.sub) {
			continue
		}
		gt, ht, key, id := v.nodeG, v.nodeH, "sli_node_key", nodeKey
		if containerID != "" {
			gt, ht, key, id = v.conG, v.conH, "container_id", containerID
		}
		g := gt.NewRecord(now, period)
		g.SetStr(gt.MustIndex(key), id)
		h := ht.NewRecord(now, period)
		h.SetStr(ht.MustIndex(key), id)
		any := false
		for _, f := range v.fields {
			s := row.S[f.kind]
			if s.Count == 0 {
				continue
			}
			any = true
			g.SetNum(gt.MustIndex(f.name), float64(s.Ns))
			hist := table.NewHistogram(bounds)
			copy(hist.Counts, s.Buckets[:])
			hist.Sum, hist.Max = float64(s.Ns), float64(s.Max)
			h.SetHist(ht.MustIndex(f.name+"_histo"), hist)
		}
		if !any {
			continue
		}
		out = append(out, g)
		if cfg.Has(bitHist) {
			out = append(out, h)
		}
	}
	return out
}
