package socket

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: every
// program the hooks table names with its type and attach point, the maps,
// and the record layout Decode reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _SocketBytes, []string{"socket_x86_bpfel.o", "socket_arm64_bpfel.o"}, checkSpec)
	if got := unsafe.Sizeof(socketSocketEvent{}); got != RecordSize {
		t.Errorf("sizeof(struct socket_event) = %d, RecordSize %d", got, RecordSize)
	}
	if off := unsafe.Offsetof(socketSocketEvent{}.Comm); off != 56 {
		t.Errorf("comm at %d, Decode reads 56", off)
	}
	if off := unsafe.Offsetof(socketSocketEvent{}.Sport); off != 48 {
		t.Errorf("sport at %d, Decode reads 48", off)
	}
}

// cgroupProgType is the program type each cgroup attach point of the hooks
// table takes.
var cgroupProgType = map[ebpf.AttachType]ebpf.ProgramType{
	ebpf.AttachCGroupInetIngress:   ebpf.CGroupSKB,
	ebpf.AttachCGroupInetEgress:    ebpf.CGroupSKB,
	ebpf.AttachCGroupInet4PostBind: ebpf.CGroupSock,
	ebpf.AttachCGroupInet6PostBind: ebpf.CGroupSock,
}

func checkSpec(t *testing.T, spec *ebpf.CollectionSpec) {
	// The hooks, plus the owner walk (an iterator, attached apart).
	progs := map[string]bpfspec.Program{
		"walk_owners": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceIter, AttachTo: "task_file"},
	}
	for _, h := range hooks {
		switch h.kind {
		case "tp_btf":
			progs[h.prog] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: h.target}
		case "cgroup":
			typ, ok := cgroupProgType[h.attach]
			if !ok {
				t.Errorf("%s: no program type known for attach type %s", h.prog, h.attach)
			}
			progs[h.prog] = bpfspec.Program{Type: typ, AttachType: h.attach}
		default:
			t.Errorf("%s: unknown hook kind %q", h.prog, h.kind)
		}
	}
	if len(progs) != len(hooks)+1 {
		t.Errorf("hooks table names %d programs, %d distinct (+ walk_owners)", len(hooks), len(progs)-1)
	}
	bpfspec.Programs(t, spec, progs)
	bpfspec.Maps(t, spec, map[string]bpfspec.Map{
		"events":               {Type: ebpf.RingBuf, MaxEntries: ringSize(1)},
		"lost_events":          {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"connect_start":        {Type: ebpf.SkStorage, KeySize: 4, ValueSize: 8},
		"galago_sk_owners":     {Type: ebpf.SkStorage, KeySize: 4, ValueSize: 32},
		"galago_listen_owners": {Type: ebpf.Hash, KeySize: 8, ValueSize: 32, MaxEntries: 16384},
		"walk_asked":           {Type: ebpf.SkStorage, KeySize: 4, ValueSize: 1},
		"filter_mode":          {Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1},
		"filter_tgids":         {Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 10240},
		"filter_cgroups":       {Type: ebpf.Hash, KeySize: 8, ValueSize: 1, MaxEntries: 4096},
	})
	bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
		"galago_rb_wakeup_bytes": {Size: 8, Constant: true},
	})
	bpfspec.StructSize(t, spec, "socket_event", RecordSize)
	bpfspec.StructSize(t, spec, "galago_sk_owner", 32)
}

func TestRingSize(t *testing.T) {
	for mb, want := range map[int]uint32{0: 1 << 20, 1: 1 << 20, 3: 2 << 20, 8: 8 << 20, 31: 16 << 20, 64: 32 << 20} {
		if got := ringSize(mb); got != want {
			t.Errorf("ringSize(%d) = %d, want %d", mb, got, want)
		}
	}
}
