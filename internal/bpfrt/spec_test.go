package bpfrt_test

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfrttest"
)

// TestCommonHeaderSpec checks what common.h puts in every object that
// includes it: the maps and variable bpfrt reads and writes by name.
func TestCommonHeaderSpec(t *testing.T) {
	spec, err := bpfrttest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ                 ebpf.MapType
		key, value, entries uint32
	}{
		bpfrt.LostEventsMap:    {ebpf.PerCPUArray, 4, 8, 1},
		bpfrt.FilterModeMap:    {ebpf.Array, 4, 4, 1},
		bpfrt.FilterTGIDsMap:   {ebpf.Hash, 4, 1, 10240},
		bpfrt.FilterCgroupsMap: {ebpf.Hash, 8, 1, 4096},
		"events":               {ebpf.RingBuf, 0, 0, 4096},
	}
	for name, w := range want {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("map %s missing", name)
			continue
		}
		if m.Type != w.typ || m.KeySize != w.key || m.ValueSize != w.value || m.MaxEntries != w.entries {
			t.Errorf("map %s: %s key %d value %d entries %d, want %+v", name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, w)
		}
	}
	v := spec.Variables[bpfrt.WakeupBytesVar]
	if v == nil || !v.Constant() || v.Size() != 8 {
		t.Errorf("%s: %+v, want a const 8-byte variable", bpfrt.WakeupBytesVar, v)
	}
	for name, w := range map[string]struct {
		typ ebpf.ProgramType
		to  string
	}{"test_emit": {ebpf.RawTracepoint, "galago_test_emit"}, "test_sys_enter": {ebpf.RawTracepoint, "sys_enter"}} {
		p := spec.Programs[name]
		if p == nil || p.Type != w.typ || p.AttachTo != w.to {
			t.Errorf("program %s: %+v, want %s on %s", name, p, w.typ, w.to)
		}
	}
	if err := bpfrt.ApplyWakeup(spec, "events", bpfrt.Wakeup{Records: 2, RecordSize: 56}); err != nil {
		t.Fatal(err)
	}
	var got uint64
	if err := spec.Variables[bpfrt.WakeupBytesVar].Get(&got); err != nil || got != 128 {
		t.Errorf("wake-up bytes %d (%v), want 128", got, err)
	}
	if err := bpfrt.ApplyWakeup(spec, "nope", bpfrt.Wakeup{}); err == nil {
		t.Error("ApplyWakeup on a missing map: no error")
	}
}

// TestFeaturesPrivileged checks the probes against facts every supported
// kernel (5.8+, BTF) has, and a hook no kernel has.
func TestFeaturesPrivileged(t *testing.T) {
	bpfrttest.RequirePrivileged(t)
	for _, name := range []string{"sched_process_fork", "sys_enter"} {
		if err := bpfrt.HaveTPBTF(name); err != nil {
			t.Errorf("HaveTPBTF(%s): %v", name, err)
		}
		if err := bpfrt.HaveRawTracepoint(name); err != nil {
			t.Errorf("HaveRawTracepoint(%s): %v", name, err)
		}
	}
	for _, err := range []error{
		bpfrt.HaveTPBTF("galago_no_such_tp"),
		bpfrt.HaveRawTracepoint("galago_no_such_tp"),
		bpfrt.HaveTracepoint("galago", "no_such_tp"),
	} {
		if !errors.Is(err, bpfrt.ErrHookUnavailable) {
			t.Errorf("missing hook: %v, want ErrHookUnavailable", err)
		}
	}
	mnt, err := bpfrt.HaveCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Errorf("HaveCgroup2 = %s: statfs type %#x (%v), want cgroup2", mnt, st.Type, err)
	}
	// Kernel-dependent: logged, not asserted (CI's kernel has neither).
	t.Logf("kprobe: %v; fentry: %v; tracepoint sched/sched_process_fork: %v",
		bpfrt.HaveKprobe(), bpfrt.HaveFentry(), bpfrt.HaveTracepoint("sched", "sched_process_fork"))
}
