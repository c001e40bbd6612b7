package tcp

import (
	"bytes"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// TestSpec checks both committed objects without loading them: programs
// and hooks, maps, and the record layout Go decodes.
func TestSpec(t *testing.T) {
	for _, obj := range []string{"tcp_x86_bpfel.o", "tcp_arm64_bpfel.o"} {
		t.Run(obj, func(t *testing.T) {
			b, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			checkSpec(t, b)
		})
	}
	x86, _ := os.ReadFile("tcp_x86_bpfel.o")
	arm, _ := os.ReadFile("tcp_arm64_bpfel.o")
	if !bytes.Equal(_TcpBytes, x86) && !bytes.Equal(_TcpBytes, arm) {
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
		"dump_tcp":            {ebpf.Tracing, ebpf.AttachTraceIter, "task_file"},
		"dump_mptcp":          {ebpf.Tracing, ebpf.AttachTraceIter, "tcp"},
		"on_set_state":        {ebpf.Tracing, ebpf.AttachTraceRawTp, "inet_sock_set_state"},
		"on_send_reset":       {ebpf.Tracing, ebpf.AttachTraceRawTp, "tcp_send_reset"},
		"on_receive_reset":    {ebpf.Tracing, ebpf.AttachTraceRawTp, "tcp_receive_reset"},
		"on_kfree_skb":        {ebpf.Tracing, ebpf.AttachTraceRawTp, "kfree_skb"},
		"on_exceed_buf_limit": {ebpf.Tracing, ebpf.AttachTraceRawTp, "sock_exceed_buf_limit"},
		"on_sock_ops":         {ebpf.SockOps, ebpf.AttachCGroupSockOps, ""},
		"galago_filter_fork":  {ebpf.Tracing, ebpf.AttachTraceRawTp, "sched_process_fork"},
		"galago_filter_exec":  {ebpf.Tracing, ebpf.AttachTraceRawTp, "sched_process_exec"},
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
	}
	wantMaps := map[string]ebpf.MapType{
		"events": ebpf.RingBuf, "lost_events": ebpf.PerCPUArray, "scratch": ebpf.PerCPUArray,
		"tcp_counters": ebpf.SkStorage, "galago_sk_owners": ebpf.SkStorage, "galago_listen_owners": ebpf.Hash, "netns_seen": ebpf.Hash,
		"tcp_delay_pending": ebpf.SkStorage, "filter_tgids": ebpf.Hash, "filter_cgroups": ebpf.Hash,
		"filter_pending": ebpf.Hash, "filter_decided": ebpf.Hash, "filter_pending_lost": ebpf.PerCPUArray,
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
	for _, v := range []string{"kernel_hz", "galago_rb_wakeup_bytes", "delay_epoch", "galago_filter_cfg"} {
		if _, ok := spec.Variables[v]; !ok {
			t.Errorf("variable %s missing", v)
		}
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName("tcp_conn", &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Size) != recordSize {
		t.Errorf("struct tcp_conn is %d bytes, Go decodes %d", st.Size, recordSize)
	}
	if err := spec.Types.TypeByName("tcp_delay", &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Size) != delaySize {
		t.Errorf("struct tcp_delay is %d bytes, Go decodes %d", st.Size, delaySize)
	}
	if err := spec.Types.TypeByName("galago_sk_owner", &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 48 {
		t.Errorf("struct galago_sk_owner is %d bytes, want 48", st.Size)
	}
}
