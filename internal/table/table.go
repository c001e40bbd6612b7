// Package table holds galago's data model: the table definitions that
// gala-gopher calls "meta" (entity, keys, labels, fields with kinds), the
// records probes fill for one report period, and the store that keeps the
// latest record per key under gala-gopher's imdb limits.
//
// Built-in tables are generated from the reference .meta files (see
// defs_gen.go and meta/); custom probes load their .meta at run time with
// ParseMeta.
package table

import (
	"fmt"
	"strings"
	"time"
)

// Kind is the role of a field in a table, as the .meta "type" names it.
type Kind uint8

const (
	KindKey Kind = iota
	KindLabel
	KindGauge
	KindCounter
	KindHistogram
	KindSummary
)

var kindNames = [...]string{"key", "label", "gauge", "counter", "histogram", "summary"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKind maps a .meta type name to a Kind.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown field type %q", s)
}

// IsMetric reports whether fields of this kind are exported as samples.
func (k Kind) IsMetric() bool { return k >= KindGauge }

// Field is one column of a table.
type Field struct {
	Name        string
	Kind        Kind
	Description string
}

// Table is one gala-gopher meta table.
type Table struct {
	Name    string // table_name, e.g. "tcp_metric"
	Entity  string // entity_name, e.g. "tcp_link"
	Version string // meta version, e.g. "1.0.0"
	Fields  []Field

	index map[string]int
}

// New builds a table and its field index. It panics on a duplicate field
// name: tables are declared at init and a duplicate is a programming error.
func New(name, entity, version string, fields ...Field) *Table {
	t := &Table{Name: name, Entity: entity, Version: version, Fields: fields}
	t.index = make(map[string]int, len(fields))
	for i, f := range fields {
		if _, dup := t.index[f.Name]; dup {
			panic(fmt.Sprintf("table %s: duplicate field %s", name, f.Name))
		}
		t.index[f.Name] = i
	}
	return t
}

// Index returns the position of the named field, or -1.
func (t *Table) Index(name string) int {
	if i, ok := t.index[name]; ok {
		return i
	}
	return -1
}

// MustIndex is Index for names fixed in code; it panics when the field is
// missing, which a unit test catches at once.
func (t *Table) MustIndex(name string) int {
	i := t.Index(name)
	if i < 0 {
		panic(fmt.Sprintf("table %s has no field %s", t.Name, name))
	}
	return i
}

// MetricName is the exported sample name of field i:
// gala_gopher_<entity>_<field>.
func (t *Table) MetricName(i int) string {
	return "gala_gopher_" + t.Entity + "_" + t.Fields[i].Name
}

// HasField reports whether the table declares the named field.
func (t *Table) HasField(name string) bool { return t.Index(name) >= 0 }

// Histogram is a distribution over one period. Counts are per bucket (not
// cumulative), one per bound plus a final overflow bucket (+Inf).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Max    float64
}

// NewHistogram returns an empty histogram over the given ascending bounds.
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// Observe adds one value.
func (h *Histogram) Observe(v float64) { h.ObserveN(v, 1) }

// ObserveN adds n observations of value v.
func (h *Histogram) ObserveN(v float64, n uint64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i] += n
	h.Sum += v * float64(n)
	if v > h.Max {
		h.Max = v
	}
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Value is one cell of a record. A cell that is not Set was not measured and
// is omitted from every output (gala-gopher's "(null)").
type Value struct {
	Set  bool
	Str  string     // key and label fields
	Num  float64    // gauge, counter and summary fields
	Hist *Histogram // histogram fields
}

// Label is one enrichment label added by the store.
type Label struct{ Name, Value string }

// Record is one row of a table for one report period.
type Record struct {
	Table  *Table
	Values []Value
	// Time is the end of the period the values describe; every output stamps
	// the samples with it, so repeated scrapes of one period are idempotent.
	Time time.Time
	// Period is the report period the values cover.
	Period time.Duration
	// Extra holds the enrichment labels, in output order, set by the store.
	Extra []Label
}

// NewRecord returns an empty record of t for the period ending at end.
func (t *Table) NewRecord(end time.Time, period time.Duration) *Record {
	return &Record{Table: t, Values: make([]Value, len(t.Fields)), Time: end, Period: period}
}

// SetStr sets key or label field i.
func (r *Record) SetStr(i int, s string) { r.Values[i] = Value{Set: true, Str: s} }

// SetNum sets gauge, counter or summary field i.
func (r *Record) SetNum(i int, v float64) { r.Values[i] = Value{Set: true, Num: v} }

// SetHist sets histogram field i.
func (r *Record) SetHist(i int, h *Histogram) { r.Values[i] = Value{Set: true, Hist: h} }

// Str returns the string value of the named field ("" when absent or unset).
func (r *Record) Str(name string) string {
	if i := r.Table.Index(name); i >= 0 && r.Values[i].Set {
		return r.Values[i].Str
	}
	return ""
}

// Key identifies the record's row: table name and every key value.
func (r *Record) Key() string {
	var b strings.Builder
	b.WriteString(r.Table.Name)
	for i, f := range r.Table.Fields {
		if f.Kind == KindKey {
			b.WriteByte(0)
			b.WriteString(r.Values[i].Str)
		}
	}
	return b.String()
}

// AppendKey appends Key() to b, for lookups that must not allocate.
func (r *Record) AppendKey(b []byte) []byte {
	b = append(b, r.Table.Name...)
	for i, f := range r.Table.Fields {
		if f.Kind == KindKey {
			b = append(b, 0)
			b = append(b, r.Values[i].Str...)
		}
	}
	return b
}

// Labels returns the record's own key and label fields in table order,
// skipping unset ones, followed by the enrichment labels.
func (r *Record) Labels() []Label {
	out := make([]Label, 0, len(r.Table.Fields)+len(r.Extra))
	for i, f := range r.Table.Fields {
		if (f.Kind == KindKey || f.Kind == KindLabel) && r.Values[i].Set {
			out = append(out, Label{f.Name, r.Values[i].Str})
		}
	}
	return append(out, r.Extra...)
}
