package dbsli

import (
	"net/netip"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

var (
	srvAddr = netip.MustParseAddrPort("10.0.0.1:6379")
	cliAddr = netip.MustParseAddrPort("10.0.0.2:40000")
)

func TestAggRecords(t *testing.T) {
	a := newAgg()
	k := rowKey{tgid: 7, fd: 9, method: "GET"}
	for _, ns := range []uint64{1000, 3000, 2000} {
		if !a.add(k, srvAddr, cliAddr, ns) {
			t.Fatal("dropped")
		}
	}
	rows := a.flush()
	if len(a.rows) != 0 || len(rows) != 1 {
		t.Fatalf("flush: %d rows left, %d out", len(a.rows), len(rows))
	}
	r := rows[k]
	end := time.Unix(100, 0)
	recs := ksliView.records(k, r, end, time.Second, true)
	if len(recs) != 2 || recs[0].Table != table.RedisSli || recs[1].Table != table.RedisMaxSli {
		t.Fatalf("records %v", recs)
	}
	want := map[string]string{"tgid": "7", "ins_id": "9", "app": "REDIS", "method": "GET",
		"server_ip": "10.0.0.1", "server_port": "6379", "client_ip": "10.0.0.2", "client_port": "40000"}
	for _, rec := range recs {
		for f, v := range want {
			if got := rec.Str(f); got != v {
				t.Errorf("%s %s = %q, want %q", rec.Table.Name, f, got, v)
			}
		}
	}
	if v := recs[0].Values[table.RedisSli.MustIndex("rtt_nsec")].Num; v != 2000 {
		t.Errorf("rtt_nsec %v, want the mean 2000", v)
	}
	if v := recs[1].Values[table.RedisMaxSli.MustIndex("max_rtt_nsec")].Num; v != 3000 {
		t.Errorf("max_rtt_nsec %v, want 3000", v)
	}
	if recs := ksliView.records(k, r, end, time.Second, false); len(recs) != 1 {
		t.Errorf("without continuous_sampling: %d records, want redis_sli only", len(recs))
	}
}

func TestAggBound(t *testing.T) {
	a := newAgg()
	for i := range maxRows {
		if !a.add(rowKey{fd: uint32(i), method: "GET"}, srvAddr, cliAddr, 1) {
			t.Fatalf("row %d dropped", i)
		}
	}
	if a.add(rowKey{fd: maxRows, method: "GET"}, srvAddr, cliAddr, 1) {
		t.Error("a row past the bound was kept")
	}
	if !a.add(rowKey{fd: 0, method: "GET"}, srvAddr, cliAddr, 1) {
		t.Error("an existing row's request was dropped")
	}
}

func TestEvent(t *testing.T) {
	k := rowKey{tgid: 7, fd: 9, method: "SELECT"}
	r := &row{server: srvAddr, client: cliAddr, count: 1, sum: 20e6, max: 20e6}
	now := time.Unix(100, 0)
	if _, ok := pgView.event(k, r, 20*time.Millisecond, now); ok {
		t.Error("event at the threshold: gala-gopher raises above it only")
	}
	if _, ok := pgView.event(k, r, 0, now); ok {
		t.Error("event with latency_thr unset")
	}
	e, ok := pgView.event(k, r, 10*time.Millisecond, now)
	if !ok {
		t.Fatal("no event above the threshold")
	}
	if e.Entity != "sli" || e.EntityID != "7_9" || e.Metric != "rtt_nsec" || e.PID != 7 ||
		e.IP != "CIP(10.0.0.2:40000), SIP(10.0.0.1:6379)" ||
		e.Message != "Process(TID:7, CIP(10.0.0.2:40000), SIP(10.0.0.1:6379)) SLI(SELECT:20000000) exceed the threshold." {
		t.Errorf("event %+v", e)
	}
}

func TestStatementKind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT pgbench_accounts": "SELECT", "BEGIN": "BEGIN", "CREATE TABLE users": "CREATE", "": "",
	} {
		if got := statementKind(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestViewFeed: a Redis server connection's records, as the capture
// delivers them, make one row per method with the exchanges' latencies;
// a client connection and a request without its reply count nothing.
func TestViewFeed(t *testing.T) {
	p := NewKSLI()
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	p.rt, p.agg, p.conns, p.in = rt, newAgg(), map[uint64]*conn{}, &l7.Interner{Max: internMax}
	h := handler{p}
	h.Conn(&syscap.Conn{ID: 1, TGID: 7, FD: 9, L4: syscap.TCP, Role: l7.Server, Proto: l7.Redis, Local: srvAddr, Remote: cliAddr})
	h.Conn(&syscap.Conn{ID: 2, TGID: 8, FD: 3, L4: syscap.TCP, Role: l7.Client, Proto: l7.Redis, Local: cliAddr, Remote: srvAddr})
	feed := func(id uint64, dir l7.Direction, ts uint64, b string) {
		h.Data(&syscap.Data{ConnID: id, Dir: dir, TS: ts, Size: len(b), Bytes: []byte(b)})
	}
	set := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
	get := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	feed(1, l7.Ingress, 1000, set)
	feed(1, l7.Egress, 1500, "+OK\r\n")
	feed(1, l7.Ingress, 2000, get)
	feed(1, l7.Egress, 2700, "$1\r\nv\r\n")
	feed(1, l7.Ingress, 3000, get+get) // pipelined: both from 3000
	feed(1, l7.Egress, 3900, "$1\r\nv\r\n$1\r\nv\r\n")
	feed(2, l7.Egress, 4000, get)
	feed(2, l7.Ingress, 4100, "$1\r\nv\r\n")
	feed(1, l7.Ingress, 5000, get) // never answered
	h.Close(&syscap.Close{ConnID: 1, TGID: 7})
	rows := p.agg.flush()
	set1 := rows[rowKey{tgid: 7, fd: 9, method: "SET"}]
	get1 := rows[rowKey{tgid: 7, fd: 9, method: "GET"}]
	if len(rows) != 2 || set1 == nil || get1 == nil {
		t.Fatalf("rows %v", rows)
	}
	if set1.count != 1 || set1.sum != 500 || set1.max != 500 {
		t.Errorf("SET %+v", *set1)
	}
	if get1.count != 3 || get1.sum != 700+900+900 || get1.max != 900 {
		t.Errorf("GET %+v", *get1)
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
	if len(p.conns) != 0 {
		t.Errorf("%d connections kept after close", len(p.conns))
	}
}
