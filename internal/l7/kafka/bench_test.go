package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/cputime"
)

func produceExchange(b *testing.B, corr int32) (req, resp []byte) {
	req = encodeRequest(b, &kmsg.ProduceRequest{Version: 9, Acks: -1, TimeoutMillis: 5000, Topics: []kmsg.ProduceRequestTopic{
		{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: recordBatch(3, 200)}}}}}, corr)
	resp = encodeResponse(b, &kmsg.ProduceResponse{Version: 9, Topics: []kmsg.ProduceResponseTopic{
		{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0, BaseOffset: 42}}}}}, corr)
	return req, resp
}

// BenchmarkKeepAlive: one Produce request and its response per iteration.
func BenchmarkKeepAlive(b *testing.B) {
	req, resp := produceExchange(b, 1)
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

// BenchmarkKeepAliveTopics: the same with OnTopic set, as the kafkaprobe
// view needs: every record set's batch headers are read.
func BenchmarkKeepAliveTopics(b *testing.B) {
	req, resp := produceExchange(b, 1)
	p := NewParser(l7.Client)
	records := 0
	p.OnTopic = func(t TopicRecords) { records += t.Records }
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu0 := cputime.Now()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: resp, Size: len(resp)}, out)
		if len(out) != 1 {
			b.Fatal(out)
		}
	}
	if records != 3*b.N {
		b.Fatalf("%d records in %d requests", records, b.N)
	}
	b.ReportMetric(float64((cputime.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/exchange")
}

// BenchmarkPipelined: 16 Produce requests in one write, their 16 responses
// in one read.
func BenchmarkPipelined(b *testing.B) {
	var reqs, resps []byte
	for i := range 16 {
		q, r := produceExchange(b, int32(i))
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

// BenchmarkBigFetchTruncated: a 1 MiB Fetch response captured 4 KiB per
// 64 KiB read.
func BenchmarkBigFetchTruncated(b *testing.B) {
	req := encodeRequest(b, &kmsg.FetchRequest{Version: 11, Topics: []kmsg.FetchRequestTopic{
		{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}}, 1)
	var batches []byte
	for range 16 {
		batches = append(batches, recordBatch(100, 64<<10)...)
	}
	resp := encodeResponse(b, &kmsg.FetchResponse{Version: 11, Topics: []kmsg.FetchResponseTopic{{Topic: "big",
		Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: batches}}}}}, 1)
	p := NewParser(l7.Client)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu0 := cputime.Now()
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		for off := 0; off < len(resp); off += 64 << 10 {
			end := min(off+64<<10, len(resp))
			out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: resp[off:min(end, off+4096)], Size: end - off}, out)
		}
		if len(out) != 1 {
			b.Fatal(out)
		}
	}
	b.ReportMetric(float64((cputime.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/exchange")
}
