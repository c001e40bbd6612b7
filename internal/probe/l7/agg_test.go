package l7

import (
	"maps"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

func TestRowKeyOf(t *testing.T) {
	local, remote := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:6379")
	client := syscap.Conn{TGID: 7, L4: syscap.TCP, Role: l7.Client, Proto: l7.Redis, Local: local, Remote: remote}
	k := rowKeyOf(&client, remote, false)
	want := rowKey{tgid: 7, clientIP: local.Addr(), serverIP: remote.Addr(), serverPort: 6379, l4Role: l4TCPClient, l7Role: l7.Client, proto: l7.Redis}
	if k != want {
		t.Errorf("client %+v, want %+v", k, want)
	}
	server := syscap.Conn{TGID: 8, L4: syscap.TCP, Role: l7.Server, Proto: l7.HTTP, Local: netip.MustParseAddrPort("10.0.0.2:80"), Remote: netip.MustParseAddrPort("10.0.0.1:50000")}
	k = rowKeyOf(&server, server.Remote, true)
	want = rowKey{tgid: 8, clientIP: netip.MustParseAddr("10.0.0.1"), serverIP: netip.MustParseAddr("10.0.0.2"), serverPort: 80, l4Role: l4TCPServer, l7Role: l7.Server, proto: l7.HTTP, ssl: true}
	if k != want {
		t.Errorf("server %+v, want %+v", k, want)
	}
	dns := syscap.Conn{TGID: 9, L4: syscap.UDP, Role: l7.Client, Proto: l7.DNS, Local: netip.MustParseAddrPort("10.0.0.1:5353")}
	if k := rowKeyOf(&dns, netip.MustParseAddrPort("10.0.0.53:53"), false); k.l4Role != l4UDP || k.serverPort != 53 || k.serverIP != netip.MustParseAddr("10.0.0.53") {
		t.Errorf("udp %+v", k)
	}
}

// value is the number a record holds in field name, and whether it is set.
func value(r *table.Record, name string) (float64, bool) {
	v := r.Values[r.Table.MustIndex(name)]
	return v.Num, v.Set
}

func TestAggregateAndFlush(t *testing.T) {
	a := newAggregator()
	k := rowKey{tgid: 1, clientIP: netip.MustParseAddr("127.0.0.1"), serverIP: netip.MustParseAddr("127.0.0.1"), serverPort: 80, l7Role: l7.Server, proto: l7.HTTP}
	rpc := a.rpc(k)
	ex := []l7.Exchange{
		{HasRequest: true, HasResponse: true, Start: 100, End: 20_000_100, API: "GET /a"},                        // 20 ms
		{HasRequest: true, HasResponse: true, Start: 200, End: 60_000_200, API: "GET /a", Class: l7.ClientError}, // 60 ms
		{HasRequest: true, HasResponse: true, Start: 300, End: 300 + 5e9, API: "POST /b", Class: l7.ServerError}, // 5 s
		{HasRequest: true, API: "POST /b"},   // no response yet (closed)
		{HasResponse: true, End: 9, API: ""}, // response without request
	}
	for i := range ex {
		a.exchange(k, rpc, &ex[i], nil)
	}
	l := a.link(k)
	l.bytesSent, l.segsSent, l.bytesRecv, l.segsRecv = 300, 3, 100, 4
	recs, _ := a.flush(time.Unix(100, 0), 10*time.Second, true, true, nil)
	byTable := map[string][]*table.Record{}
	for _, r := range recs {
		byTable[r.Table.Name] = append(byTable[r.Table.Name], r)
	}
	if len(byTable["l7_link"]) != 1 || len(byTable["l7_rpc"]) != 1 || len(byTable["l7_rpc_api"]) != 2 {
		t.Fatalf("rows %v", byTable)
	}
	r := byTable["l7_rpc"][0]
	for name, want := range map[string]float64{
		"req_count": 4, "resp_count": 4, "err_count": 2, "throughput_req": 0.4, "throughput_resp": 0.4,
		"latency_sum": 20e6 + 60e6 + 5e9, "latency_avg": (20e6 + 60e6 + 5e9) / 3, "err_ratio": 50,
	} {
		if got, ok := value(r, name); !ok || got != want {
			t.Errorf("l7_rpc %s = %v (set %v), want %v", name, got, ok, want)
		}
	}
	h := r.Values[r.Table.MustIndex("latency")].Hist
	if h == nil || h.Count() != 3 || h.Counts[1] != 1 || h.Counts[2] != 1 || h.Counts[6] != 1 {
		t.Errorf("latency histogram %+v", h)
	}
	for _, r := range byTable["l7_rpc_api"] {
		api := r.Values[r.Table.MustIndex("api")].Str
		c, _ := value(r, "client_err_count")
		s, _ := value(r, "server_err_count")
		n, _ := value(r, "req_count")
		switch api {
		case "GET /a":
			if c != 1 || s != 0 || n != 2 {
				t.Errorf("GET /a: client %v server %v req %v", c, s, n)
			}
		case "POST /b":
			if c != 0 || s != 1 || n != 2 {
				t.Errorf("POST /b: client %v server %v req %v", c, s, n)
			}
		default:
			t.Errorf("api %q", api)
		}
	}
	lr := byTable["l7_link"][0]
	for name, want := range map[string]float64{"bytes_sent": 300, "segs_sent": 3, "bytes_recv": 100, "segs_recv": 4} {
		if got, _ := value(lr, name); got != want {
			t.Errorf("l7_link %s = %v, want %v", name, got, want)
		}
	}
	if lr.Values[lr.Table.MustIndex("ssl")].Str != "no_ssl" || lr.Values[lr.Table.MustIndex("l4_role")].Str != "tcp_client" {
		t.Errorf("labels %+v", lr.Values)
	}
	// The next period starts empty; an unobserved process reports nothing.
	if recs, _ := a.flush(time.Unix(110, 0), 10*time.Second, true, true, nil); len(recs) != 0 {
		t.Errorf("empty period: %d records", len(recs))
	}
	a.rpc(k).add(&ex[0])
	if recs, _ := a.flush(time.Unix(120, 0), 10*time.Second, true, true, probetest.NewTargets(snoop.Whitelist)); len(recs) != 0 {
		t.Errorf("unobserved: %d records", len(recs))
	}
}

// TestFlushHoldsUnsettled: the rows of a process not observed while the
// snoopers are not settled as of its newest data wait for the next flush;
// they are reported there if it turns out observed, dropped if not, and
// dropped and counted after maxHeld flushes in a row. A settled,
// unobserved process's rows are dropped at once, uncounted.
func TestFlushHoldsUnsettled(t *testing.T) {
	a := newAggregator()
	key := func(tgid uint32) rowKey {
		return rowKey{tgid: tgid, clientIP: netip.MustParseAddr("127.0.0.1"), serverIP: netip.MustParseAddr("127.0.0.1"),
			serverPort: 80, l7Role: l7.Client, proto: l7.HTTP}
	}
	ex := l7.Exchange{HasRequest: true, HasResponse: true, Start: 100, End: 200, API: "GET /"}
	put := func(tgid uint32, ts uint64, n int) {
		l := a.link(key(tgid))
		l.last, l.segsSent, l.segsRecv = max(l.last, ts), l.segsSent+uint64(n), l.segsRecv+uint64(n)
		for range n {
			a.exchange(key(tgid), a.rpc(key(tgid)), &ex, nil)
		}
	}
	targets := probetest.NewTargets(snoop.Whitelist)
	reqs := func(recs []*table.Record) map[uint32]float64 {
		out := map[uint32]float64{}
		for _, r := range recs {
			if r.Table.Name == "l7_rpc" {
				tgid, _ := strconv.Atoi(r.Values[r.Table.MustIndex("tgid")].Str)
				n, _ := value(r, "req_count")
				out[uint32(tgid)] += n
			}
		}
		return out
	}
	flush := func(want map[uint32]float64, wantDropped uint64) {
		t.Helper()
		recs, dropped := a.flush(time.Unix(100, 0), time.Second, true, true, targets)
		if got := reqs(recs); !maps.Equal(got, want) || dropped != wantDropped {
			t.Fatalf("reported %v, dropped %d; want %v, %d", got, dropped, want, wantDropped)
		}
	}

	// Events are handled up to 650: 1 is a member, 2 is not, 3 (data at
	// 700) is not yet classified.
	targets.Set(1)
	targets.SetHandled(650)
	put(1, 500, 1)
	put(2, 600, 4)
	put(3, 700, 2)
	flush(map[uint32]float64{1: 1}, 0)
	// 3 joins: its held rows are reported with the new period's.
	targets.Set(1, 3)
	targets.SetHandled(2000)
	put(3, 1500, 1)
	flush(map[uint32]float64{3: 3}, 0)
	// 4 is never classified: held maxHeld times, then dropped and counted.
	put(4, 3000, 5)
	for range snoop.MaxHeld {
		flush(map[uint32]float64{}, 0)
	}
	flush(map[uint32]float64{}, 5)
	flush(map[uint32]float64{}, 0)
	// 5 turns out not a member while held: dropped, uncounted.
	put(5, 4000, 2)
	flush(map[uint32]float64{}, 0)
	targets.SetHandled(5000)
	flush(map[uint32]float64{}, 0)
	if len(a.links) != 0 || len(a.rpcs) != 0 || len(a.apis) != 0 || a.holdback.Holding() {
		t.Errorf("left %d links, %d rpcs, %d apis, holding %v", len(a.links), len(a.rpcs), len(a.apis), a.holdback.Holding())
	}
}

func TestAPICap(t *testing.T) {
	a := newAggregator()
	a.maxAPIs = 3
	k := rowKey{tgid: 1, serverPort: 80, proto: l7.HTTP}
	rpc := a.rpc(k)
	for i := 0; i < 10; i++ {
		e := l7.Exchange{HasRequest: true, API: string(rune('a' + i))}
		a.exchange(k, rpc, &e, nil)
	}
	e := l7.Exchange{HasRequest: true, API: "a"}
	a.exchange(k, rpc, &e, nil)
	if a.overflowed != 7 || len(a.apis) != 4 || a.apis[apiKey{k, OverflowAPI}].req != 7 || a.apis[apiKey{k, "a"}].req != 2 {
		t.Errorf("overflowed %d, rows %d", a.overflowed, len(a.apis))
	}
}
