package socket

import (
	"encoding/binary"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// tcpKeyBytes builds a struct socket_tcp_key as the BPF side lays it out.
func tcpKeyBytes(tgid uint32, family uint16, client, server []byte, port uint16, role uint8, comm string) []byte {
	b := make([]byte, tcpKeySize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], tgid)
	le.PutUint16(b[4:], family)
	le.PutUint16(b[6:], port)
	copy(b[8:24], client)
	copy(b[24:40], server)
	copy(b[40:56], comm)
	b[56] = role
	return b
}

func tcpValBytes(s tcpSample) []byte {
	b := make([]byte, 0, tcpValSize)
	le := binary.LittleEndian
	for _, v := range s.c {
		b = le.AppendUint64(b, v)
	}
	for _, v := range s.buckets {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint64(b, s.sum)
	b = le.AppendUint64(b, s.maxPeriod[0])
	b = le.AppendUint64(b, s.maxPeriod[1])
	b = le.AppendUint64(b, s.maxNs[0])
	return le.AppendUint64(b, s.maxNs[1])
}

func udpKeyBytes(tgid uint32, family uint16, local []byte, lport uint16, remote []byte, rport uint16) []byte {
	b := make([]byte, udpKeySize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], tgid)
	le.PutUint16(b[4:], family)
	le.PutUint16(b[6:], lport)
	le.PutUint16(b[8:], rport)
	copy(b[12:28], local)
	copy(b[28:44], remote)
	return b
}

func walkReqBytes(netns uint32, family, port uint16) []byte {
	b := make([]byte, WalkReqSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], netns)
	le.PutUint16(b[4:], family)
	le.PutUint16(b[6:], port)
	return b
}

func TestDecodeTCP(t *testing.T) {
	k, err := decodeTCPKey(tcpKeyBytes(42, afInet, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, 80, RoleClient, "curl"))
	if err != nil {
		t.Fatal(err)
	}
	want := tcpKey{tgid: 42, comm: "curl", role: RoleClient, client: netip.MustParseAddr("10.0.0.1"),
		server: netip.MustParseAddr("10.0.0.2"), serverPort: 80, family: afInet}
	if k != want {
		t.Errorf("got %+v\nwant %+v", k, want)
	}
	mapped := netip.MustParseAddr("::ffff:192.168.1.9").As16()
	v6 := netip.MustParseAddr("fd00::1").As16()
	k, err = decodeTCPKey(tcpKeyBytes(7, afInet6, mapped[:], v6[:], 443, RoleServer, "0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if k.client.String() != "192.168.1.9" || k.server.String() != "fd00::1" || k.comm != "0123456789abcdef" || k.role != RoleServer {
		t.Errorf("v6: %+v", k)
	}
	s := tcpSample{sum: 99, maxPeriod: [2]uint64{4, 5}, maxNs: [2]uint64{6, 7}}
	for i := range s.c {
		s.c[i] = uint64(i + 1)
	}
	for i := range s.buckets {
		s.buckets[i] = uint64(100 + i)
	}
	got, err := decodeTCPVal(tcpValBytes(s))
	if err != nil || got != s {
		t.Errorf("value: %+v, %v\nwant %+v", got, err, s)
	}
	for name, raw := range map[string][]byte{
		"short":    tcpKeyBytes(1, afInet, nil, nil, 0, 0, "")[:tcpKeySize-1],
		"family 1": tcpKeyBytes(1, 1, nil, nil, 0, 0, ""),
		"role 2":   tcpKeyBytes(1, afInet, nil, nil, 0, 2, ""),
		"empty":    nil,
	} {
		if _, err := decodeTCPKey(raw); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := decodeTCPVal(make([]byte, tcpValSize+1)); err == nil {
		t.Error("long value: no error")
	}
}

func TestDecodeUDP(t *testing.T) {
	k, err := decodeUDPKey(udpKeyBytes(3, afInet, []byte{0, 0, 0, 0}, 53, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if k.local.String() != "0.0.0.0" || k.localPort != 53 || k.remote.IsValid() || k.tgid != 3 {
		t.Errorf("unconnected: %+v", k)
	}
	k, err = decodeUDPKey(udpKeyBytes(3, afInet, []byte{10, 0, 0, 1}, 5000, []byte{10, 0, 0, 9}, 53))
	if err != nil || k.remote.String() != "10.0.0.9" || k.remotePort != 53 {
		t.Errorf("connected: %+v %v", k, err)
	}
	if _, err := decodeUDPKey(udpKeyBytes(3, 255, nil, 0, nil, 0)); err == nil {
		t.Error("family 255: no error")
	}
	v := make([]byte, udpValSize)
	binary.LittleEndian.PutUint64(v[8:], 30)
	if s, err := decodeUDPVal(v); err != nil || s != (udpSample{sends: 30}) {
		t.Errorf("value %+v %v", s, err)
	}
}

func TestDecodeWalkRequest(t *testing.T) {
	r, err := DecodeWalkRequest(walkReqBytes(4026531840, afInet6, 8080))
	if err != nil || r != (WalkRequest{Netns: 4026531840, Family: afInet6, Port: 8080}) {
		t.Errorf("%+v %v", r, err)
	}
	for name, raw := range map[string][]byte{"short": walkReqBytes(1, afInet, 1)[:WalkReqSize-1], "family 0": walkReqBytes(1, 0, 1)} {
		if _, err := DecodeWalkRequest(raw); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(walkReqBytes(4026531840, afInet, 80))
	f.Add(walkReqBytes(0, afInet6, 53))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeWalkRequest(raw)
		if err != nil {
			return
		}
		if r.Family != afInet && r.Family != afInet6 {
			t.Fatalf("bad request %+v", r)
		}
	})
}

func FuzzDecodeTCPKey(f *testing.F) {
	f.Add(tcpKeyBytes(42, afInet, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, 80, RoleClient, "curl"))
	f.Add(tcpKeyBytes(7, afInet6, nil, nil, 443, RoleServer, "0123456789abcdef"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		k, err := decodeTCPKey(raw)
		if err != nil {
			return
		}
		if !k.client.IsValid() || !k.server.IsValid() || len(k.comm) > 16 || strings.IndexByte(k.comm, 0) >= 0 || k.role > RoleServer {
			t.Fatalf("bad key %+v", k)
		}
	})
}

func FuzzDecodeUDPKey(f *testing.F) {
	f.Add(udpKeyBytes(3, afInet, []byte{10, 0, 0, 1}, 5000, []byte{10, 0, 0, 9}, 53))
	f.Add(udpKeyBytes(3, afInet6, nil, 53, nil, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		k, err := decodeUDPKey(raw)
		if err != nil {
			return
		}
		if !k.local.IsValid() || k.remote.IsValid() != (k.remotePort != 0) {
			t.Fatalf("bad key %+v", k)
		}
	})
}

// TestSeedCorpus keeps the committed fuzz corpora non-empty.
func TestSeedCorpus(t *testing.T) {
	for _, fuzz := range []string{"FuzzDecode", "FuzzDecodeTCPKey", "FuzzDecodeUDPKey"} {
		files, _ := filepath.Glob("testdata/fuzz/" + fuzz + "/*")
		if len(files) == 0 {
			t.Fatalf("no committed seed corpus in testdata/fuzz/%s", fuzz)
		}
		for _, f := range files {
			if _, err := os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func cfgWith(sub uint32, reportEvent int) probe.Config {
	params := probe.DefaultParams()
	params.ReportEvent = reportEvent
	return probe.Config{SubItems: sub, Params: params}
}

func tcpEnt(k tcpKey, s tcpSample) tcpEntry {
	return tcpEntry{key: k, val: s}
}

// TestAggregate checks deltas of monotonic counters, the histogram and its
// per-period maximum, events, idle retirement and the race of a delete with
// an increment, on hand-made map reads.
func TestAggregate(t *testing.T) {
	a := newAggregator()
	t0 := time.Unix(1000, 0)
	srv := tcpKey{tgid: 9, comm: "srv", role: RoleServer, client: netip.MustParseAddr("10.0.0.5"),
		server: netip.MustParseAddr("10.0.0.1"), serverPort: 80, family: afInet}
	var s tcpSample
	// Period 0: 3 passive opens, 2 with an RTT sample (2 ms, 20 ms), an
	// accept overflow, two SYN overflows (one dropped) and a SYN/ACK
	// retransmission, as socket.bpf.c counts them.
	s.c[cPassiveOpen] = 3
	s.c[cAcceptOverflow] = 1
	s.c[cSynOverflow] = 2
	s.c[cListendrop] = 2
	s.c[cRetranSynacks] = 1
	s.buckets[0], s.buckets[2] = 1, 1
	s.sum = 22e6
	s.maxPeriod[0], s.maxNs[0] = 0, 20e6
	// A just-inserted endpoint (zero) is not a row yet.
	fresh := tcpKey{tgid: 1, comm: "x", client: srv.client, server: srv.server, serverPort: 1, family: afInet}
	a.observeTCP([]tcpEntry{tcpEnt(srv, s), tcpEnt(fresh, tcpSample{})}, 0, t0)
	a.observeUDP([]udpEntry{
		{key: udpKey{tgid: 3, local: netip.MustParseAddr("0.0.0.0"), localPort: 53, family: afInet}, val: udpSample{drops: 100}},
		{key: udpKey{tgid: 3, local: netip.MustParseAddr("10.0.0.1"), localPort: 5000, remote: netip.MustParseAddr("10.0.0.9"), remotePort: 53, family: afInet}, val: udpSample{sends: 30}},
	}, t0)
	recs, evs := a.flush(t0, time.Second, cfgWith(bitTCP|bitUDP, 1))
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	var row *table.Record
	var udp []*table.Record
	for _, r := range recs {
		if r.Table == table.EndpointTcp {
			row = r
		} else {
			udp = append(udp, r)
		}
	}
	T := table.EndpointTcp
	for name, want := range map[string]string{"tgid": "9", "comm": "srv", "role": "server", "client_ip": "10.0.0.5",
		"server_ip": "10.0.0.1", "server_port": "80", "protocol": "2"} {
		if got := row.Str(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, unset := range []string{"toa_client_ip", "multi", "req_drops"} {
		if row.Values[T.MustIndex(unset)].Set {
			t.Errorf("%s is set; it is not measured", unset)
		}
	}
	num := func(r *table.Record, name string) float64 { return r.Values[T.MustIndex(name)].Num }
	if num(row, "passive_open") != 3 || num(row, "accept_overflow") != 1 || num(row, "syn_overflow") != 2 || num(row, "listendrop") != 2 || num(row, "retran_synacks") != 1 {
		t.Errorf("counters %+v", row.Values)
	}
	h := row.Values[T.MustIndex("estab_latency")].Hist
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

	// Period 1: one more passive open of 5 ms: the row reports the growth
	// only, and the maximum of its own period (slot 1), not period 0's.
	s.c[cPassiveOpen]++
	s.buckets[1]++
	s.sum += 5e6
	s.maxPeriod[1], s.maxNs[1] = 1, 5e6
	t1 := t0.Add(time.Second)
	a.observeTCP([]tcpEntry{tcpEnt(srv, s), tcpEnt(fresh, tcpSample{})}, 1, t1)
	recs, evs = a.flush(t1, time.Second, cfgWith(bitTCP, 1))
	if len(recs) != 1 || len(evs) != 0 {
		t.Fatalf("period 1: %d records %d events", len(recs), len(evs))
	}
	h = recs[0].Values[T.MustIndex("estab_latency")].Hist
	if num(recs[0], "passive_open") != 1 || num(recs[0], "accept_overflow") != 0 || h.Count() != 1 || h.Counts[1] != 1 || h.Max != 5e6 || h.Sum != 5e6 {
		t.Errorf("period 1: passive_open %v hist %+v", num(recs[0], "passive_open"), h)
	}

	// Idle: measured zeros until idleTimeout, then retired. An increment
	// that raced the delete keeps the row and is reported.
	tIdle := t1.Add(idleTimeout)
	a.observeTCP([]tcpEntry{tcpEnt(srv, s)}, 2, tIdle)
	if idle := a.idleTCP(tIdle); len(idle) != 1 || idle[0] != srv {
		t.Fatalf("idle %v", idle)
	}
	final := s
	final.c[cRetranSynacks]++
	a.retireTCP(srv, final, true, 2, tIdle)
	recs, _ = a.flush(tIdle, time.Second, cfgWith(bitTCP, 0))
	if len(recs) != 1 || num(recs[0], "retran_synacks") != 1 {
		t.Fatalf("raced delete: %d records %+v", len(recs), recs)
	}
	// The next increment re-inserts the endpoint from zero.
	var again tcpSample
	again.c[cSynackSent] = 1
	a.observeTCP([]tcpEntry{tcpEnt(srv, again)}, 3, tIdle.Add(time.Second))
	recs, _ = a.flush(tIdle.Add(time.Second), time.Second, cfgWith(bitTCP, 0))
	if len(recs) != 1 || num(recs[0], "synack_sent") != 1 || num(recs[0], "retran_synacks") != 0 {
		t.Fatalf("re-inserted: %+v", recs)
	}
	// A delete with no growth forgets the endpoint.
	tGone := tIdle.Add(time.Second + idleTimeout)
	a.observeTCP([]tcpEntry{tcpEnt(srv, again)}, 4, tGone)
	a.retireTCP(srv, again, true, 4, tGone)
	if len(a.tcp) != 0 {
		t.Errorf("retired endpoint kept: %+v", a.tcp)
	}
	// An endpoint gone from the map is forgotten; UDP retires the same way.
	a.observeUDP(nil, tGone)
	if len(a.udp) != 0 {
		t.Errorf("udp endpoints left %d", len(a.udp))
	}
}

// TestMonotonicWrap: deltas of counters are modular, as the kernel's u64s.
func TestMonotonicWrap(t *testing.T) {
	e := &tcpEndpoint{latency: table.NewHistogram(estabBounds)}
	e.prev.c[cSynSent] = ^uint64(0)
	var cur tcpSample
	cur.c[cSynSent] = 1
	e.add(&cur, 0, time.Unix(1, 0))
	if e.delta[cSynSent] != 2 {
		t.Errorf("delta across wrap %d, want 2", e.delta[cSynSent])
	}
}

// TestFlushHoldsUnsettled: the growth of an endpoint whose process is not
// observed while the snoopers are not settled waits for the next period:
// it is reported there, with that period's, once the process joins, and
// dropped once they settle without it; growth held MaxHeld periods in a
// row is dropped and counted as expired.
func TestFlushHoldsUnsettled(t *testing.T) {
	a := newAggregator()
	t0 := time.Unix(1000, 0)
	key := func(tgid uint32) tcpKey {
		return tcpKey{tgid: tgid, comm: "c", role: RoleClient, client: netip.MustParseAddr("10.0.0.5"),
			server: netip.MustParseAddr("10.0.0.1"), serverPort: 80, family: afInet}
	}
	sample := func(opens uint64) tcpSample {
		var s tcpSample
		s.c[cActiveOpen] = opens
		return s
	}
	targets := probetest.NewTargets(snoop.Whitelist)
	targets.SetHandled(0)
	cfg := cfgWith(bitTCP, 0)
	cfg.Targets = targets
	opens := func(recs []*table.Record) map[string]float64 {
		out := map[string]float64{}
		for _, r := range recs {
			out[r.Str("tgid")] += r.Values[table.EndpointTcp.MustIndex("active_open")].Num
		}
		return out
	}
	check := func(at time.Time, want map[string]float64, wantExpired uint64) {
		t.Helper()
		recs, _ := a.flush(at, time.Second, cfg)
		if got, exp := opens(recs), a.takeExpired(); !maps.Equal(got, want) || exp != wantExpired {
			t.Fatalf("reported %v, expired %d; want %v, %d", got, exp, want, wantExpired)
		}
	}
	// Not settled: 9 and 7 are held.
	a.observeTCP([]tcpEntry{tcpEnt(key(9), sample(3)), tcpEnt(key(7), sample(1))}, 0, t0)
	check(t0, map[string]float64{}, 0)
	// 9 joins and the snoopers settle: 9's growth of both periods is
	// reported, 7's dropped.
	targets.Set(9)
	targets.SetHandled(math.MaxUint64)
	a.observeTCP([]tcpEntry{tcpEnt(key(9), sample(5)), tcpEnt(key(7), sample(2))}, 1, t0.Add(time.Second))
	check(t0.Add(time.Second), map[string]float64{"9": 5}, 0)
	// 6 never settles: held MaxHeld periods, then dropped and counted.
	targets.SetHandled(0)
	a.observeTCP([]tcpEntry{tcpEnt(key(9), sample(5)), tcpEnt(key(7), sample(2)), tcpEnt(key(6), sample(4))}, 2, t0.Add(2*time.Second))
	for i := range snoop.MaxHeld {
		check(t0.Add(time.Duration(2+i)*time.Second), map[string]float64{"9": 0}, 0)
	}
	check(t0.Add(9*time.Second), map[string]float64{"9": 0}, 1)
}
