package dubbo

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/dubbo/dubbotest"
	"github.com/galago-project/galago/internal/l7/internal/cputime"
)

// BenchmarkKeepAlive: one call (hessian2 body: service, version, method
// read) and its response per iteration.
func BenchmarkKeepAlive(b *testing.B) {
	req := dubbotest.Request(nil, dubbotest.Call{ID: 1, Service: "org.apache.dubbo.demo.GreetingService", Version: "1.0.0",
		Method: "sayHello", Args: dubbotest.String(nil, "world")})
	resp := dubbotest.Response(nil, 1, StatusOK, RespValue, "hello world")
	p := NewParser(l7.Client)
	out := make([]l7.Exchange, 0, 4)
	b.ReportAllocs()
	cpu0 := cputime.Now()
	b.SetBytes(int64(len(req) + len(resp)))
	for i := 0; b.Loop(); i++ {
		out = p.Feed(l7.Chunk{Dir: l7.Egress, TS: uint64(i), Data: req, Size: len(req)}, out[:0])
		out = p.Feed(l7.Chunk{Dir: l7.Ingress, TS: uint64(i), Data: resp, Size: len(resp)}, out)
		if len(out) != 1 || out[0].API == "" {
			b.Fatal(out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/exchange")
	b.ReportMetric(float64((cputime.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/exchange")
}
