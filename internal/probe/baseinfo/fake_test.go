package baseinfo

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/table"
)

// byKey indexes records by table name and key values joined with "/".
func byKey(recs []*table.Record) map[string]*table.Record {
	out := map[string]*table.Record{}
	for _, r := range recs {
		var keys []string
		for i, f := range r.Table.Fields {
			if f.Kind == table.KindKey {
				keys = append(keys, r.Values[i].Str)
			}
		}
		out[r.Table.Name+":"+strings.Join(keys, "/")] = r
	}
	return out
}

func keysOf(m map[string]*table.Record) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// want is the exact content of a record: strings for keys and labels,
// float64 for metrics; a field absent from want must be unset.
type want map[string]any

func checkRecord(t *testing.T, r *table.Record, w want) {
	t.Helper()
	if r == nil {
		t.Fatalf("record missing")
	}
	for i, f := range r.Table.Fields {
		v := r.Values[i]
		exp, ok := w[f.Name]
		if !ok {
			if v.Set {
				t.Errorf("%s.%s is set (%q/%v), want unset", r.Table.Name, f.Name, v.Str, v.Num)
			}
			continue
		}
		if !v.Set {
			t.Errorf("%s.%s is unset, want %v", r.Table.Name, f.Name, exp)
			continue
		}
		switch e := exp.(type) {
		case string:
			if v.Str != e {
				t.Errorf("%s.%s = %q, want %q", r.Table.Name, f.Name, v.Str, e)
			}
		case float64:
			if math.Abs(v.Num-e) > 1e-9*math.Max(1, math.Abs(e)) {
				t.Errorf("%s.%s = %v, want %v", r.Table.Name, f.Name, v.Num, e)
			}
		default:
			t.Fatalf("bad want type %T for %s", exp, f.Name)
		}
	}
	for name := range w {
		if !r.Table.HasField(name) {
			t.Errorf("want names unknown field %s.%s", r.Table.Name, name)
		}
	}
}

// fakeResolver maps pids to containers.
type fakeResolver map[int]string

func (f fakeResolver) Process(pid int) (identity.Process, bool) {
	id, ok := f[pid]
	return identity.Process{PID: pid, ContainerID: id}, ok
}
func (f fakeResolver) Container(id string) (identity.Container, bool) {
	return identity.Container{ID: id}, true
}

// collectorOf returns the probe's collector of type T.
func collectorOf[T collector](p *Probe) T {
	for _, s := range p.subs {
		if c, ok := s.c.(T); ok {
			return c
		}
	}
	panic("no such collector")
}
