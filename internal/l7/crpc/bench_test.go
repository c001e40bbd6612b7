package crpc

import (
	"fmt"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/cputime"
)

// BenchmarkKeepAlive: one call and its response per iteration.
func BenchmarkKeepAlive(b *testing.B) {
	req := frame(true, false, 0, "call-1", []byte("opaque body: serialized call"))
	resp := frame(false, false, 0, "call-1", []byte("opaque body: serialized result"))
	p := NewParser(l7.Client)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu0 := cputime.Now()
	b.SetBytes(int64(len(req) + len(resp)))
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: resp, Size: len(resp)}, out)
		if len(out) != 1 {
			b.Fatal(out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/exchange")
	b.ReportMetric(float64((cputime.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/exchange")
}

// BenchmarkPipelined: 16 calls in one write, their responses (last first)
// in one read.
func BenchmarkPipelined(b *testing.B) {
	var reqs, resps []byte
	for i := range 16 {
		reqs = append(reqs, frame(true, false, 0, fmt.Sprint("call-", i), []byte("opaque body"))...)
		resps = append(resps, frame(false, false, 0, fmt.Sprint("call-", 15-i), []byte("opaque result"))...)
	}
	p := NewParser(l7.Server)
	out := make([]l7.Exchange, 0, 32)
	b.ReportAllocs()
	cpu0 := cputime.Now()
	b.SetBytes(int64(len(reqs) + len(resps)))
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: reqs, Size: len(reqs)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: resps, Size: len(resps)}, out)
		if len(out) != 16 {
			b.Fatal(len(out))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/exchange")
	b.ReportMetric(float64((cputime.Now()-cpu0).Nanoseconds())/float64(b.N*16), "cpu-ns/exchange")
}
