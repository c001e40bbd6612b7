package tcp

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// delayFixture builds a struct tcp_delay at the C offsets (tcp.bpf.c).
func delayFixture(tgid uint32, ns uint64, raddr []byte, port, family uint16, role uint8) []byte {
	b := make([]byte, delaySize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], recDelay)
	le.PutUint32(b[4:], tgid)
	le.PutUint64(b[8:], ns)
	copy(b[16:32], raddr)
	le.PutUint16(b[32:], port)
	le.PutUint16(b[34:], family)
	b[36] = role
	return b
}

func TestDecodeDelay(t *testing.T) {
	if delaySize != 40 {
		t.Fatalf("delaySize %d, want 40", delaySize)
	}
	d, err := decodeDelay(delayFixture(9, 61_400_000, v4s, 80, afInet, roleClient))
	if err != nil {
		t.Fatal(err)
	}
	if d.raw.Tgid != 9 || d.raw.DelayNs != 61_400_000 || d.remote != netip.MustParseAddr("10.231.1.2") || d.raw.ServerPort != 80 || d.raw.Role != roleClient {
		t.Errorf("decoded %+v", d)
	}
	mapped := netip.MustParseAddr("::ffff:10.231.1.1").AsSlice()
	if d, err := decodeDelay(delayFixture(9, 1, mapped, 80, afInet6, roleServer)); err != nil || d.remote.String() != "10.231.1.1" {
		t.Errorf("v4-mapped: %v %v", err, d.remote)
	}
	if recType(delayFixture(1, 1, v4s, 1, afInet, roleClient)) != recDelay || recType([]byte{1}) != 0 {
		t.Error("recType")
	}
	for name, b := range map[string][]byte{
		"short":      make([]byte, 8),
		"bad family": delayFixture(1, 1, v4s, 1, 3, roleClient),
		"bad role":   delayFixture(1, 1, v4s, 1, afInet, roleUnknown),
		"conn type":  fixture{typ: recSnapshot, family: afInet}.bytes()[:delaySize],
	} {
		if _, err := decodeDelay(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeDelay(f *testing.F) {
	f.Add(delayFixture(9, 61_400_000, v4s, 80, afInet, roleClient))
	f.Add(delayFixture(9, 1, netip.MustParseAddr("fd00:231::2").AsSlice(), 443, afInet6, roleServer))
	f.Add(make([]byte, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDelay(b)
		if err != nil {
			return
		}
		if !d.remote.IsValid() || d.raw.Type != recDelay {
			t.Fatalf("valid record %+v", d)
		}
	})
}

// TestAggregatorNewFields: tmout_count is a per-period delta of a 16-bit
// counter (wrapping), tcp_oom adds from storage and late records and
// raises gala-gopher's event, both unset without their kernel support.
func TestAggregatorNewFields(t *testing.T) {
	a := newAggregator()
	h := hooksAvail{resets: true, totalRTO: true, oom: true}
	c := fixture{typ: recSnapshot, tgid: 7, cookie: 1, family: afInet, saddr: v4c, daddr: v4s, sport: 40000, dport: 80,
		role: roleClient, totalRTO: 65534}
	a.snapshot([]conn{mustDecode(t, c)}, h, true)
	// Three expirations, across the 16-bit wrap; one OOM abort in storage.
	c.totalRTO, c.tcpOom = 1, 1
	a.snapshot([]conn{mustDecode(t, c)}, h, false)
	// A reset for lack of memory after the close (tcp_close order).
	c.typ = recClose
	cl := mustDecode(t, c)
	a.closed(&cl, h)
	late := mustDecode(t, fixture{typ: recLate, cookie: 1, tcpOom: 1, sendRsts: 1})
	if !a.late(&late) {
		t.Fatal("late record not attributed")
	}
	cfg := probe.Config{SubItems: bitAbnormal, Params: probe.DefaultParams()}
	cfg.Params.ReportEvent = 1
	rows := a.flush()
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	for k, l := range rows {
		r := record(k, l, cfg, h, time.Unix(1, 0), time.Second)
		for name, want := range map[string]float64{"tmout_count": 3, "tcp_oom": 2, "send_rsts": 1} {
			if got, ok := num(r, name); !ok || got != want {
				t.Errorf("%s = %v (set %v), want %v", name, got, ok, want)
			}
		}
		evs := events(k, l, cfg, h, time.Unix(1, 0))
		if len(evs) == 0 || evs[0].Metric != "tcp_oom" || evs[0].Message != "TCP out of memory(2)." ||
			evs[0].EntityID != "7_client_10.231.1.1_10.231.1.2_80_2" {
			t.Errorf("events %+v", evs)
		}
		// Without the kernel support the fields stay unset, no event.
		none := hooksAvail{resets: true}
		r = record(k, l, cfg, none, time.Unix(1, 0), time.Second)
		for _, f := range []string{"tmout_count", "tcp_oom"} {
			if _, ok := num(r, f); ok {
				t.Errorf("%s set without kernel support", f)
			}
		}
		for _, e := range events(k, l, cfg, none, time.Unix(1, 0)) {
			if e.Metric == "tcp_oom" {
				t.Error("tcp_oom event without kernel support")
			}
		}
	}
	// A record of a kernel without total_rto counts nothing.
	if totalRTO(unsetU32) != 0 || totalRTO(70000) != 70000&0xffff {
		t.Error("totalRTO")
	}
}

// TestAggregatorDelay: net_delay samples land in their proc_flow_perf row
// (tgid, role, remote ip, server port), filtered by the snoopers.
func TestAggregatorDelay(t *testing.T) {
	a := newAggregator()
	a.targets = probetest.NewTargets(snoop.Blacklist, 99)
	for _, b := range [][]byte{
		delayFixture(9, 61_000_000, v4s, 80, afInet, roleClient),
		delayFixture(9, 70_000_000, v4s, 80, afInet, roleClient),
		delayFixture(9, 2_000, v4c, 8080, afInet, roleServer),
		delayFixture(99, 5, v4s, 80, afInet, roleClient), // not observed
	} {
		d, err := decodeDelay(b)
		if err != nil {
			t.Fatal(err)
		}
		a.delay(&d)
	}
	flows := a.flushFlows()
	if len(flows) != 2 {
		t.Fatalf("%d rows, want 2", len(flows))
	}
	cli := flows[flowKey{tgid: 9, role: roleClient, remoteIP: "10.231.1.2", serverPort: 80}]
	if cli == nil || cli.Count() != 2 || cli.Sum != 131_000_000 || cli.Max != 70_000_000 {
		t.Fatalf("client row %+v", cli)
	}
	r := flowRecord(flowKey{tgid: 9, role: roleClient, remoteIP: "10.231.1.2", serverPort: 80}, cli, time.Unix(1, 0), time.Second)
	for name, want := range map[string]string{"tgid": "9", "role": "client", "remote_ip": "10.231.1.2", "server_port": "80"} {
		if got := r.Str(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if r.Values[table.ProcFlowPerf.MustIndex("sys_delay")].Set || r.Values[table.ProcFlowPerf.MustIndex("net_delay")].Hist != cli {
		t.Errorf("record values %+v", r.Values)
	}
	if len(a.flushFlows()) != 0 {
		t.Error("flushFlows did not start a new period")
	}
}

// TestAggregatorHoldsUnsettled: a process's rows that the snoopers do not
// observe, while they have not settled about it, wait for the next period
// and are reported there once it joins; held too long, they are dropped
// and counted.
func TestAggregatorHoldsUnsettled(t *testing.T) {
	a := newAggregator()
	targets := probetest.NewTargets(snoop.Whitelist, 9)
	targets.SetHandled(0) // nothing handled yet: not settled
	a.targets = targets
	add := func(tgid uint32, delay uint64) {
		d, err := decodeDelay(delayFixture(tgid, delay, v4s, 80, afInet, roleClient))
		if err != nil {
			t.Fatal(err)
		}
		a.delay(&d)
	}
	count := func(flows map[flowKey]*table.Histogram) map[uint32]uint64 {
		out := map[uint32]uint64{}
		for k, h := range flows {
			out[k.tgid] += h.Count()
		}
		return out
	}
	add(9, 1000)
	add(77, 2000)
	if got := count(a.flushFlows()); len(got) != 1 || got[9] != 1 {
		t.Fatalf("first period %v, want only 9's sample", got)
	}
	targets.Set(9, 77)
	add(77, 3000)
	if got := count(a.flushFlows()); len(got) != 1 || got[77] != 2 {
		t.Fatalf("after 77 joined %v, want 77's two samples", got)
	}
	add(55, 4000)
	for range snoop.MaxHeld {
		if got := count(a.flushFlows()); len(got) != 0 {
			t.Fatalf("holding %v", got)
		}
	}
	if got, n := count(a.flushFlows()), a.takeDropped(); len(got) != 0 || n != 1 {
		t.Fatalf("expired: %v, dropped %d; want none, 1", got, n)
	}
}
