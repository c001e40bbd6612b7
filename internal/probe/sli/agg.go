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

// taskRecSize is the size of sli_take's records (struct sli_task_rec).
var taskRecSize = binary.Size(sliSliTaskRec{})

// addTaskRecs adds sli_take's output, whole struct sli_task_rec records
// (scheduler kinds only), to rows[cgroup], or to alone for threads that
// count in the node only. Decoded field by field: a walk over a host's
// threads writes a few hundred bytes for each that ran in the period.
func addTaskRecs(b []byte, rows map[uint64]sliSliRow, alone *sliSliRow) error {
	if len(b)%taskRecSize != 0 {
		return fmt.Errorf("sli: iter/task wrote %d bytes, not a whole number of %d-byte records", len(b), taskRecSize)
	}
	ne := binary.NativeEndian
	for ; len(b) > 0; b = b[taskRecSize:] {
		cgid := ne.Uint64(b)
		row := alone
		var r sliSliRow
		if cgid != 0 {
			r = rows[cgid]
			row = &r
		}
		off := 8
		for k := range len(sliSliTaskRec{}.Sched.S) {
			st := &row.S[k]
			st.Ns += ne.Uint64(b[off:])
			st.Count += ne.Uint64(b[off+8:])
			st.Max = max(st.Max, ne.Uint64(b[off+16:]))
			off += 24
			for i := range st.Buckets {
				st.Buckets[i] += ne.Uint64(b[off:])
				off += 8
			}
		}
		if cgid != 0 {
			rows[cgid] = r
		}
	}
	return nil
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
