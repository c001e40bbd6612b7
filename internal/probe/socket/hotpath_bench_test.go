package socket

import (
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
)

// Micro-benchmarks of the socket probe's steady-state path (make
// bench-micro). Its counters are aggregated in the kernel: the per-record
// path is one endpoint read from the BPF hash maps per report period.

var (
	benchClient = []byte{127, 0, 0, 1}
	benchServer = []byte{127, 0, 0, 1}
)

// BenchmarkDecodeWalkRequest is one ring-buffer record (an owner walk
// request, the only record type).
func BenchmarkDecodeWalkRequest(b *testing.B) {
	raw := walkReqBytes(4026531840, afInet, 8080)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeWalkRequest(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEndpoint is one tcp_endpoints element decoded (key and
// value), as readTCP does for every endpoint every period.
func BenchmarkDecodeEndpoint(b *testing.B) {
	k := tcpKeyBytes(42, afInet, benchClient, benchServer, 8080, RoleServer, "nginx")
	v := tcpValBytes(tcpSample{c: [nTCPCounters]uint64{cPassiveOpen: 1000}, buckets: [nBuckets]uint64{1000}, sum: 5e6})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeTCPKey(k); err != nil {
			b.Fatal(err)
		}
		if _, err := decodeTCPVal(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserveTCP is one period's read of n known endpoints whose
// counters grew, reported per endpoint (observeTCP: the growth since the
// previous read added to each endpoint's row).
func BenchmarkObserveTCP(b *testing.B) {
	const n = 1000
	a := newAggregator()
	entries := make([]tcpEntry, n)
	for i := range entries {
		raw := tcpKeyBytes(uint32(i+1), afInet, benchClient, benchServer, 8080, RoleServer, "nginx")
		key, err := decodeTCPKey(raw)
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = tcpEntry{raw: [tcpKeySize]byte(raw), key: key}
		entries[i].val.c[cPassiveOpen] = 1
		entries[i].val.buckets[0] = 1
	}
	now := time.Unix(1e9, 0)
	a.observeTCP(entries, 1, now)
	seq := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		seq++
		for i := range entries {
			entries[i].val.c[cPassiveOpen]++
			entries[i].val.buckets[0]++
		}
		a.observeTCP(entries, seq, now)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/endpoint")
}

// BenchmarkFlushTCP renders one period of n endpoints into endpoint_tcp
// records (the report), per endpoint.
func BenchmarkFlushTCP(b *testing.B) {
	const n = 1000
	a := newAggregator()
	entries := make([]tcpEntry, n)
	for i := range entries {
		raw := tcpKeyBytes(uint32(i+1), afInet, benchClient, benchServer, 8080, RoleServer, "nginx")
		key, err := decodeTCPKey(raw)
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = tcpEntry{raw: [tcpKeySize]byte(raw), key: key}
		entries[i].val.c[cPassiveOpen] = 1
	}
	now := time.Unix(1e9, 0)
	a.observeTCP(entries, 1, now)
	cfg := probe.Config{SubItems: bitTCP}
	b.ReportAllocs()
	for b.Loop() {
		recs, _ := a.flush(now, 5*time.Second, cfg)
		if len(recs) != n {
			b.Fatalf("%d records, want %d", len(recs), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/endpoint")
}
