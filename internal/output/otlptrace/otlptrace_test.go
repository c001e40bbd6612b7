package otlptrace

import (
	"net/netip"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/galago-project/galago/internal/l7"
	l7probe "github.com/galago-project/galago/internal/probe/l7"
)

// TestStatusAttributes: the exchange's numeric statuses become the
// semantic conventions' attributes, and error.type is the HTTP status
// code where there is one.
func TestStatusAttributes(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	e := &Exporter{tracer: tp.Tracer("test")}
	start := time.Unix(1700000000, 0)
	base := l7probe.Span{Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8080"),
		Start: start, End: start.Add(time.Millisecond)}
	for _, c := range []struct {
		name         string
		span         func(s *l7probe.Span)
		want         map[attribute.Key]attribute.Value
		absent       []attribute.Key
		status       codes.Code
		wantErrorStr string
	}{
		{"http 404 client", func(s *l7probe.Span) {
			s.Protocol, s.API, s.Class, s.Status = "http", "GET /missing", l7.ClientError, 404
		}, map[attribute.Key]attribute.Value{"http.response.status_code": attribute.IntValue(404), "error.type": attribute.StringValue("404")},
			[]attribute.Key{"rpc.grpc.status_code"}, codes.Error, "404"},
		{"http 503 server", func(s *l7probe.Span) {
			s.Protocol, s.API, s.Class, s.Status, s.Server = "http2", "GET /fail", l7.ServerError, 503, true
		}, map[attribute.Key]attribute.Value{"http.response.status_code": attribute.IntValue(503), "error.type": attribute.StringValue("503")},
			nil, codes.Error, "503"},
		{"http 200", func(s *l7probe.Span) {
			s.Protocol, s.API, s.Status = "http", "GET /", 200
		}, map[attribute.Key]attribute.Value{"http.response.status_code": attribute.IntValue(200)},
			[]attribute.Key{"error.type"}, codes.Unset, ""},
		{"grpc NOT_FOUND client", func(s *l7probe.Span) {
			s.Protocol, s.API, s.Class, s.Status, s.GRPC, s.GRPCStatus = "http2", "/svc/Get", l7.ClientError, 200, true, 5
		}, map[attribute.Key]attribute.Value{"http.response.status_code": attribute.IntValue(200), "rpc.system": attribute.StringValue("grpc"),
			"rpc.grpc.status_code": attribute.IntValue(5), "error.type": attribute.StringValue("client_error")}, nil, codes.Error, "client_error"},
		{"redis, no status", func(s *l7probe.Span) {
			s.Protocol, s.API = "redis", "GET"
		}, nil, []attribute.Key{"http.response.status_code", "rpc.grpc.status_code", "error.type"}, codes.Unset, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem.Reset()
			s := base
			c.span(&s)
			e.emit(s)
			got := mem.GetSpans()
			if len(got) != 1 {
				t.Fatalf("%d spans", len(got))
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range got[0].Attributes {
				attrs[kv.Key] = kv.Value
			}
			for k, v := range c.want {
				if attrs[k] != v {
					t.Errorf("%s = %v, want %v", k, attrs[k].String(), v.String())
				}
			}
			for _, k := range c.absent {
				if _, ok := attrs[k]; ok {
					t.Errorf("%s = %v, want none", k, attrs[k].String())
				}
			}
			if got[0].Status.Code != c.status || got[0].Status.Description != c.wantErrorStr {
				t.Errorf("status %v %q, want %v %q", got[0].Status.Code, got[0].Status.Description, c.status, c.wantErrorStr)
			}
		})
	}
}
