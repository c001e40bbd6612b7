package proctrack

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
)

// TestSpec checks the embedded object and the other architecture's without
// loading them: the programs and their hooks, the maps, and the record
// layout Go decodes.
func TestSpec(t *testing.T) {
	for _, obj := range []string{"proctrack_x86_bpfel.o", "proctrack_arm64_bpfel.o"} {
		t.Run(obj, func(t *testing.T) {
			b, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			checkSpec(t, b)
		})
	}
	// The embedded object is one of them.
	x86, _ := os.ReadFile("proctrack_x86_bpfel.o")
	arm, _ := os.ReadFile("proctrack_arm64_bpfel.o")
	if !bytes.Equal(_ProctrackBytes, x86) && !bytes.Equal(_ProctrackBytes, arm) {
		t.Error("embedded object is neither committed object")
	}
}

func checkSpec(t *testing.T, obj []byte) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	wantProgs := map[string]struct {
		typ    ebpf.ProgramType
		attach ebpf.AttachType
		to     string
	}{
		"tp_btf_fork": {ebpf.Tracing, ebpf.AttachTraceRawTp, "sched_process_fork"},
		"tp_btf_exec": {ebpf.Tracing, ebpf.AttachTraceRawTp, "sched_process_exec"},
		"tp_btf_exit": {ebpf.Tracing, ebpf.AttachTraceRawTp, "sched_process_exit"},
		"raw_tp_fork": {ebpf.RawTracepoint, ebpf.AttachNone, "sched_process_fork"},
		"raw_tp_exec": {ebpf.RawTracepoint, ebpf.AttachNone, "sched_process_exec"},
		"raw_tp_exit": {ebpf.RawTracepoint, ebpf.AttachNone, "sched_process_exit"},
	}
	if len(spec.Programs) != len(wantProgs) {
		t.Errorf("%d programs, want %d", len(spec.Programs), len(wantProgs))
	}
	for name, w := range wantProgs {
		p := spec.Programs[name]
		if p == nil {
			t.Errorf("program %s missing", name)
			continue
		}
		if p.Type != w.typ || p.AttachType != w.attach || p.AttachTo != w.to {
			t.Errorf("%s: %s/%s/%q, want %s/%s/%q", name, p.Type, p.AttachType, p.AttachTo, w.typ, w.attach, w.to)
		}
		if p.License != "Dual BSD/GPL" {
			t.Errorf("%s: license %q", name, p.License)
		}
	}

	wantMaps := map[string]struct {
		typ                 ebpf.MapType
		key, value, entries uint32
	}{
		"events":      {ebpf.RingBuf, 0, 0, 256 * 1024},
		"lost_events": {ebpf.PerCPUArray, 4, 8, 1},
	}
	for name, w := range wantMaps {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("map %s missing", name)
			continue
		}
		if m.Type != w.typ || m.KeySize != w.key || m.ValueSize != w.value || m.MaxEntries != w.entries {
			t.Errorf("map %s: %s key %d value %d entries %d, want %+v", name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, w)
		}
	}
	if _, ok := spec.Variables["galago_rb_wakeup_bytes"]; !ok {
		t.Error("galago_rb_wakeup_bytes missing")
	}

	// The record layout: 56 bytes, offsets as in proctrack.bpf.c.
	if RecordSize != 56 {
		t.Errorf("RecordSize %d, want 56", RecordSize)
	}
	var r rawEvent
	offs := map[string][2]uintptr{
		"type": {unsafe.Offsetof(r.Type), 0}, "pid": {unsafe.Offsetof(r.Pid), 4},
		"tgid": {unsafe.Offsetof(r.Tgid), 8}, "ppid": {unsafe.Offsetof(r.Ppid), 12},
		"cgroup_id": {unsafe.Offsetof(r.CgroupId), 16}, "timestamp_ns": {unsafe.Offsetof(r.TimestampNs), 24},
		"exit_code": {unsafe.Offsetof(r.ExitCode), 32}, "comm": {unsafe.Offsetof(r.Comm), 40},
	}
	for f, o := range offs {
		if o[0] != o[1] {
			t.Errorf("offset of %s = %d, want %d", f, o[0], o[1])
		}
	}
	// And the BTF in the object agrees with the generated Go type.
	typ, err := spec.Types.AnyTypeByName("proctrack_event")
	if err != nil {
		t.Fatal(err)
	}
	if sz, err := sizeof(typ); err != nil || sz != RecordSize {
		t.Errorf("BTF size of proctrack_event = %d (%v), want %d", sz, err, RecordSize)
	}
}
