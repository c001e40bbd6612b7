package http

import (
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

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

// measure runs loop with the thread locked and reports wall and CPU ns
// per exchange (n exchanges per op).
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

// Messages as Go's net/http client and nginx exchange them
// (testdata/nginx_go.chunks).
const (
	benchReq  = "GET /api/orders/123456/items/9?sort=asc HTTP/1.1\r\nHost: 127.0.0.1:44779\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n"
	benchResp = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 23 Nov 2026 18:20:57 GMT\r\nContent-Type: application/json\r\nContent-Length: 27\r\nConnection: keep-alive\r\n\r\n{\"id\":123456,\"items\":[9]}\n\n"
)

// BenchmarkKeepAlive is one request and its response per op, each in its
// own chunk, on one connection (the server's view).
func BenchmarkKeepAlive(b *testing.B) { benchKeepAlive(b, false, 1) }

// BenchmarkKeepAlivePaths is BenchmarkKeepAlive with raw paths kept (as
// when spans are exported).
func BenchmarkKeepAlivePaths(b *testing.B) { benchKeepAlive(b, true, 1) }

// BenchmarkKeepAliveVaried is BenchmarkKeepAlive with a request target
// that changes from one request to the next (another order id), so that
// the template is computed for every request.
func BenchmarkKeepAliveVaried(b *testing.B) { benchKeepAlive(b, false, 64) }

// benchKeepAlive cycles through targets request targets.
func benchKeepAlive(b *testing.B, paths bool, targets int) {
	p := NewParser(l7.Server)
	if paths {
		p.KeepPaths()
	}
	reqs := [][]byte{[]byte(benchReq)}
	for i := 1; i < targets; i++ {
		reqs = append(reqs, []byte(strings.Replace(benchReq, "123456", strconv.Itoa(123456+i), 1)))
	}
	rq := l7.Chunk{Dir: l7.Ingress, Data: []byte(benchReq), Size: len(benchReq)}
	rs := l7.Chunk{Dir: l7.Egress, Data: []byte(benchResp), Size: len(benchResp)}
	out := make([]l7.Exchange, 0, 4)
	b.SetBytes(int64(len(benchReq) + len(benchResp)))
	measure(b, 1, func() {
		for i := 0; b.Loop(); i++ {
			rq.Data = reqs[i%len(reqs)]
			rq.Size = len(rq.Data)
			rq.TS, rs.TS = uint64(2*i), uint64(2*i+1)
			out = p.Feed(rq, out[:0])
			out = p.Feed(rs, out)
			if len(out) != 1 || out[0].API != "GET /api/orders/{id}/items/{id}" {
				b.Fatalf("%+v", out)
			}
		}
	})
}

// BenchmarkPipelined is a batch of 16 requests in one chunk answered by 16
// responses in one chunk (the client's view).
func BenchmarkPipelined(b *testing.B) {
	const n = 16
	p := NewParser(l7.Client)
	rq := l7.Chunk{Dir: l7.Egress, Data: []byte(strings.Repeat(benchReq, n))}
	rs := l7.Chunk{Dir: l7.Ingress, Data: []byte(strings.Repeat(benchResp, n))}
	rq.Size, rs.Size = len(rq.Data), len(rs.Data)
	out := make([]l7.Exchange, 0, n)
	b.SetBytes(int64(len(rq.Data) + len(rs.Data)))
	measure(b, n, func() {
		for i := 0; b.Loop(); i++ {
			rq.TS, rs.TS = uint64(2*i), uint64(2*i+1)
			out = p.Feed(rq, out[:0])
			out = p.Feed(rs, out)
			if len(out) != n {
				b.Fatalf("%d exchanges", len(out))
			}
		}
	})
}

// BenchmarkAppendAPI is the template of one request target.
func BenchmarkAppendAPI(b *testing.B) {
	buf := make([]byte, 0, MaxAPI+64)
	m, target := []byte("GET"), []byte("/api/users/550e8400-e29b-41d4-a716-446655440000/orders/12345?page=2")
	measure(b, 1, func() {
		for b.Loop() {
			buf = AppendAPI(buf[:0], m, target)
		}
	})
}
