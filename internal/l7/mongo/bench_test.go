package mongo

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/cputime"
)

func findExchange(id int32) (req, resp []byte) {
	req = msg(id, 0, 0, bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}}},
		{Key: "batchSize", Value: 2}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "$db", Value: "shop"}})
	resp = msg(id+1000, id, 0, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{
		bson.D{{Key: "_id", Value: "a"}, {Key: "qty", Value: 6}}, bson.D{{Key: "_id", Value: "b"}, {Key: "qty", Value: 3}}}},
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "shop.orders"}}}, {Key: "ok", Value: 1.0}})
	return req, resp
}

// BenchmarkKeepAlive: one find and its reply per iteration.
func BenchmarkKeepAlive(b *testing.B) {
	req, resp := findExchange(1)
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

// BenchmarkPipelined: 16 finds in one write, their replies in one read.
func BenchmarkPipelined(b *testing.B) {
	var reqs, resps []byte
	for i := range 16 {
		q, r := findExchange(int32(i + 1))
		reqs, resps = append(reqs, q...), append(resps, r...)
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
