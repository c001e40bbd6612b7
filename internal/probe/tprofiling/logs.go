package tprofiling

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/galago-project/galago/internal/event"
)

// proc is what the outputs say of a process.
type proc struct {
	Comm          string // process.comm
	Name          string // proc.name: a Java process's main class or jar, else its comm
	ContainerID   string
	ContainerName string
}

// logValue is one entry of a log record's Attributes.values.
func logValue(e *Event, c clock) map[string]any {
	v := e.attrs()
	v["event.name"] = e.Name
	v["event.type"] = e.Type
	v["start_time"] = c.wall(e.Start).UnixMilli()
	v["end_time"] = c.wall(e.End()).UnixMilli()
	v["duration"] = float64(e.Dur) / 1e6
	v["count"] = e.Count
	if e.Open {
		v["in_progress"] = true
	}
	return v
}

// threadLogs are profiling_channel=kafka's records: one OpenTelemetry log
// record per thread and report period, its events in Attributes.values,
// as gala-gopher's |log| lines.
func threadLogs(evs []Event, c clock, nowMs int64, procOf func(tgid uint32) proc) ([]event.Log, error) {
	byThread := map[uint32][]int{}
	var tids []uint32
	for i := range evs {
		if _, ok := byThread[evs[i].PID]; !ok {
			tids = append(tids, evs[i].PID)
		}
		byThread[evs[i].PID] = append(byThread[evs[i].PID], i)
	}
	sort.Slice(tids, func(i, j int) bool { return tids[i] < tids[j] })
	out := make([]event.Log, 0, len(tids))
	ts, _ := json.Marshal(nowMs)
	for _, tid := range tids {
		idx := byThread[tid]
		first := &evs[idx[0]]
		p := procOf(first.TGID)
		res, err := json.Marshal(map[string]any{
			"thread.pid": first.PID, "thread.tgid": first.TGID, "thread.comm": first.Comm,
			"proc.name": p.Name, "process.comm": p.Comm, "container.id": p.ContainerID, "container.name": p.ContainerName,
		})
		if err != nil {
			return nil, fmt.Errorf("tprofiling: %w", err)
		}
		vals := make([]map[string]any, 0, len(idx))
		for _, i := range idx {
			vals = append(vals, logValue(&evs[i], c))
		}
		attrs, err := json.Marshal(map[string]any{"values": vals})
		if err != nil {
			return nil, fmt.Errorf("tprofiling: %w", err)
		}
		out = append(out, event.Log{Timestamp: ts, SeverityText: json.RawMessage(`"INFO"`), SeverityNumber: json.RawMessage(`9`),
			Resource: res, Attributes: attrs, Body: json.RawMessage(`""`)})
	}
	return out, nil
}
