// Package bpfspec checks the ELF of a committed bpf2go object without
// loading it: which programs it holds and where they attach, which maps it
// declares and their sizes, its load-time variables and the size of the
// structs Go decodes. Only tests import it.
//
// Every BPF package's TestSpec has the same shape:
//
//	func TestSpec(t *testing.T) {
//		bpfspec.Objects(t, _FooBytes, []string{"foo_x86_bpfel.o", "foo_arm64_bpfel.o"},
//			func(t *testing.T, spec *ebpf.CollectionSpec) {
//				bpfspec.Programs(t, spec, map[string]bpfspec.Program{
//					"on_fork": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_fork"},
//				})
//				bpfspec.Maps(t, spec, map[string]bpfspec.Map{
//					"events":      {Type: ebpf.RingBuf, MaxEntries: 256 << 10},
//					"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
//				})
//				bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
//					"galago_rb_wakeup_bytes": {Size: 8, Constant: true},
//				})
//				bpfspec.StructSize(t, spec, "foo_event", RecordSize)
//			})
//	}
//
// Programs and Maps want the complete set (a program or map nobody
// expected is an error too); Variables and StructSize check the named ones.
// It does not import internal/probe, so internal/bpfrt's own tests can use
// it.
package bpfspec

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// License is the license every galago BPF program declares; Program.License
// defaults to it.
const License = "Dual BSD/GPL"

// Objects reads each committed object file (bpf2go writes one per
// architecture, all checked on any host), runs check on its spec in a
// subtest named after the file, and checks that embedded (the generated
// _XxxBytes) is byte for byte one of them: the object the binary carries is
// the one the test checked.
func Objects(t *testing.T, embedded []byte, files []string, check func(t *testing.T, spec *ebpf.CollectionSpec)) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("bpfspec.Objects: no object files named")
	}
	found := false
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		found = found || bytes.Equal(b, embedded)
		t.Run(name, func(t *testing.T) {
			spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			check(t, spec)
		})
	}
	if !found {
		t.Errorf("embedded object is none of %v", files)
	}
}

// Program is what a program must be: its type, attach type, attach target
// (tracepoint name, iterator target; "" for cgroup programs) and license
// (License when empty).
type Program struct {
	Type       ebpf.ProgramType
	AttachType ebpf.AttachType
	AttachTo   string
	License    string
}

// Programs checks that spec holds exactly the programs of want, each as
// described.
func Programs(t testing.TB, spec *ebpf.CollectionSpec, want map[string]Program) {
	t.Helper()
	for _, name := range sortedKeys(spec.Programs) {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected program %s", name)
		}
	}
	for _, name := range sortedKeys(want) {
		w := want[name]
		if w.License == "" {
			w.License = License
		}
		p := spec.Programs[name]
		if p == nil {
			t.Errorf("program %s missing", name)
			continue
		}
		got := Program{Type: p.Type, AttachType: p.AttachType, AttachTo: p.AttachTo, License: p.License}
		if got != w {
			t.Errorf("program %s: %s/%s/%q license %q, want %s/%s/%q license %q",
				name, got.Type, got.AttachType, got.AttachTo, got.License, w.Type, w.AttachType, w.AttachTo, w.License)
		}
	}
}

// Map is what a map must be. Every field is compared, zeros included (a
// ring buffer has no key or value size; BPF_F_NO_PREALLOC sk_storage has no
// max entries).
type Map struct {
	Type       ebpf.MapType
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
}

// Maps checks that spec declares exactly the maps of want, each as
// described. The data sections clang makes for globals (.rodata, .bss,
// .data, ...) are left out: Variables checks what is in them.
func Maps(t testing.TB, spec *ebpf.CollectionSpec, want map[string]Map) {
	t.Helper()
	for _, name := range sortedKeys(spec.Maps) {
		if _, ok := want[name]; !ok && !strings.HasPrefix(name, ".") {
			t.Errorf("unexpected map %s", name)
		}
	}
	for _, name := range sortedKeys(want) {
		w := want[name]
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("map %s missing", name)
			continue
		}
		got := Map{Type: m.Type, KeySize: m.KeySize, ValueSize: m.ValueSize, MaxEntries: m.MaxEntries}
		if got != w {
			t.Errorf("map %s: %s key %d value %d entries %d, want %s key %d value %d entries %d",
				name, got.Type, got.KeySize, got.ValueSize, got.MaxEntries, w.Type, w.KeySize, w.ValueSize, w.MaxEntries)
		}
	}
}

// Variable is what a global variable must be: its size in bytes and
// whether it is `const volatile` (set before load, read-only after).
type Variable struct {
	Size     uint32
	Constant bool
}

// Variables checks that spec has each variable of want, as described.
// Other variables (bpf2go's __galago_export_* type anchors) may exist.
func Variables(t testing.TB, spec *ebpf.CollectionSpec, want map[string]Variable) {
	t.Helper()
	for _, name := range sortedKeys(want) {
		w := want[name]
		v := spec.Variables[name]
		if v == nil {
			t.Errorf("variable %s missing", name)
			continue
		}
		if got := (Variable{Size: v.Size(), Constant: v.Constant()}); got != w {
			t.Errorf("variable %s: %d bytes const %v, want %d bytes const %v", name, got.Size, got.Constant, w.Size, w.Constant)
		}
	}
}

// StructSize checks that the object's BTF has a struct named name of want
// bytes: the record layout the BPF side writes is the size Go decodes.
func StructSize(t testing.TB, spec *ebpf.CollectionSpec, name string, want int) {
	t.Helper()
	var st *btf.Struct
	if err := spec.Types.TypeByName(name, &st); err != nil {
		t.Errorf("struct %s: %v", name, err)
		return
	}
	if int(st.Size) != want {
		t.Errorf("struct %s is %d bytes, want %d", name, st.Size, want)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Filter returns what GALAGO_FILTER (bpf/include/common.h) adds to an
// object, to merge into a test's wanted maps and programs: the filter maps
// and the two pending-classification programs (and the variable
// galago_filter_cfg, 4 bytes, which Variables checks).
func Filter() (map[string]Map, map[string]Program) {
	return map[string]Map{
			"filter_tgids":        {Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 10240},
			"filter_cgroups":      {Type: ebpf.Hash, KeySize: 8, ValueSize: 1, MaxEntries: 4096},
			"filter_pending":      {Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 16384},
			"filter_decided":      {Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 16384},
			"filter_pending_lost": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		}, map[string]Program{
			"galago_filter_fork": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_fork"},
			"galago_filter_exec": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_exec"},
		}
}
