package bpfspec

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfrttest"
)

// recorder is a testing.TB that keeps the failures instead of reporting
// them, so the checks can be shown to fail.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func spec(t *testing.T) *ebpf.CollectionSpec {
	t.Helper()
	s, err := bpfrttest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	progs = map[string]Program{
		"test_emit":      {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "galago_test_emit"},
		"test_sys_enter": {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "sys_enter", License: License},
	}
	maps = map[string]Map{
		"events":      {Type: ebpf.RingBuf, MaxEntries: 4096},
		"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"runs":        {Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1},
	}
	vars = map[string]Variable{"galago_rb_wakeup_bytes": {Size: 8, Constant: true}, "target_syscall": {Size: 8, Constant: true}}
)

// init adds what GALAGO_FILTER puts in every object that defines it.
func init() {
	fm, fp := Filter()
	for k, v := range fm {
		maps[k] = v
	}
	for k, v := range fp {
		v.License = License
		progs[k] = v
	}
}

func TestMatch(t *testing.T) {
	s := spec(t)
	r := &recorder{TB: t}
	Programs(r, s, progs)
	Maps(r, s, maps)
	Variables(r, s, vars)
	StructSize(r, s, "bpfrttest_event", 56)
	if len(r.errs) != 0 {
		t.Errorf("a matching spec failed: %q", r.errs)
	}
}

func TestMismatch(t *testing.T) {
	s := spec(t)
	with := func(m map[string]Program, k string, v Program) map[string]Program {
		out := map[string]Program{}
		for n, p := range m {
			out[n] = p
		}
		if v == (Program{}) {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	for _, c := range []struct {
		name string
		run  func(tb testing.TB)
		want []string
	}{
		{"program attach", func(tb testing.TB) {
			Programs(tb, s, with(progs, "test_emit", Program{Type: ebpf.RawTracepoint, AttachTo: "other"}))
		}, []string{`program test_emit: RawTracepoint/None/"galago_test_emit" license "Dual BSD/GPL", want RawTracepoint/None/"other" license "Dual BSD/GPL"`}},
		{"program license", func(tb testing.TB) {
			Programs(tb, s, with(progs, "test_emit", Program{Type: ebpf.RawTracepoint, AttachTo: "galago_test_emit", License: "GPL"}))
		}, []string{`program test_emit: RawTracepoint/None/"galago_test_emit" license "Dual BSD/GPL", want RawTracepoint/None/"galago_test_emit" license "GPL"`}},
		{"program unexpected", func(tb testing.TB) {
			Programs(tb, s, with(progs, "test_emit", Program{}))
		}, []string{"unexpected program test_emit"}},
		{"program missing", func(tb testing.TB) {
			Programs(tb, s, with(progs, "nope", Program{Type: ebpf.Tracing}))
		}, []string{"program nope missing"}},
		{"map size", func(tb testing.TB) {
			m := map[string]Map{}
			for k, v := range maps {
				m[k] = v
			}
			m["events"] = Map{Type: ebpf.RingBuf, MaxEntries: 8192}
			delete(m, "runs")
			m["gone"] = Map{Type: ebpf.Hash}
			Maps(tb, s, m)
		}, []string{"unexpected map runs", "map events: RingBuf key 0 value 0 entries 4096, want RingBuf key 0 value 0 entries 8192", "map gone missing"}},
		{"variable", func(tb testing.TB) {
			Variables(tb, s, map[string]Variable{"galago_rb_wakeup_bytes": {Size: 8}, "gone": {Size: 4}})
		}, []string{"variable galago_rb_wakeup_bytes: 8 bytes const true, want 8 bytes const false", "variable gone missing"}},
		{"struct", func(tb testing.TB) {
			StructSize(tb, s, "bpfrttest_event", 48)
		}, []string{"struct bpfrttest_event is 56 bytes, want 48"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			c.run(r)
			if !reflect.DeepEqual(r.errs, c.want) {
				t.Errorf("errors\n got %q\nwant %q", r.errs, c.want)
			}
		})
	}
}
