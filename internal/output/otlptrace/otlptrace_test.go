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

// TestHTTPNameAndPath: HTTP spans are named "{method} {http.route}" and
// carry the raw path in url.path, never a query; gRPC spans carry no
// url.path.
func TestHTTPNameAndPath(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	e := &Exporter{tracer: tp.Tracer("test")}
	start := time.Unix(1700000000, 0)
	for _, c := range []struct {
		proto, api, path string
		grpc             bool
		name             string
		want             map[attribute.Key]string
		absent           []attribute.Key
	}{
		{"http", "GET /items/{id}", "/items/17", false, "GET /items/{id}",
			map[attribute.Key]string{"http.request.method": "GET", "http.route": "/items/{id}", "url.path": "/items/17"}, []attribute.Key{"url.query"}},
		{"http2", "POST /users/{id}/orders", "/users/5/orders", false, "POST /users/{id}/orders",
			map[attribute.Key]string{"http.request.method": "POST", "http.route": "/users/{id}/orders", "url.path": "/users/5/orders"}, nil},
		{"http", "_OTHER /x", "/x", false, "HTTP /x",
			map[attribute.Key]string{"http.request.method": "_OTHER", "http.route": "/x", "url.path": "/x"}, nil},
		{"http", "CONNECT", "", false, "CONNECT",
			map[attribute.Key]string{"http.request.method": "CONNECT"}, []attribute.Key{"http.route", "url.path"}},
		{"http", "GET /a", "", false, "GET /a",
			map[attribute.Key]string{"http.route": "/a"}, []attribute.Key{"url.path"}},
		{"http2", "/pkg.Svc/Get", "/pkg.Svc/Get", true, "pkg.Svc/Get",
			map[attribute.Key]string{"rpc.system": "grpc", "rpc.service": "pkg.Svc", "rpc.method": "Get"}, []attribute.Key{"url.path", "http.route", "http.request.method"}},
		{"http2", "", "", false, "http2", nil, []attribute.Key{"url.path", "http.route", "http.request.method"}},
	} {
		mem.Reset()
		e.emit(l7probe.Span{Protocol: c.proto, API: c.api, Path: c.path, GRPC: c.grpc, Status: 200,
			Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8080"),
			Start: start, End: start.Add(time.Millisecond)})
		got := mem.GetSpans()
		if len(got) != 1 {
			t.Fatalf("%s: %d spans", c.api, len(got))
		}
		if got[0].Name != c.name {
			t.Errorf("%q: name %q, want %q", c.api, got[0].Name, c.name)
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range got[0].Attributes {
			attrs[kv.Key] = kv.Value
		}
		for k, v := range c.want {
			if attrs[k].AsString() != v {
				t.Errorf("%q: %s = %q, want %q", c.api, k, attrs[k].AsString(), v)
			}
		}
		for _, k := range c.absent {
			if _, ok := attrs[k]; ok {
				t.Errorf("%q: %s = %q, want none", c.api, k, attrs[k].String())
			}
		}
	}
}
