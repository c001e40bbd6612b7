package syscap

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// tprofSpec adds the tprofiling section's programs and maps to what
// TestSpec expects of the object.
func tprofSpec(progs map[string]bpfspec.Program, maps map[string]bpfspec.Map) {
	for p, tp := range map[string]string{"syscap_tprof_sys_enter": "sys_enter", "syscap_tprof_sys_exit": "sys_exit",
		"syscap_tprof_switch": "sched_switch", "syscap_tprof_task_exit": "sched_process_exit"} {
		progs[p] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: tp}
	}
	progs["syscap_tprof_pthread_enter"] = bpfspec.Program{Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceUprobeMulti}
	progs["syscap_tprof_pthread_exit"] = bpfspec.Program{Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceUprobeMulti}
	progs["syscap_tprof_gc_start"] = bpfspec.Program{Type: ebpf.Kprobe}
	progs["syscap_tprof_gc_done"] = bpfspec.Program{Type: ebpf.Kprobe}
	progs["syscap_tprof_sample"] = bpfspec.Program{Type: ebpf.PerfEvent}
	maps["tprof_threads"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 4, ValueSize: 48, MaxEntries: 32768}
	maps["tprof_uthreads"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 4, ValueSize: 56, MaxEntries: 32768}
	for _, p := range []string{"syscap_tprof_alloc_enter", "syscap_tprof_alloc_return", "syscap_tprof_free_enter"} {
		progs[p] = bpfspec.Program{Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceUprobeMulti}
	}
	maps["tprof_events"] = bpfspec.Map{Type: ebpf.RingBuf, MaxEntries: 4096}
	maps["tprof_stacks"] = bpfspec.Map{Type: ebpf.StackTrace, KeySize: 4, ValueSize: TprofStackDepth * 8, MaxEntries: 1}
	maps["tprof_stack_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
	maps["tprof_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
}

func TestTprofSpec(t *testing.T) {
	bpfspec.Objects(t, _SyscapBytes, []string{"syscap_x86_bpfel.o", "syscap_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		bpfspec.StructSize(t, spec, "syscap_tprof_rec", tprofRecSize)
		bpfspec.Variables(t, spec, map[string]bpfspec.Variable{"tprof_types": {Size: 4}, "tprof_min_ns": {Size: 8}})
	})
	if tprofRecSize != 112 {
		t.Errorf("tprofiling record of %d bytes, want 112", tprofRecSize)
	}
	if len(tprofCallNames) != int(syscapSyscapTprofCallSYSCAP_TPC_MAX) || len(tprofTypeNames) != numTprof {
		t.Errorf("%d call names for %d calls, %d type names for %d types", len(tprofCallNames), syscapSyscapTprofCallSYSCAP_TPC_MAX, len(tprofTypeNames), numTprof)
	}
}

// tprofRec builds a record byte by byte (offsets as in tprof.bpf.h).
func tprofRec(typ, call uint8, family uint16, saddr, daddr []byte, sport, dport uint16) []byte {
	b := make([]byte, 112)
	le := binary.LittleEndian
	le.PutUint64(b[0:], 1000) // start
	le.PutUint64(b[8:], 250)  // dur
	le.PutUint64(b[16:], 7)   // arg
	le.PutUint64(b[24:], 99)  // ino
	le.PutUint64(b[32:], 100) // ret
	le.PutUint32(b[40:], 11)  // pid
	le.PutUint32(b[44:], 10)  // tgid
	b[48], b[49] = typ, call
	le.PutUint16(b[50:], family)
	le.PutUint16(b[52:], sport)
	le.PutUint16(b[54:], dport)
	copy(b[56:72], saddr)
	copy(b[72:88], daddr)
	copy(b[88:], "CompeteThd2")
	le.PutUint32(b[104:], 5) // user_stack
	return b
}

func TestDecodeTprof(t *testing.T) {
	e, err := DecodeTprof(tprofRec(uint8(TprofNet), 2, afInet, []byte{127, 0, 0, 1}, []byte{127, 0, 0, 1}, 40000, 8080))
	if err != nil {
		t.Fatal(err)
	}
	want := TprofEvent{Start: 1000, Dur: 250, PID: 11, TGID: 10, Comm: "CompeteThd2", Type: TprofNet, Call: 2, Arg: 7, Ret: 100, Ino: 99, UserStack: 5,
		Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8080")}
	if e != want {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	if pe, err := DecodeTprof(tprofRec(uint8(TprofPthread), 21, 0, nil, nil, 0, 0)); err != nil || pe.Type.String() != "pthread_sync" ||
		PthreadFunc(pe.Call) != "sem_wait" || pe.Arg != 7 {
		t.Errorf("pthread_sync record: %+v %v", pe, err)
	}
	if e.Call.String() != "write" || !e.Call.HasFD() || e.Type.String() != "net" {
		t.Errorf("call %s (fd %v), type %s", e.Call, e.Call.HasFD(), e.Type)
	}
	if e, err := DecodeTprof(tprofRec(uint8(TprofLock), uint8(CallFutex), 0, nil, nil, 0, 0)); err != nil || e.Local.IsValid() || e.Call.String() != "futex" || e.Call.HasFD() {
		t.Errorf("futex: %+v %v", e, err)
	}
	var fds []string
	for c := TprofCall(0); int(c) < len(tprofCallNames); c++ {
		if c.HasFD() {
			fds = append(fds, c.String())
		}
	}
	if got := strings.Join(fds, " "); got != "read write readv writev preadv pwritev fsync fdatasync sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg" {
		t.Errorf("calls with an fd: %s", got)
	}
	for name, raw := range map[string][]byte{
		"short":    make([]byte, 111),
		"long":     make([]byte, 113),
		"bad type": tprofRec(10, 0, 0, nil, nil, 0, 0),
		"bad fn":   tprofRec(6, 25, 0, nil, nil, 0, 0),
		"bad gc":   tprofRec(7, 1, 0, nil, nil, 0, 0),
		"bad call": tprofRec(2, 28, 0, nil, nil, 0, 0),
	} {
		if _, err := DecodeTprof(raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeTprof(f *testing.F) {
	f.Add(tprofRec(uint8(TprofNet), 2, afInet6, make([]byte, 16), make([]byte, 16), 1, 2))
	f.Add(make([]byte, 112))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := DecodeTprof(raw)
		if err == nil && (e.Type.String() == "" || int(e.Call) >= len(tprofCallNames)) {
			t.Fatalf("decoded %+v", e)
		}
	})
}
