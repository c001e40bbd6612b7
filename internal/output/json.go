package output

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/galago-project/galago/internal/table"
)

// marshalCompact encodes v as compact JSON without HTML escaping (gala-gopher
// writes '<', '>' and '&' as they are) and without a trailing newline.
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// member is one key of an object whose key order matters and whose keys are
// only known at run time (labels, metrics, histogram buckets).
type member struct {
	Key   string
	Value any
}

// object is a JSON object that keeps its members in order.
type object []member

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := marshalCompact(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := marshalCompact(m.Value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// recordJSON is gala-gopher's json metric channel shape.
type recordJSON struct {
	Timestamp  int64  `json:"timestamp"`
	EntityName string `json:"entity_name"`
	TableName  string `json:"table_name"`
	Labels     object `json:"labels"`
	Metrics    object `json:"metrics"`
	Histos     object `json:"histos"`
}

// MarshalRecordJSON renders r as one json-channel object:
// {"timestamp":<ms>,"entity_name":…,"table_name":…,"labels":{…},
// "metrics":{"<field>":"<v>",…},"histos":{"<h>":{"<le>":<cum>,…,"count":N,"sum":S,"max":M}}}.
// Unlike gala-gopher, counter and summary fields are in "metrics" too (it
// keeps gauges only). Label values are strings except a numeric start_time,
// as gala-gopher writes it.
func MarshalRecordJSON(r *table.Record) ([]byte, error) {
	labels := exportLabels(r)
	out := recordJSON{
		Timestamp:  r.Time.UnixMilli(),
		EntityName: r.Table.Entity,
		TableName:  r.Table.Name,
		Labels:     make(object, 0, len(labels)),
		Metrics:    object{},
		Histos:     object{},
	}
	for _, l := range labels {
		var v any = l.Value
		if l.Name == "start_time" {
			if n, err := strconv.ParseUint(l.Value, 10, 64); err == nil {
				v = n
			}
		}
		out.Labels = append(out.Labels, member{l.Name, v})
	}
	for i, f := range r.Table.Fields {
		v := r.Values[i]
		if !f.Kind.IsMetric() || !v.Set {
			continue
		}
		if f.Kind != table.KindHistogram {
			out.Metrics = append(out.Metrics, member{f.Name, formatValue(v.Num)})
			continue
		}
		if v.Hist == nil {
			continue
		}
		h := make(object, 0, len(v.Hist.Bounds)+3)
		var cum uint64
		for j, bound := range v.Hist.Bounds {
			cum += v.Hist.Counts[j]
			h = append(h, member{formatValue(bound), cum})
		}
		h = append(h, member{"count", v.Hist.Count()}, member{"sum", jsonNumber(v.Hist.Sum)}, member{"max", jsonNumber(v.Hist.Max)})
		out.Histos = append(out.Histos, member{f.Name, h})
	}
	return marshalCompact(out)
}

// jsonNumber writes a float as appendValue does (integers without exponent);
// JSON has no NaN or Inf, which become null.
type jsonNumber float64

func (n jsonNumber) MarshalJSON() ([]byte, error) {
	v := float64(n)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return appendValue(nil, v), nil
}
