package tcp

import (
	"encoding/binary"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
)

// Micro-benchmarks of the tcp probe's steady-state per-record path (make
// bench-micro). Targets (BENCHMARKS.md): no allocation per record.

// BenchmarkDecode is one ring-buffer or iterator record (struct tcp_conn)
// decoded: a copy into the generated struct and the addresses.
func BenchmarkDecode(b *testing.B) {
	raw := fixture{typ: recClose, tgid: 42, cookie: 7, comm: "wrk", saddr: v4c, daddr: v4s, sport: 40000, dport: 80,
		family: afInet, role: roleClient, acked: 1000, received: 20}.bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeDelay is one DELAY record (tcp_delay, net_delay).
func BenchmarkDecodeDelay(b *testing.B) {
	d := tcpTcpDelay{Type: recDelay, Family: afInet, Role: roleClient, Tgid: 42, ServerPort: 80, DelayNs: 25000}
	raw, err := binary.Append(nil, binary.LittleEndian, &d)
	if err != nil || len(raw) != delaySize {
		b.Fatalf("delay record: %v, %d bytes", err, len(raw))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeDelay(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandleClose is the ring buffer's steady state under connection
// churn, per record: decode, lock, aggregate the close record of a new
// connection into its row (one row, as wrk's connections to one server).
// Every 10 000 records a sample and a report period end, as they do every
// few seconds in the daemon.
func BenchmarkHandleClose(b *testing.B) {
	p := New()
	p.agg = newAggregator()
	p.hooks = hooksAvail{resets: true, hz: true}
	p.rt = probetest.NewRuntime(b)
	f := fixture{typ: recClose, tgid: 42, comm: "wrk", saddr: v4c, daddr: v4s, sport: 40000, dport: 80,
		family: afInet, role: roleClient, acked: 1000, received: 20, segsIn: 4, segsOut: 5, srtt: 100}
	recs := make([][]byte, 1000)
	for i := range recs {
		f.cookie = uint64(i + 1)
		recs[i] = f.bytes()
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		raw := recs[i%len(recs)]
		// A new cookie per record: every close is a new connection.
		raw[8], raw[9], raw[10], raw[11] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if err := p.handle(raw); err != nil {
			b.Fatal(err)
		}
		i++
		if i%10000 == 0 {
			p.agg.snapshot(nil, p.hooks, false)
			p.agg.flush()
		}
	}
}

// BenchmarkSnapshotSteady is one iterator pass over live connections that
// the aggregator already knows (the per-sample path with many long-lived
// connections), reported per record.
func BenchmarkSnapshotSteady(b *testing.B) {
	const n = 10000
	a := newAggregator()
	h := hooksAvail{resets: true, hz: true}
	recs := make([]conn, n)
	for i := range recs {
		recs[i] = synth(recSnapshot, 1, uint64(i+1), uint16(i), 100, 100)
	}
	a.snapshot(recs, h, true) // baseline: every connection known
	b.ReportAllocs()
	for b.Loop() {
		for i := range recs {
			recs[i].raw.BytesAcked += 10
			recs[i].raw.BytesReceived += 10
		}
		a.snapshot(recs, h, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}
