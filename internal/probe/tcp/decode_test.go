package tcp

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// fixture builds a struct tcp_conn at the C offsets (tcp.bpf.c), not
// through the generated Go type, so layout drift is caught.
type fixture struct {
	typ, tgid               uint32
	cookie                  uint64
	comm                    string
	saddr, daddr            []byte
	sport, dport, family    uint16
	role, state             uint8
	netns, gen              uint32
	acked, received         uint64
	segsIn, segsOut, retran uint32
	lost, srtt, synSRTT     uint32
	sendRsts, recvRsts      uint32
	rtoUs                   uint32
	totalRTO, tcpOom        uint32
}

func (f fixture) bytes() []byte {
	b := make([]byte, recordSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], f.typ)
	le.PutUint32(b[4:], f.tgid)
	le.PutUint64(b[8:], f.cookie)
	copy(b[24:40], f.comm)
	copy(b[40:56], f.saddr)
	copy(b[56:72], f.daddr)
	le.PutUint16(b[72:], f.sport)
	le.PutUint16(b[74:], f.dport)
	le.PutUint16(b[76:], f.family)
	b[78], b[79] = f.role, f.state
	le.PutUint32(b[80:], f.netns)
	le.PutUint32(b[84:], f.gen)
	le.PutUint64(b[88:], f.acked)
	le.PutUint64(b[96:], f.received)
	le.PutUint32(b[104:], f.segsIn)
	le.PutUint32(b[108:], f.segsOut)
	le.PutUint32(b[112:], f.retran)
	le.PutUint32(b[120:], f.lost)
	le.PutUint32(b[128:], f.srtt)
	le.PutUint32(b[164:], f.rtoUs)
	le.PutUint32(b[180:], f.totalRTO)
	// struct tcp_counters at 184: send_rsts, receive_rsts, ..., syn_srtt_us
	// at +24, gen +28, tcp_oom +32.
	le.PutUint32(b[184:], f.sendRsts)
	le.PutUint32(b[188:], f.recvRsts)
	le.PutUint32(b[208:], f.synSRTT)
	le.PutUint32(b[212:], f.gen)
	le.PutUint32(b[216:], f.tcpOom)
	return b
}

var (
	v4c = []byte{10, 231, 1, 1}
	v4s = []byte{10, 231, 1, 2}
)

func TestDecode(t *testing.T) {
	if recordSize != 224 {
		t.Fatalf("recordSize %d, want 224", recordSize)
	}
	f := fixture{typ: recSnapshot, tgid: 42, cookie: 7, comm: "curl", saddr: v4c, daddr: v4s, sport: 40000, dport: 80,
		family: afInet, role: roleClient, state: 1, netns: 4026531840, acked: 1000, received: 20, segsIn: 3, segsOut: 4,
		retran: 1, srtt: 150, rtoUs: 204000, sendRsts: 1, synSRTT: 99, totalRTO: 3, tcpOom: 2}
	c, err := decode(f.bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := c.raw
	if r.Tgid != 42 || r.Cookie != 7 || commString(r.Comm[:]) != "curl" || c.local != netip.MustParseAddr("10.231.1.1") ||
		c.remot != netip.MustParseAddr("10.231.1.2") || r.Sport != 40000 || r.Dport != 80 || c.family != afInet ||
		r.BytesAcked != 1000 || r.BytesReceived != 20 || r.SegsIn != 3 || r.SegsOut != 4 || r.TotalRetrans != 1 ||
		r.SrttUs != 150 || r.RtoUs != 204000 || r.C.SendRsts != 1 || r.C.SynSrttUs != 99 || r.Netns != 4026531840 ||
		r.TotalRto != 3 || r.C.TcpOom != 2 {
		t.Errorf("decoded %+v", c)
	}

	// IPv6, and IPv4-mapped IPv6 (a dual-stack socket) reported as IPv4.
	v6 := fixture{typ: recClose, family: afInet6, saddr: netip.MustParseAddr("fd00:231::2").AsSlice(), daddr: netip.MustParseAddr("fd00:231::1").AsSlice()}
	c, err = decode(v6.bytes())
	if err != nil || c.family != afInet6 || c.local.String() != "fd00:231::2" || c.remot.String() != "fd00:231::1" {
		t.Errorf("v6: %v %+v", err, c)
	}
	mapped := fixture{typ: recSnapshot, family: afInet6, saddr: netip.MustParseAddr("::ffff:10.231.1.2").AsSlice(), daddr: netip.MustParseAddr("::ffff:10.231.1.1").AsSlice()}
	c, err = decode(mapped.bytes())
	if err != nil || c.family != afInet || c.local.String() != "10.231.1.2" || c.remot.String() != "10.231.1.1" {
		t.Errorf("v4-mapped: %v %+v", err, c)
	}

	for name, b := range map[string][]byte{
		"short":       make([]byte, 10),
		"bad type":    fixture{typ: 9, family: afInet}.bytes(),
		"bad family":  fixture{typ: recSnapshot, family: 1}.bytes(),
		"zero record": make([]byte, recordSize),
	} {
		if _, err := decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeAll(make([]byte, recordSize+1)); err == nil {
		t.Error("decodeAll accepted a partial record")
	}
	two := append(f.bytes(), v6.bytes()...)
	if cs, err := decodeAll(two); err != nil || len(cs) != 2 {
		t.Errorf("decodeAll: %v, %d records", err, len(cs))
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(fixture{typ: recSnapshot, family: afInet, saddr: v4c, daddr: v4s, comm: "x"}.bytes())
	f.Add(fixture{typ: recLate, cookie: 3}.bytes())
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decode(b)
		if err != nil {
			return
		}
		if c.raw.Type != recLate && !c.local.IsValid() {
			t.Fatalf("valid record without address: %+v", c)
		}
		if strings.ContainsRune(commString(c.raw.Comm[:]), 0) {
			t.Fatalf("comm with NUL: %q", commString(c.raw.Comm[:]))
		}
	})
}

func TestParseHZ(t *testing.T) {
	hz, err := parseHZ(strings.NewReader("# comment\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_X=1\n"))
	if err != nil || hz != 250 {
		t.Errorf("parseHZ = %d, %v", hz, err)
	}
	for _, bad := range []string{"CONFIG_HZ_1000=y\n", "CONFIG_HZ=abc\n", "CONFIG_HZ=0\n"} {
		if _, err := parseHZ(strings.NewReader(bad)); err == nil {
			t.Errorf("parseHZ(%q) accepted", bad)
		}
	}
}

func mustDecode(t *testing.T, f fixture) conn {
	t.Helper()
	c, err := decode(f.bytes())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func num(r *table.Record, name string) (float64, bool) {
	v := r.Values[table.TcpMetric.MustIndex(name)]
	return v.Num, v.Set
}

// TestAggregator drives baseline, snapshots, a close record and a late
// reset through the aggregator and checks the exact row.
func TestAggregator(t *testing.T) {
	a := newAggregator()
	h := hooksAvail{resets: true, hz: true}
	listen := fixture{typ: recListen, family: afInet, saddr: v4s, sport: 80, netns: 1}
	// A connection that existed at start (role unknown, local port 80 is listened on: server).
	old := fixture{typ: recSnapshot, tgid: 5, cookie: 1, comm: "nginx", family: afInet, saddr: v4s, daddr: v4c,
		sport: 80, dport: 50000, netns: 1, acked: 100, received: 200, segsIn: 10, segsOut: 11, srtt: 80}
	a.snapshot([]conn{mustDecode(t, listen), mustDecode(t, old)}, h, true)
	old.acked, old.received, old.segsIn, old.segsOut, old.lost = 150, 260, 14, 15, 2
	// A new accepted connection from the same client IP (another port: same row without report_cport).
	nw := fixture{typ: recSnapshot, tgid: 5, cookie: 2, comm: "nginx", family: afInet, saddr: v4s, daddr: v4c,
		sport: 80, dport: 50001, netns: 1, role: roleServer, acked: 7, received: 9, segsIn: 3, segsOut: 3, srtt: 120, synSRTT: 60}
	a.snapshot([]conn{mustDecode(t, listen), mustDecode(t, old), mustDecode(t, nw)}, h, false)
	// nw closes: final counters, then a reset sent after the close.
	nw.typ, nw.acked, nw.received, nw.segsIn, nw.segsOut, nw.recvRsts = recClose, 17, 19, 5, 6, 1
	cl := mustDecode(t, nw)
	a.closed(&cl, h)
	// A stale snapshot read before the close must not count again.
	stale := nw
	stale.typ, stale.acked = recSnapshot, 10
	a.snapshot([]conn{mustDecode(t, listen), mustDecode(t, old), mustDecode(t, stale)}, h, false)
	late := mustDecode(t, fixture{typ: recLate, cookie: 2, sendRsts: 1})
	if !a.late(&late) {
		t.Fatal("late record not attributed")
	}
	rows := a.flush()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	cfg := probe.Config{SubItems: 0xff, Params: probe.DefaultParams()}
	for k, l := range rows {
		r := record(k, l, cfg, h, time.Unix(100, 0), time.Second)
		for name, want := range map[string]string{"tgid": "5", "comm": "nginx", "role": "server", "client_ip": "10.231.1.1",
			"server_ip": "10.231.1.2", "server_port": "80", "protocol": "2", "client_port": "0", "toa_client_ip": ""} {
			if got := r.Str(name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		for name, want := range map[string]float64{
			"tx_bytes": 50 + 17, "rx_bytes": 60 + 19, "segs_in": 4 + 5, "segs_out": 4 + 6,
			"send_rsts": 1, "receive_rsts": 1, "lost_out": 2, "retran_packets": 0, "retrans_ratio": 0, "syn_srtt_max": 60,
		} {
			if got, ok := num(r, name); !ok || got != want {
				t.Errorf("%s = %v (set %v), want %v", name, got, ok, want)
			}
		}
		for _, unset := range []string{"zero_rcv_wnd_count", "tmout_count", "tcp_oom", "backlog_drops", "snd_buf_limit_count"} {
			if _, ok := num(r, unset); ok {
				t.Errorf("%s set, want unset", unset)
			}
		}
		// srtt: old sampled twice (80, 80), nw twice (120 snapshot, 120 close).
		hs := r.Values[table.TcpMetric.MustIndex("srtt")].Hist
		if hs == nil || hs.Count() != 4 || hs.Sum != 80+80+120+120 || hs.Max != 120 {
			t.Errorf("srtt histogram %+v", hs)
		}
		evs := events(k, l, probe.Config{SubItems: 0xff, Params: probe.Params{DropsThr: 1}}, h, time.Unix(100, 0))
		if len(evs) != 1 || evs[0].Metric != "lost_out" || evs[0].EntityID != "5_server_10.231.1.1_10.231.1.2_80_2" ||
			evs[0].Message != "Number of lost segments estimated by TCP congestion(2)." || evs[0].IP != "CIP(10.231.1.1), SIP(10.231.1.2:80)" {
			t.Errorf("events %+v", evs)
		}
	}
	// report_cport keeps client ports apart; a sub-item off leaves its fields unset.
	a.reportCport = true
	c3 := mustDecode(t, fixture{typ: recClose, tgid: 6, cookie: 3, family: afInet, saddr: v4c, daddr: v4s, sport: 40001, dport: 80, role: roleClient, acked: 5})
	a.closed(&c3, h)
	for k, l := range a.flush() {
		r := record(k, l, probe.Config{SubItems: bitStats}, h, time.Unix(0, 0), time.Second)
		if r.Str("client_port") != "40001" || r.Str("role") != "client" {
			t.Errorf("client row keys %q %q", r.Str("client_port"), r.Str("role"))
		}
		if v, _ := num(r, "tx_bytes"); v != 5 {
			t.Errorf("tx_bytes %v", v)
		}
		if _, ok := num(r, "send_rsts"); ok {
			t.Error("tcp_abnormal off but send_rsts set")
		}
	}
}

// TestDecodeLayout: decode copies records into the generated struct, which
// is right only if its memory layout is the encoded one: same size, and a
// record encoded field by field decodes to the same values.
func TestDecodeLayout(t *testing.T) {
	if got := int(unsafe.Sizeof(tcpTcpConn{})); got != recordSize {
		t.Fatalf("in-memory size %d, encoded size %d", got, recordSize)
	}
	want := tcpTcpConn{Type: recClose, Tgid: 1, Cookie: 2, CgroupId: 3, Sport: 4, Dport: 5, Family: afInet, Role: 6,
		State: 7, Netns: 8, Gen: 9, BytesAcked: 10, BytesReceived: 11, SegsIn: 12, SegsOut: 13, TotalRetrans: 14,
		SkDrops: 15, LostOut: 16, SackedOut: 17, SrttUs: 18, RcvRttUs: 19, SndCwnd: 20, NotsentBytes: 21,
		NotackBytes: 22, Reordering: 23, SndWnd: 24, RcvWnd: 25, AvlSndWnd: 26, RtoUs: 27, AtoUs: 28, SkRcvbuf: 29,
		SkSndbuf: 30, TotalRto: 31}
	want.C.SendRsts, want.C.Gen, want.C.SynSrttUs, want.C.TcpOom = 32, 33, 34, 37
	want.Comm[0], want.Saddr[15], want.Daddr[3] = 'x', 35, 36
	b, err := binary.Append(nil, binary.LittleEndian, &want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.raw != want {
		t.Fatalf("decoded %+v\nwant    %+v", got.raw, want)
	}
}

// TestFirstPerConn: the task_file pass writes a socket once per descriptor
// holding it; only the first snapshot of a connection is kept, listeners
// and other connections are untouched.
func TestFirstPerConn(t *testing.T) {
	a := synth(recSnapshot, 1, 7, 40000, 100, 10)
	b := synth(recSnapshot, 1, 8, 40001, 200, 20)
	dup := a
	dup.raw.Tgid = 2 // what differs is not looked at: the connection is
	l := synth(recListen, 1, 0, 80, 0, 0)
	again := synth(recSnapshot, 1, 7, 40000, 100, 10)
	again.raw.Gen = 1 // the same socket connected again: another connection
	got := firstPerConn([]conn{a, l, dup, b, l, again})
	want := []conn{a, l, b, l, again}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].raw != want[i].raw {
			t.Errorf("record %d: %+v, want %+v", i, got[i].raw, want[i].raw)
		}
	}
}
