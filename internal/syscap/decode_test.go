package syscap

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
	"github.com/galago-project/galago/internal/l7"
)

// dataRec builds a DATA record byte by byte: a header (offsets as in
// syscap.bpf.c) and the captured bytes, in a record of class size.
func dataRec(connID uint64, tgid uint32, ts uint64, size uint32, dir uint8, data []byte, class int, peer []byte, port uint16) []byte {
	b := make([]byte, 56+class)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 2)
	le.PutUint32(b[4:], tgid)
	le.PutUint64(b[8:], connID)
	le.PutUint64(b[16:], ts)
	le.PutUint32(b[24:], size)
	le.PutUint16(b[28:], uint16(len(data)))
	b[30] = dir
	if peer != nil {
		b[31] = 1
		copy(b[32:48], peer)
		le.PutUint16(b[48:], port)
		le.PutUint16(b[50:], 2)
	}
	copy(b[56:], data)
	return b
}

func TestLayout(t *testing.T) {
	if dataHdrSize != 56 || connRecSize != 80 || closeRecSize != 24 {
		t.Fatalf("sizes: data header %d, conn %d, close %d", dataHdrSize, connRecSize, closeRecSize)
	}
	var d rawData
	for name, off := range map[string][2]uintptr{
		"tgid": {unsafe.Offsetof(d.Tgid), 4}, "conn_id": {unsafe.Offsetof(d.ConnId), 8}, "ts": {unsafe.Offsetof(d.Ts), 16},
		"size": {unsafe.Offsetof(d.Size), 24}, "len": {unsafe.Offsetof(d.Len), 28}, "dir": {unsafe.Offsetof(d.Dir), 30},
		"flags": {unsafe.Offsetof(d.Flags), 31}, "peer": {unsafe.Offsetof(d.Peer), 32}, "peer_port": {unsafe.Offsetof(d.PeerPort), 48},
		"peer_family": {unsafe.Offsetof(d.PeerFamily), 50},
	} {
		if off[0] != off[1] {
			t.Errorf("data header %s at %d, want %d", name, off[0], off[1])
		}
	}
}

func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _SyscapBytes, []string{"syscap_x86_bpfel.o", "syscap_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		fmaps, fprogs := bpfspec.Filter()
		fprogs["syscap_sys_exit"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sys_exit"}
		fprogs["syscap_sock_send"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sock_send_length"}
		fprogs["syscap_sock_recv"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sock_recv_length"}
		for _, p := range []string{"ssl_write_enter", "ssl_read_enter", "ssl_write_ex_enter", "ssl_read_ex_enter", "go_tls_write_enter", "go_tls_read_enter", "go_tls_return", "ssl_handshake_enter"} {
			fprogs[p] = bpfspec.Program{Type: ebpf.Kprobe, AttachTo: ""}
		}
		fprogs["ssl_return"] = bpfspec.Program{Type: ebpf.Kprobe, AttachTo: ""}
		fprogs["ssl_handshake_return"] = bpfspec.Program{Type: ebpf.Kprobe, AttachTo: ""}
		fprogs["syscap_stat_enter"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sys_enter"}
		fprogs["syscap_stat_exit"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sys_exit"}
		// The per-syscall attachments (attach.go) of the same bodies.
		for _, p := range []string{"syscap_sc_exit", "syscap_stat_sc_enter", "syscap_stat_sc_exit", "syscap_tprof_sc_enter", "syscap_tprof_sc_exit"} {
			fprogs[p] = bpfspec.Program{Type: ebpf.TracePoint}
		}
		tprofSpec(fprogs, fmaps)
		bpfspec.Programs(t, spec, fprogs)
		fmaps["conns"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 8, ValueSize: 48, MaxEntries: 65536}
		fmaps["events"] = bpfspec.Map{Type: ebpf.RingBuf, MaxEntries: 4 << 20}
		fmaps["lost_events"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["conn_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["ssl_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["next_id"] = bpfspec.Map{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["scratch"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: uint32(dataHdrSize + 2*CaptureMax), MaxEntries: 1}
		fmaps["head_buf"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 64, MaxEntries: 1}
		fmaps["ssl_calls"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 8, ValueSize: 40, MaxEntries: 16384}
		fmaps["ssl_fds"] = bpfspec.Map{Type: ebpf.LRUHash, KeySize: 16, ValueSize: 16, MaxEntries: 65536}
		fmaps["go_tls_calls"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 16, ValueSize: 24, MaxEntries: 16384}
		fmaps["sc_stats"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 8, ValueSize: 32, MaxEntries: 16384}
		fmaps["sc_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["sc_starts"] = bpfspec.Map{Type: ebpf.TaskStorage, KeySize: 4, ValueSize: 24}
		fmaps["sc_ioctl"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 16384}
		bpfspec.Maps(t, spec, fmaps)
		bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
			"galago_filter_cfg": {Size: 4}, "galago_rb_wakeup_bytes": {Size: 8, Constant: true},
			"syscap_protos": {Size: 4}, "syscap_cap": {Size: 4}, "syscap_cont_cap": {Size: 4}, "syscap_ssl": {Size: 4}, "sc_classes": {Size: 4}, "sc_fs": {Size: 4},
			"go_tls_conn_data_off": {Size: 8, Constant: true}, "go_tcpconn_fd_off": {Size: 8, Constant: true}, "go_netfd_sysfd_off": {Size: 8, Constant: true},
		})
		bpfspec.StructSize(t, spec, "syscap_data_hdr", dataHdrSize)
		bpfspec.StructSize(t, spec, "syscap_conn_rec", connRecSize)
		bpfspec.StructSize(t, spec, "syscap_close_rec", closeRecSize)
	})
}

func TestDecodeData(t *testing.T) {
	var d Data
	raw := dataRec(7, 42, 1000, 5000, uint8(l7.Ingress), []byte("GET / HTTP/1.1\r\n"), 128, nil, 0)
	if err := decodeData(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.ConnID != 7 || d.TGID != 42 || d.TS != 1000 || d.Size != 5000 || d.Dir != l7.Ingress || string(d.Bytes) != "GET / HTTP/1.1\r\n" || d.Peer.IsValid() {
		t.Errorf("%+v", d)
	}
	raw = dataRec(8, 1, 2, 29, uint8(l7.Egress), []byte("dnsquery"), 128, []byte{10, 0, 0, 53}, 53)
	if err := decodeData(raw, &d); err != nil || d.Peer != netip.MustParseAddrPort("10.0.0.53:53") {
		t.Errorf("peer: %+v %v", d.Peer, err)
	}
	for name, raw := range map[string][]byte{
		"short":         make([]byte, 55),
		"len over data": dataRec(1, 1, 1, 10, 1, make([]byte, 10), 4, nil, 0)[:60],
		"len over max": func() []byte {
			b := dataRec(1, 1, 1, 9000, 1, nil, 8192, nil, 0)
			binary.LittleEndian.PutUint16(b[28:], 5000)
			return b
		}(),
		"bad dir":    dataRec(1, 1, 1, 3, 9, []byte("abc"), 128, nil, 0),
		"size < len": dataRec(1, 1, 1, 2, 1, []byte("abc"), 128, nil, 0),
	} {
		if err := decodeData(raw, &d); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDecodeConnClose(t *testing.T) {
	b := make([]byte, 80)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 1)
	le.PutUint32(b[4:], 99)
	le.PutUint64(b[8:], 5)
	le.PutUint64(b[16:], 77)
	le.PutUint32(b[24:], 12)
	le.PutUint32(b[28:], 4026531833)
	le.PutUint16(b[32:], 10) // AF_INET6
	le.PutUint16(b[34:], 8080)
	le.PutUint16(b[36:], 41000)
	b[38], b[39], b[40], b[41] = 1, 2, 1, 1 // tcp, server, http, ssl
	copy(b[48:64], netip.MustParseAddr("::1").AsSlice())
	copy(b[64:80], netip.MustParseAddr("fe80::1").AsSlice())
	c, err := decodeConn(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != 5 || c.TGID != 99 || c.FD != 12 || c.L4 != TCP || c.Role != l7.Server || c.Proto != l7.HTTP || !c.SSL ||
		c.Local != netip.MustParseAddrPort("[::1]:8080") || c.Remote != netip.MustParseAddrPort("[fe80::1]:41000") {
		t.Errorf("%+v", c)
	}
	b[32] = 3
	if _, err := decodeConn(b); err == nil {
		t.Error("family 3 accepted")
	}
	cl := make([]byte, 24)
	le.PutUint32(cl[0:], 3)
	le.PutUint32(cl[4:], 9)
	le.PutUint64(cl[8:], 11)
	le.PutUint64(cl[16:], 12)
	if got, err := decodeClose(cl); err != nil || got != (Close{ConnID: 11, TGID: 9, TS: 12}) {
		t.Errorf("%+v %v", got, err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(dataRec(7, 42, 1000, 5000, 2, []byte("GET / HTTP/1.1\r\n"), 128, nil, 0))
	f.Add(make([]byte, 80))
	f.Add(make([]byte, 24))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var d Data
		switch recordType(raw) {
		case recData:
			if decodeData(raw, &d) == nil && (len(d.Bytes) > d.Size || len(d.Bytes) > CaptureMax) {
				t.Fatalf("%d bytes of %d", len(d.Bytes), d.Size)
			}
		case recConn:
			_, _ = decodeConn(raw)
		case recClose:
			_, _ = decodeClose(raw)
		}
	})
}
