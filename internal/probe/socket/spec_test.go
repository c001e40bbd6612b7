package socket

import (
	"maps"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: every
// program the hooks table names with its type and attach point, the maps,
// and the record layout Decode reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _SocketBytes, []string{"socket_x86_bpfel.o", "socket_arm64_bpfel.o"}, checkSpec)
	// The offsets the decoders read.
	var tk socketSocketTcpKey
	var tv socketSocketTcpVal
	var uk socketSocketUdpKey
	var wr socketSocketWalkReq
	for name, c := range map[string][2]uintptr{
		"tcp_key.family":      {unsafe.Offsetof(tk.Family), 4},
		"tcp_key.server_port": {unsafe.Offsetof(tk.ServerPort), 6},
		"tcp_key.client":      {unsafe.Offsetof(tk.Client), 8},
		"tcp_key.server":      {unsafe.Offsetof(tk.Server), 24},
		"tcp_key.comm":        {unsafe.Offsetof(tk.Comm), 40},
		"tcp_key.role":        {unsafe.Offsetof(tk.Role), 56},
		"tcp_val.lat_buckets": {unsafe.Offsetof(tv.LatBuckets), 8 * uintptr(nTCPCounters)},
		"tcp_val.lat_sum":     {unsafe.Offsetof(tv.LatSum), 8 * uintptr(nTCPCounters+nBuckets)},
		"tcp_val.max_period":  {unsafe.Offsetof(tv.MaxPeriod), 8 * uintptr(nTCPCounters+nBuckets+1)},
		"tcp_val.max_ns":      {unsafe.Offsetof(tv.MaxNs), 8 * uintptr(nTCPCounters+nBuckets+3)},
		"udp_key.remote_port": {unsafe.Offsetof(uk.RemotePort), 8},
		"udp_key.local":       {unsafe.Offsetof(uk.Local), 12},
		"udp_key.remote":      {unsafe.Offsetof(uk.Remote), 28},
		"walk_req.port":       {unsafe.Offsetof(wr.Port), 6},
	} {
		if c[0] != c[1] {
			t.Errorf("%s at %d, the decoder reads %d", name, c[0], c[1])
		}
	}
	if len(tv.LatBuckets) != len(estabBounds)+1 || len(tv.Counters) != len(tcpCounterFields) {
		t.Errorf("%d buckets for %d bounds, %d counters for %d fields", len(tv.LatBuckets), len(estabBounds), len(tv.Counters), len(tcpCounterFields))
	}
}

// cgroupProgType is the program type each cgroup attach point of the hooks
// table takes.
var cgroupProgType = map[ebpf.AttachType]ebpf.ProgramType{
	ebpf.AttachCGroupInetIngress:   ebpf.CGroupSKB,
	ebpf.AttachCGroupInetEgress:    ebpf.CGroupSKB,
	ebpf.AttachCGroupInet4PostBind: ebpf.CGroupSock,
	ebpf.AttachCGroupInet6PostBind: ebpf.CGroupSock,
	ebpf.AttachCGroupSockOps:       ebpf.SockOps,
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
		case "cgroup", "sockops":
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
	fmaps, fprogs := bpfspec.Filter()
	maps.Copy(progs, fprogs)
	bpfspec.Programs(t, spec, progs)
	wantMaps := map[string]bpfspec.Map{
		"events":               {Type: ebpf.RingBuf, MaxEntries: 64 << 10},
		"tcp_endpoints":        {Type: ebpf.Hash, KeySize: tcpKeySize, ValueSize: tcpValSize, MaxEntries: 16384},
		"udp_endpoints":        {Type: ebpf.Hash, KeySize: udpKeySize, ValueSize: udpValSize, MaxEntries: 16384},
		"agg_lost":             {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"lost_events":          {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"galago_sk_owners":     {Type: ebpf.SkStorage, KeySize: 4, ValueSize: 48},
		"galago_listen_owners": {Type: ebpf.Hash, KeySize: 8, ValueSize: 48, MaxEntries: 16384},
		"walk_asked":           {Type: ebpf.SkStorage, KeySize: 4, ValueSize: 1},
	}
	maps.Copy(wantMaps, fmaps)
	bpfspec.Maps(t, spec, wantMaps)
	bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
		"galago_rb_wakeup_bytes": {Size: 8, Constant: true},
		"socket_period":          {Size: 8},
		"socket_tcp_zero":        {Size: tcpValSize, Constant: true},
		"socket_udp_zero":        {Size: udpValSize, Constant: true},
		"galago_filter_cfg":      {Size: 4},
	})
	// No preallocation: a deleted endpoint's element is not reused under a
	// hook still holding it (see socket.bpf.c).
	for _, name := range []string{"tcp_endpoints", "udp_endpoints"} {
		if m := spec.Maps[name]; m != nil && m.Flags&unix.BPF_F_NO_PREALLOC == 0 {
			t.Errorf("%s: flags %#x, want BPF_F_NO_PREALLOC", name, m.Flags)
		}
	}
	bpfspec.StructSize(t, spec, "socket_walk_req", WalkReqSize)
	bpfspec.StructSize(t, spec, "socket_tcp_key", tcpKeySize)
	bpfspec.StructSize(t, spec, "socket_tcp_val", tcpValSize)
	bpfspec.StructSize(t, spec, "socket_udp_key", udpKeySize)
	bpfspec.StructSize(t, spec, "socket_udp_val", udpValSize)
	bpfspec.StructSize(t, spec, "galago_sk_owner", 48)
}
