package http2

import (
	"bytes"
	"runtime"
	"syscall"
	"testing"

	xhttp2 "golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/galago-project/galago/internal/l7"
)

// threadCPU is the calling thread's CPU time in ns. Benchmarks report it
// per exchange beside wall time, which on a shared machine also counts
// the time other processes held the CPU.
func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func measure(b *testing.B, n int, loop func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	cpu := threadCPU()
	loop()
	cpu = threadCPU() - cpu
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/exchange")
	b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/exchange")
}

// calls encodes n gRPC unary calls as grpc-go sends them once its HPACK
// tables are warm, on streams 1, 3, ...: the request chunk (HEADERS +
// DATA) and the response chunk (HEADERS, DATA, trailers). warm holds a
// first call that fills the tables. ids lists where each frame's stream
// id is, to renumber the calls.
type calls struct {
	warm     [2][]byte
	req, rsp []byte
	reqIDs   []int
	rspIDs   []int
}

func grpcCalls(n int) *calls {
	var bc, bs bytes.Buffer
	ec, es := hpack.NewEncoder(&bc), hpack.NewEncoder(&bs)
	block := func(e *hpack.Encoder, b *bytes.Buffer, kv ...string) []byte {
		b.Reset()
		for i := 0; i < len(kv); i += 2 {
			_ = e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(b.Bytes())
	}
	reqKV := []string{":method", "POST", ":scheme", "http", ":path", "/galago.test.Echo/Unary", ":authority", "127.0.0.1:50051",
		"content-type", "application/grpc", "user-agent", "grpc-go/1.85.0", "te", "trailers"}
	one := func(id uint32) (req, rsp []byte, reqIDs, rspIDs []int) {
		var r, s bytes.Buffer
		fr, fs := xhttp2.NewFramer(&r, nil), xhttp2.NewFramer(&s, nil)
		mark := func(buf *bytes.Buffer, ids *[]int) { *ids = append(*ids, buf.Len()+5) }
		mark(&r, &reqIDs)
		_ = fr.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: id, BlockFragment: block(ec, &bc, reqKV...), EndHeaders: true})
		mark(&r, &reqIDs)
		_ = fr.WriteData(id, true, make([]byte, 25))
		mark(&s, &rspIDs)
		_ = fs.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: id, BlockFragment: block(es, &bs, ":status", "200", "content-type", "application/grpc"), EndHeaders: true})
		mark(&s, &rspIDs)
		_ = fs.WriteData(id, false, make([]byte, 30))
		mark(&s, &rspIDs)
		_ = fs.WriteHeaders(xhttp2.HeadersFrameParam{StreamID: id, BlockFragment: block(es, &bs, "grpc-status", "0", "grpc-message", ""), EndHeaders: true, EndStream: true})
		return r.Bytes(), s.Bytes(), reqIDs, rspIDs
	}
	c := &calls{}
	c.warm[0], c.warm[1], _, _ = one(1)
	for i := 0; i < n; i++ {
		req, rsp, ri, si := one(uint32(3 + 2*i))
		for _, o := range ri {
			c.reqIDs = append(c.reqIDs, o+len(c.req))
		}
		for _, o := range si {
			c.rspIDs = append(c.rspIDs, o+len(c.rsp))
		}
		c.req, c.rsp = append(c.req, req...), append(c.rsp, rsp...)
	}
	return c
}

// renumber gives the calls' frames the stream ids first, first+2, ...
// (each call has 2 request and 3 response frames).
func (c *calls) renumber(first uint32) {
	put := func(b []byte, at []int, per int) {
		for i, o := range at {
			id := first + 2*uint32(i/per)
			b[o], b[o+1], b[o+2], b[o+3] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
		}
	}
	put(c.req, c.reqIDs, 2)
	put(c.rsp, c.rspIDs, 3)
}

func bench(b *testing.B, n int, paths bool) {
	c := grpcCalls(n)
	p := NewParser(l7.Client)
	if paths {
		p.KeepPaths()
	}
	chunk := func(dir l7.Direction, ts uint64, data []byte) l7.Chunk {
		return l7.Chunk{Dir: dir, TS: ts, Data: data, Size: len(data)}
	}
	out := p.Feed(chunk(l7.Egress, 1, []byte(Preface)), nil)
	out = p.Feed(chunk(l7.Egress, 2, c.warm[0]), out)
	out = p.Feed(chunk(l7.Ingress, 3, c.warm[1]), out)
	if len(out) != 1 || out[0].API != "/galago.test.Echo/Unary" {
		b.Fatalf("warm-up: %+v", out)
	}
	b.SetBytes(int64(len(c.req) + len(c.rsp)))
	next := uint32(3)
	measure(b, n, func() {
		for i := 0; b.Loop(); i++ {
			c.renumber(next)
			next += 2 * uint32(n)
			out = p.Feed(chunk(l7.Egress, uint64(2*i), c.req), out[:0])
			out = p.Feed(chunk(l7.Ingress, uint64(2*i+1), c.rsp), out)
			if len(out) != n || out[0].Class != l7.OK || out[0].API != "/galago.test.Echo/Unary" {
				b.Fatalf("%d exchanges: %+v", len(out), out)
			}
		}
	})
	if p.Desyncs() != 0 || p.Undecoded() != 0 {
		b.Fatalf("%d desyncs, %d undecoded", p.Desyncs(), p.Undecoded())
	}
}

// BenchmarkGRPCUnary is one unary call per op on a warm connection: the
// request's HEADERS and DATA in one chunk, the response's HEADERS, DATA
// and trailers in another.
func BenchmarkGRPCUnary(b *testing.B) { bench(b, 1, false) }

// BenchmarkGRPCUnaryPaths is BenchmarkGRPCUnary with raw paths kept (as
// when spans are exported).
func BenchmarkGRPCUnaryPaths(b *testing.B) { bench(b, 1, true) }

// BenchmarkGRPCMultiplexed is 16 calls per op, their requests in one
// chunk and their responses in another.
func BenchmarkGRPCMultiplexed(b *testing.B) { bench(b, 16, false) }
