package socket

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
)

// TestSpec checks both architectures' objects without loading them: every
// program the hooks table names with its type and attach point, the maps,
// and the record layout Decode reads.
func TestSpec(t *testing.T) {
	for _, obj := range []string{"socket_x86_bpfel.o", "socket_arm64_bpfel.o"} {
		t.Run(obj, func(t *testing.T) {
			b, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			checkSpec(t, b)
		})
	}
	x86, _ := os.ReadFile("socket_x86_bpfel.o")
	arm, _ := os.ReadFile("socket_arm64_bpfel.o")
	if !bytes.Equal(_SocketBytes, x86) && !bytes.Equal(_SocketBytes, arm) {
		t.Error("embedded object is neither committed object")
	}
}

func checkSpec(t *testing.T, obj []byte) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	// The hooks, plus the owner walk (an iterator, attached apart).
	if len(spec.Programs) != len(hooks)+1 {
		t.Errorf("%d programs, hooks table has %d (+ walk_owners)", len(spec.Programs), len(hooks))
	}
	if w := spec.Programs["walk_owners"]; w == nil || w.Type != ebpf.Tracing || w.AttachType != ebpf.AttachTraceIter || w.AttachTo != "task_file" {
		t.Errorf("walk_owners: %+v, want iter/task_file", w)
	}
	for _, h := range hooks {
		p := spec.Programs[h.prog]
		if p == nil {
			t.Errorf("program %s missing", h.prog)
			continue
		}
		switch h.kind {
		case "tp_btf":
			if p.Type != ebpf.Tracing || p.AttachType != ebpf.AttachTraceRawTp || p.AttachTo != h.target {
				t.Errorf("%s: %s/%s/%q, want tp_btf/%s", h.prog, p.Type, p.AttachType, p.AttachTo, h.target)
			}
		case "cgroup":
			if p.AttachType != h.attach {
				t.Errorf("%s: attach type %s, want %s", h.prog, p.AttachType, h.attach)
			}
		default:
			t.Errorf("%s: unknown hook kind %q", h.prog, h.kind)
		}
	}
	wantMaps := map[string]ebpf.MapType{
		"events":               ebpf.RingBuf,
		"lost_events":          ebpf.PerCPUArray,
		"connect_start":        ebpf.SkStorage,
		"galago_sk_owners":     ebpf.SkStorage,
		"galago_listen_owners": ebpf.Hash,
		"walk_asked":           ebpf.SkStorage,
		"filter_mode":          ebpf.Array,
		"filter_tgids":         ebpf.Hash,
		"filter_cgroups":       ebpf.Hash,
	}
	for name, typ := range wantMaps {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("map %s missing", name)
			continue
		}
		if m.Type != typ {
			t.Errorf("map %s: %s, want %s", name, m.Type, typ)
		}
	}
	if got := spec.Maps["events"].MaxEntries; got != ringSize(1) {
		t.Errorf("events ring %d bytes, want the default %d", got, ringSize(1))
	}
	if _, ok := spec.Variables["galago_rb_wakeup_bytes"]; !ok {
		t.Error("galago_rb_wakeup_bytes missing")
	}
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

func TestRingSize(t *testing.T) {
	for mb, want := range map[int]uint32{0: 1 << 20, 1: 1 << 20, 3: 2 << 20, 8: 8 << 20, 31: 16 << 20, 64: 32 << 20} {
		if got := ringSize(mb); got != want {
			t.Errorf("ringSize(%d) = %d, want %d", mb, got, want)
		}
	}
}
