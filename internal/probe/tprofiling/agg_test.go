package tprofiling

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
)

const ms = uint64(time.Millisecond)

// testKinds stand for the type and call of the names the tests use.
var testKinds = map[string]uint16{"read": 1, "write": 2, "futex": 3, "oncpu": 4}

func ev(pid uint32, name string, start, dur uint64) Event {
	return Event{PID: pid, TGID: 1, Comm: "t", Name: name, Type: "file", Start: start, Dur: dur, Count: 1, FD: -1, kind: testKinds[name]}
}

// TestAggregate: short events of one thread and name within the window
// merge (count, summed duration, the first's start); a long one stands
// alone; another name or thread is its own aggregate; a window that ended
// is flushed.
func TestAggregate(t *testing.T) {
	a := newAggregator(100*ms, 10, 100)
	a.add(ev(1, "read", 1000*ms, 2*ms))
	a.add(ev(1, "read", 1010*ms, 3*ms))
	a.add(ev(1, "read", 1005*ms, 1*ms)) // out of order, same window
	a.add(ev(1, "read", 1020*ms, 150*ms))
	a.add(ev(2, "read", 1030*ms, 1*ms))
	a.add(ev(1, "write", 1040*ms, 1*ms))
	a.add(ev(1, "read", 1200*ms, 4*ms)) // a new window: the first goes out
	out, dropped := a.take()
	if dropped != 0 || len(out) != 2 {
		t.Fatalf("before flush: %d out, %d dropped: %+v", len(out), dropped, out)
	}
	if out[0].Dur != 150*ms || out[0].Count != 1 {
		t.Errorf("long event: %+v", out[0])
	}
	if e := out[1]; e.Start != 1000*ms || e.Dur != 6*ms || e.Count != 3 || e.End() != 1006*ms {
		t.Errorf("aggregate: %+v", e)
	}
	a.flush(1199*ms, false) // thread 2's read and the write ended; the new read has not
	if out, _ = a.take(); len(out) != 2 || out[0].PID != 2 || out[1].Name != "write" {
		t.Errorf("flush: %+v", out)
	}
	a.flush(0, true)
	if out, _ = a.take(); len(out) != 1 || out[0].Start != 1200*ms {
		t.Errorf("final flush: %+v", out)
	}
}

// TestAggregateBounds: what the pending and output bounds refuse is
// counted.
func TestAggregateBounds(t *testing.T) {
	a := newAggregator(100*ms, 2, 3)
	for pid := uint32(1); pid <= 4; pid++ {
		a.add(ev(pid, "read", 0, ms))
	}
	for i := range 3 {
		a.add(ev(9, "futex", uint64(i)*ms, 200*ms))
	}
	a.flush(0, true)
	out, dropped := a.take()
	if len(out) != 3 || dropped != 2+2 {
		t.Errorf("%d out, %d dropped; want 3 and 4 (2 pending, 2 output)", len(out), dropped)
	}
}

func TestFromKernel(t *testing.T) {
	e := fromKernel(syscap.TprofEvent{PID: 5, TGID: 4, Comm: "w", Type: syscap.TprofLock, Call: syscap.CallFutex, Arg: 128, Start: 1, Dur: 2})
	if e.Name != "futex" || e.Type != "lock" || e.FutexOp != "wait" || e.FD != -1 {
		t.Errorf("futex: %+v", e)
	}
	if got := futexOp(0x81 | 256); got != "wake" {
		t.Errorf("FUTEX_WAKE_PRIVATE|CLOCK_REALTIME: %s", got)
	}
	e = fromKernel(syscap.TprofEvent{Type: syscap.TprofOncpu})
	if e.Name != "oncpu" || e.Type != "oncpu" {
		t.Errorf("oncpu: %+v", e)
	}
	o := fromOpen(syscap.TprofOpen{PID: 3, TGID: 2, Start: 10, Type: syscap.TprofLock, Call: syscap.CallFutex}, "LockThd1", 110)
	if !o.Open || o.Dur != 100 || o.Comm != "LockThd1" || o.FutexOp != "wait" {
		t.Errorf("open: %+v", o)
	}
}

func sampleEvents() []Event {
	w := ev(7, "write", 2_000_000_000, 5_000)
	w.Type, w.FD = "net", 3
	w.Local, w.Remote = netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:8080")
	on := ev(7, "oncpu", 1_000_000_000, 2_000_000)
	on.Type, on.Count = "oncpu", 4
	f := ev(8, "futex", 1_500_000_000, 3_000_000_000)
	f.Type, f.FutexOp, f.Open = "lock", "wait", true
	r := ev(8, "read", 1_600_000_000, 1_000)
	r.FilePath = "/etc/hosts"
	return []Event{w, on, f, r}
}

// TestTraceFile: the local file is valid Chrome trace JSON after every
// write, names each process and thread once, carries oncpu as b/e pairs
// and the rest as X events in µs of wall-clock time, with the seed's
// attributes.
func TestTraceFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out") // made at the first write
	tf := traceFile{dir: dir, now: func() time.Time { return time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC) }}
	c := clock{offset: 1_700_000_000_000_000_000}
	name := func(uint32) string { return "contend" }
	if err := tf.write(nil, c, name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("nothing written, yet %s: %v", dir, err)
	}
	evs := sampleEvents()
	for i := range evs {
		if err := tf.write(evs[i:i+1], c, name); err != nil {
			t.Fatal(err)
		}
		var doc traceDoc
		raw, _ := os.ReadFile(filepath.Join(dir, "timeline-trace-202611270830.json"))
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("after write %d: %v\n%s", i, err, raw)
		}
	}
	if err := tf.close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "timeline-trace-202611270830.json"))
	var doc traceDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range doc.TraceEvents {
		s := e.Ph + " " + e.Name
		if e.Dur != nil {
			s += " " + strings.TrimRight(strings.TrimRight(jsonNum(*e.Dur), "0"), ".")
		}
		got = append(got, s)
	}
	want := "M process_name,M thread_name,X write 5,b oncpu,e oncpu,M thread_name,X futex 3000000,X read 1"
	if strings.Join(got, ",") != want {
		t.Errorf("events %s\nwant   %s", strings.Join(got, ","), want)
	}
	w := doc.TraceEvents[2]
	if w.TS != 1_700_000_002_000_000 || w.Args["sock.conn"] != "tcp 127.0.0.1:40000 -> 127.0.0.1:8080" || w.Args["event.type"] != "net" || w.Args["count"] != 1.0 {
		t.Errorf("write: %+v", w)
	}
	if b, e := doc.TraceEvents[3], doc.TraceEvents[4]; b.ID != e.ID || math.Abs(e.TS-b.TS-2000) > 1 || b.Args["count"] != 4.0 || b.Cname != "good" {
		t.Errorf("oncpu pair: %+v %+v", b, e)
	}
	if f := doc.TraceEvents[6]; f.Args["in_progress"] != true || f.Args["futex.op"] != "wait" {
		t.Errorf("futex: %+v", f)
	}
	if r := doc.TraceEvents[7]; r.Args["file.path"] != "/etc/hosts" {
		t.Errorf("read: %+v", r)
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) + "." }

// TestThreadLogs: one record per thread with gala-gopher's resource and
// the seed's attributes, times in ms.
func TestThreadLogs(t *testing.T) {
	c := clock{offset: 1_700_000_000_000_000_000}
	logs, err := threadLogs(sampleEvents(), c, 1234, func(uint32) proc {
		return proc{Comm: "contend", Name: "contend", ContainerID: "abc", ContainerName: "box"}
	})
	if err != nil || len(logs) != 2 {
		t.Fatalf("%d records, %v", len(logs), err)
	}
	var res map[string]any
	var attrs struct{ Values []map[string]any }
	_ = json.Unmarshal(logs[0].Resource, &res)
	_ = json.Unmarshal(logs[0].Attributes, &attrs)
	if res["thread.pid"] != 7.0 || res["thread.tgid"] != 1.0 || res["proc.name"] != "contend" || res["container.name"] != "box" || string(logs[0].Timestamp) != "1234" {
		t.Errorf("resource %v, timestamp %s", res, logs[0].Timestamp)
	}
	if len(attrs.Values) != 2 {
		t.Fatalf("values %v", attrs.Values)
	}
	v := attrs.Values[0]
	if v["event.name"] != "write" || v["start_time"] != 1_700_000_002_000.0 || v["end_time"] != 1_700_000_002_000.0 || v["duration"] != 0.005 || v["sock.conn"] == nil {
		t.Errorf("write value %v", v)
	}
}

// TestHub: 503 while stopped; the trace of the last N seconds, with the
// open calls; a bad window is refused; the page is served.
func TestHub(t *testing.T) {
	h := NewHub()
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	if rec := get(TracePath); rec.Code != 503 {
		t.Errorf("stopped: %d", rec.Code)
	}
	now := time.Unix(1_700_000_010, 0)
	h.now = func() time.Time { return now }
	h.setActive(true, func(uint32) string { return "p" })
	c := clock{offset: 1_700_000_000_000_000_000}
	evs := sampleEvents()
	h.publish(evs[:2], evs[2:3], c)
	var doc traceDoc
	if err := json.Unmarshal(get(TracePath+"?seconds=60").Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range doc.TraceEvents {
		if e.Ph != "M" && e.Ph != "e" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d events in the last minute, want 3: %+v", n, doc.TraceEvents)
	}
	// 7.9 s ago: the write (ended at 2.000005 s) is out, the oncpu (1.002 s) too.
	if err := json.Unmarshal(get(TracePath+"?seconds=7").Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Name != "futex" || e.Ph == "b" {
			t.Errorf("outside the window: %+v", e)
		}
	}
	for _, bad := range []string{"?seconds=0", "?seconds=x", "?seconds=3601"} {
		if rec := get(TracePath + bad); rec.Code != 400 || !strings.Contains(rec.Body.String(), "seconds must be") {
			t.Errorf("%s: %d %s", bad, rec.Code, rec.Body.String())
		}
	}
	if rec := get(TimelinePath); rec.Code != 200 || !strings.Contains(rec.Body.String(), `fetch(`) {
		t.Errorf("timeline: %d", rec.Code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", TracePath, nil))
	if rec.Code != 405 {
		t.Errorf("POST: %d", rec.Code)
	}
}

// TestEventSift: the events of processes the snoopers do not observe
// (new processes the kernel filter let through until classified) go once
// the snoopers have settled about them; until then they wait for the next
// report, where they are kept if the process joined.
func TestEventSift(t *testing.T) {
	targets := probetest.NewTargets(snoop.Whitelist, 1)
	var s eventSift
	a, b, c := ev(5, "read", 0, 1), ev(6, "read", 10, 1), ev(7, "read", 20, 1)
	b.TGID, c.TGID = 2, 3
	if got, n := s.events(nil, []Event{a, b}); len(got) != 2 || n != 0 {
		t.Fatalf("no snoopers: %d events, %d lost; want 2, 0", len(got), n)
	}
	// Settled as of 15: 2 is dropped, 3 (at 21) waits.
	targets.SetHandled(15)
	if got, n := s.events(targets, []Event{a, b, c}); len(got) != 1 || got[0].TGID != 1 || n != 0 || len(s.held) != 1 {
		t.Fatalf("first report: %+v, %d lost, %d held; want tgid 1's, 0, 1", got, n, len(s.held))
	}
	// 3 joins: its held event comes first, then the new ones.
	targets.Set(1, 3)
	d := ev(8, "read", 30, 1)
	d.TGID = 3
	if got, n := s.events(targets, []Event{a, d}); len(got) != 3 || got[0] != c || n != 0 || len(s.held) != 0 {
		t.Fatalf("after 3 joined: %+v, %d lost, %d held; want 3's held event then 2 more", got, n, len(s.held))
	}
	// 4 never settles: held MaxHeld reports, then dropped and counted.
	e := ev(9, "read", 100, 1)
	e.TGID = 4
	evs := []Event{e}
	for range snoop.MaxHeld {
		if got, _ := s.events(targets, evs); len(got) != 0 {
			t.Fatalf("held: %+v", got)
		}
		evs = nil
	}
	if got, n := s.events(targets, nil); len(got) != 0 || n != 1 {
		t.Fatalf("expired: %+v, %d lost; want none, 1", got, n)
	}
}

// TestMemBytes: mem.size of malloc, realloc and free events from the
// blocks seen allocated (a block allocated before is freed with 0 bytes),
// the table bounded (a refused block counted lost).
func TestMemBytes(t *testing.T) {
	rt := probetest.NewRuntime(t)
	p := &Probe{blocks: map[block]int64{}, blockCap: 2, rt: rt}
	ev := func(call syscap.TprofCall, size, addr, old uint64) int64 {
		k := syscap.TprofEvent{TGID: 7, Type: syscap.TprofMemGlibc, Call: call, Arg: size, Ret: int64(addr), Ino: old}
		e := fromKernel(k)
		p.memBytes(&e, k)
		return e.Bytes
	}
	const malloc, realloc = syscap.TprofCall(1), syscap.TprofCall(3)
	for _, c := range []struct {
		got, want int64
		what      string
	}{
		{ev(malloc, 100, 0x1000, 0), 100, "malloc"},
		{ev(realloc, 300, 0x2000, 0x1000), 200, "realloc moving the block"},
		{ev(syscap.MemFree, 0, 0x2000, 0), -300, "free"},
		{ev(syscap.MemFree, 0, 0x9000, 0), 0, "free of a block not seen"},
		{ev(malloc, 50, 0, 0), 0, "failed malloc"},
	} {
		if c.got != c.want {
			t.Errorf("%s: mem.size %d, want %d", c.what, c.got, c.want)
		}
	}
	if len(p.blocks) != 0 {
		t.Errorf("blocks left: %v", p.blocks)
	}
	ev(malloc, 8, 0x1000, 0)
	ev(malloc, 8, 0x2000, 0)
	if ev(malloc, 8, 0x3000, 0) != 8 || rt.LostCount() != 1 || len(p.blocks) != 2 {
		t.Errorf("full table: lost %d, want 1", rt.LostCount())
	}
}
