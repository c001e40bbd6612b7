package output

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/galago-project/galago/internal/table"
)

// exportLabels returns the record's labels as every output shows them:
// table key and label fields, then the enrichment labels, the first of a
// repeated name winning, values made valid UTF-8.
func exportLabels(r *table.Record) []table.Label {
	ls := r.Labels()
	out := ls[:0]
	for _, l := range ls {
		dup := false
		for _, seen := range out {
			if seen.Name == l.Name {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if !utf8.ValidString(l.Value) {
			l.Value = strings.ToValidUTF8(l.Value, "\uFFFD")
		}
		out = append(out, l)
	}
	return out
}

// appendValue formats a sample value: integers without exponent or
// fraction (as gala-gopher's probes print them), anything else in the
// shortest form that parses back exactly.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func formatValue(v float64) string { return string(appendValue(nil, v)) }

// appendLabelValue escapes a label value as the Prometheus text format
// requires: backslash, double quote and newline.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendLabelSet writes `{a="x",b="y"` plus an optional extra le label and
// the closing brace; nothing at all when there is no label.
func appendLabelSet(b []byte, labels []table.Label, le string) []byte {
	if len(labels) == 0 && le == "" {
		return b
	}
	b = append(b, '{')
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.Name...)
		b = append(b, `="`...)
		b = appendLabelValue(b, l.Value)
		b = append(b, '"')
	}
	if le != "" {
		if len(labels) > 0 {
			b = append(b, ',')
		}
		b = append(b, `le="`...)
		b = append(b, le...)
		b = append(b, '"')
	}
	return append(b, '}')
}

func appendSample(b []byte, name, suffix string, labels []table.Label, le string, v float64, ts []byte) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	b = appendLabelSet(b, labels, le)
	b = append(b, ' ')
	b = appendValue(b, v)
	b = append(b, ' ')
	b = append(b, ts...)
	return append(b, '\n')
}

// AppendRecordText renders r as Prometheus text lines, one per sample, each
// `name{labels} value timestamp_ms` as gala-gopher's metric log has them.
// Histograms are the record's own period, as standard `_bucket{le}`, `_sum`
// and `_count` lines with cumulative buckets (gala-gopher writes bare
// `name{le}` lines and a `_max` line instead). Unset fields are omitted.
func AppendRecordText(b []byte, r *table.Record) []byte {
	labels := exportLabels(r)
	ts := strconv.AppendInt(make([]byte, 0, 16), r.Time.UnixMilli(), 10)
	for i, f := range r.Table.Fields {
		v := r.Values[i]
		if !f.Kind.IsMetric() || !v.Set {
			continue
		}
		name := r.Table.MetricName(i)
		if f.Kind != table.KindHistogram {
			b = appendSample(b, name, "", labels, "", v.Num, ts)
			continue
		}
		h := v.Hist
		if h == nil {
			continue
		}
		var cum uint64
		for j, bound := range h.Bounds {
			cum += h.Counts[j]
			if math.IsInf(bound, 1) {
				continue // the +Inf line below carries it
			}
			b = appendSample(b, name, "_bucket", labels, formatValue(bound), float64(cum), ts)
		}
		count := h.Count()
		b = appendSample(b, name, "_bucket", labels, "+Inf", float64(count), ts)
		b = appendSample(b, name, "_sum", labels, "", h.Sum, ts)
		b = appendSample(b, name, "_count", labels, "", float64(count), ts)
	}
	return b
}
