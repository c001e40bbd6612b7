package socket

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// record builds a struct socket_event as the BPF side lays it out.
func record(typ EventType, tgid uint32, value uint64, family uint16, src, dst []byte, sport, dport uint16, role uint8, comm string) []byte {
	b := make([]byte, RecordSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(typ))
	le.PutUint32(b[4:], tgid)
	le.PutUint64(b[8:], value)
	copy(b[16:32], src)
	copy(b[32:48], dst)
	le.PutUint16(b[48:], sport)
	le.PutUint16(b[50:], dport)
	le.PutUint16(b[52:], family)
	b[54] = role
	copy(b[56:72], comm)
	return b
}

func TestDecode(t *testing.T) {
	v4 := record(EvActiveOpen, 42, 1500000, afInet, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, 40000, 80, RoleClient, "curl")
	ev, err := Decode(v4)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Type: EvActiveOpen, TGID: 42, Value: 1500000, Src: netip.MustParseAddr("10.0.0.1"),
		Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 40000, DstPort: 80, Family: afInet, Role: RoleClient, Comm: "curl"}
	if ev != want {
		t.Errorf("got %+v\nwant %+v", ev, want)
	}

	mapped := netip.MustParseAddr("::ffff:192.168.1.9").As16()
	v6 := netip.MustParseAddr("fd00::1").As16()
	ev, err = Decode(record(EvAcceptOverflow, 7, 0, afInet6, mapped[:], v6[:], 5555, 443, RoleServer, "0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Src.String() != "192.168.1.9" || ev.Dst.String() != "fd00::1" || ev.Comm != "0123456789abcdef" || ev.Role != RoleServer {
		t.Errorf("v6: %+v", ev)
	}

	for name, raw := range map[string][]byte{
		"short":      v4[:RecordSize-1],
		"type 0":     record(0, 1, 0, afInet, nil, nil, 0, 0, 0, ""),
		"type 99":    record(99, 1, 0, afInet, nil, nil, 0, 0, 0, ""),
		"family 1":   record(EvSynSent, 1, 0, 1, nil, nil, 0, 0, 0, ""),
		"empty":      nil,
		"family 255": record(EvUDPDrop, 1, 0, 255, nil, nil, 0, 0, 0, ""),
	} {
		if _, err := Decode(raw); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(record(EvActiveOpen, 42, 1500000, afInet, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, 40000, 80, RoleClient, "curl"))
	f.Add(record(EvUDPDrop, 1, 100, afInet6, nil, nil, 53, 0, 0, "dns"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := Decode(raw)
		if err != nil {
			return
		}
		if !ev.Src.IsValid() || !ev.Dst.IsValid() || len(ev.Comm) > 16 || strings.IndexByte(ev.Comm, 0) >= 0 {
			t.Fatalf("bad event %+v", ev)
		}
	})
}

// TestSeedCorpus keeps the committed fuzz corpus non-empty.
func TestSeedCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	if len(files) == 0 {
		t.Fatal("no committed seed corpus in testdata/fuzz/FuzzDecode")
	}
	for _, f := range files {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
}

func cfgWith(sub uint32, reportEvent int) probe.Config {
	params := probe.DefaultParams()
	params.ReportEvent = reportEvent
	return probe.Config{SubItems: sub, Params: params}
}

func ev4(typ EventType, tgid uint32, value uint64, src, dst string, sport, dport uint16, role uint8) Event {
	return Event{Type: typ, TGID: tgid, Value: value, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
		SrcPort: sport, DstPort: dport, Family: afInet, Role: role, Comm: "srv"}
}

// TestAggregate checks keys, counters, the histogram, events and aging on
// hand-made events.
func TestAggregate(t *testing.T) {
	a := newAggregator()
	t0 := time.Unix(1000, 0)
	// Two client ports of one client IP fold into one server endpoint.
	a.add(ev4(EvPassiveOpen, 9, 2e6, "10.0.0.5", "10.0.0.1", 40001, 80, RoleServer), t0)
	a.add(ev4(EvPassiveOpen, 9, 20e6, "10.0.0.5", "10.0.0.1", 40002, 80, RoleServer), t0)
	a.add(ev4(EvPassiveOpen, 9, 0, "10.0.0.5", "10.0.0.1", 40003, 80, RoleServer), t0) // no RTT sample
	a.add(ev4(EvAcceptOverflow, 9, 0, "10.0.0.5", "10.0.0.1", 40004, 80, RoleServer), t0)
	a.add(ev4(EvSynOverflow, 9, 1, "10.0.0.5", "10.0.0.1", 40005, 80, RoleServer), t0)
	a.add(ev4(EvSynOverflow, 9, 0, "10.0.0.5", "10.0.0.1", 40006, 80, RoleServer), t0)
	a.add(ev4(EvRetranSynack, 9, 0, "10.0.0.5", "10.0.0.1", 40001, 80, RoleServer), t0)
	a.add(Event{Type: EvUDPDrop, TGID: 3, Value: 100, Src: netip.MustParseAddr("0.0.0.0"), SrcPort: 53,
		Dst: netip.MustParseAddr("0.0.0.0"), Family: afInet}, t0)
	a.add(Event{Type: EvUDPSend, TGID: 3, Value: 30, Src: netip.MustParseAddr("10.0.0.1"), SrcPort: 5000,
		Dst: netip.MustParseAddr("10.0.0.9"), DstPort: 53, Family: afInet}, t0)

	recs, evs := a.flush(t0.Add(time.Second), time.Second, cfgWith(bitTCP|bitUDP, 1))
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	var srv *table.Record
	var udp []*table.Record
	for _, r := range recs {
		if r.Table == table.EndpointTcp {
			srv = r
		} else {
			udp = append(udp, r)
		}
	}
	T := table.EndpointTcp
	for name, want := range map[string]string{"tgid": "9", "comm": "srv", "role": "server", "client_ip": "10.0.0.5",
		"server_ip": "10.0.0.1", "server_port": "80", "protocol": "2"} {
		if got := srv.Str(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, unset := range []string{"toa_client_ip", "multi", "req_drops"} {
		if srv.Values[T.MustIndex(unset)].Set {
			t.Errorf("%s is set; it is not measured", unset)
		}
	}
	num := func(name string) float64 { return srv.Values[T.MustIndex(name)].Num }
	if num("passive_open") != 3 || num("accept_overflow") != 1 || num("syn_overflow") != 2 || num("listendrop") != 2 || num("retran_synacks") != 1 {
		t.Errorf("counters: passive_open %v accept_overflow %v syn_overflow %v listendrop %v retran_synacks %v",
			num("passive_open"), num("accept_overflow"), num("syn_overflow"), num("listendrop"), num("retran_synacks"))
	}
	h := srv.Values[T.MustIndex("estab_latency")].Hist
	if h.Count() != 2 || h.Counts[0] != 1 || h.Counts[2] != 1 || h.Max != 20e6 || h.Sum != 22e6 {
		t.Errorf("histogram %+v", h)
	}
	wantMsg := map[string]string{
		"listendrop":      "TCP listen drops(2).",
		"accept_overflow": "TCP accept queue overflow(1).",
		"syn_overflow":    "TCP syn queue overflow(2).",
		"retran_synacks":  "TCP SYN/ACK retransmission occurs.(1).",
	}
	if len(evs) != len(wantMsg) {
		t.Errorf("%d events, want %d: %+v", len(evs), len(wantMsg), evs)
	}
	for _, e := range evs {
		if e.Message != wantMsg[e.Metric] || e.EntityID != "9_10.0.0.5_10.0.0.1_80_1" ||
			e.IP != "Client 10.0.0.5, Server 10.0.0.1:80" || e.PID != 9 || e.Entity != "endpoint_tcp" {
			t.Errorf("event %+v", e)
		}
	}
	U := table.EndpointUdp
	for _, r := range udp {
		switch r.Str("local_port") {
		case "53":
			if r.Values[U.MustIndex("remote_ip")].Set || r.Values[U.MustIndex("udp_rcv_drops")].Num != 100 {
				t.Errorf("unconnected receiver %+v", r.Values)
			}
		case "5000":
			if r.Str("remote_ip") != "10.0.0.9" || r.Str("remote_port") != "53" || r.Values[U.MustIndex("bind_sends")].Num != 30 {
				t.Errorf("sender %+v", r.Values)
			}
		default:
			t.Errorf("unexpected udp record %+v", r.Values)
		}
	}

	// Next period: measured zeros, no events; report_event=0 silences events.
	recs, evs = a.flush(t0.Add(2*time.Second), time.Second, cfgWith(bitTCP|bitUDP, 0))
	if len(recs) != 3 || len(evs) != 0 {
		t.Fatalf("second period: %d records, %d events", len(recs), len(evs))
	}
	for _, r := range recs {
		if r.Table == table.EndpointTcp && (r.Values[T.MustIndex("passive_open")].Num != 0 || r.Values[T.MustIndex("estab_latency")].Hist.Count() != 0) {
			t.Errorf("counters not reset: %+v", r.Values)
		}
	}
	// A disabled sub-item reports nothing and forgets its endpoints.
	if recs, _ = a.flush(t0.Add(3*time.Second), time.Second, cfgWith(bitUDP, 0)); len(recs) != 2 || len(a.tcp) != 0 {
		t.Errorf("udp only: %d records, %d tcp endpoints", len(recs), len(a.tcp))
	}
	// Idle endpoints age out.
	if recs, _ = a.flush(t0.Add(idleTimeout+time.Minute), time.Second, cfgWith(bitTCP|bitUDP, 0)); len(recs) != 0 || len(a.udp) != 0 {
		t.Errorf("after idle timeout: %d records", len(recs))
	}
}
