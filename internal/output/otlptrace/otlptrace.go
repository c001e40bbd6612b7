// Package otlptrace exports the l7 probe's exchanges as OpenTelemetry
// spans over OTLP (gRPC or HTTP): one span per request seen, client or
// server side, with the semantic conventions' attributes for HTTP, RPC and
// database protocols.
//
// The probe's goroutine never waits on the exporter: spans go through a
// bounded queue, and what does not fit is counted
// (galago_otlp_spans_dropped_total). Sampling keeps a share of traces by
// trace id (the SDK's TraceIDRatioBased sampler). What the capture cannot
// give is left out, never made up. HTTP spans (HTTP/1 and HTTP/2, not
// gRPC) are named "{method} {http.route}" ("HTTP" for a method outside the
// known set, the method alone without a route), http.route being the
// request's template ("GET /users/{id}" gives /users/{id}), and carry
// url.path, the raw path the request named: the l7 parsers keep it only
// while spans are exported (l7.Path: at most 256 bytes, bytes outside
// visible ASCII percent-encoded, a longer path or one the capture cut
// ends in "..."). url.query is never sent (a query may hold secrets), nor
// url.full (it includes the query). Database spans carry
// db.operation.name, the command's template; http.response.status_code and
// rpc.grpc.status_code only when the response's status was seen.
// gRPC spans are named "{rpc.service}/{rpc.method}" and carry both.
// error.type is the HTTP status code as a string where there is one (as
// the HTTP conventions ask), otherwise the outcome class (client_error,
// server_error) or no_response.
package otlptrace

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/l7"
	l7http "github.com/galago-project/galago/internal/l7/http"
	l7probe "github.com/galago-project/galago/internal/probe/l7"
)

// DefaultQueue bounds the spans waiting for the exporter.
const DefaultQueue = 8192

// Options configure the exporter. Empty fields take the standard
// OTEL_EXPORTER_OTLP_(TRACES_)* variables, then the SDK's defaults.
type Options struct {
	Host     identity.HostInfo
	Version  string
	Protocol string // grpc or http/protobuf
	Endpoint string // host:port, or a URL for http/protobuf
	Insecure bool
	// Ratio is the share of traces kept, in (0, 1].
	Ratio float64
	Queue int // DefaultQueue when 0
	Log   *slog.Logger
}

// Exporter is an l7probe.SpanSink that sends spans over OTLP.
type Exporter struct {
	ch      chan l7probe.Span
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	wg      sync.WaitGroup
	mu      sync.RWMutex // closed and the close of ch
	closed  bool
	spans   atomic.Uint64
	dropped atomic.Uint64
}

var _ l7probe.SpanSink = (*Exporter)(nil)

// Start starts the exporter.
func Start(ctx context.Context, o Options) (*Exporter, error) {
	if o.Ratio <= 0 || o.Ratio > 1 {
		return nil, fmt.Errorf("otlp traces: sampling ratio %v: must be in (0, 1]", o.Ratio)
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	proto := o.Protocol
	for _, p := range []string{os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf"} {
		if proto == "" {
			proto = p
		}
	}
	switch proto {
	case "grpc":
		var opts []otlptracegrpc.Option
		if o.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		var opts []otlptracehttp.Option
		switch {
		case strings.Contains(o.Endpoint, "://"):
			u := strings.TrimSuffix(o.Endpoint, "/")
			if !strings.Contains(strings.SplitN(u, "://", 2)[1], "/") {
				u += "/v1/traces" // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		case o.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("otlp traces: protocol %q: must be grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp traces: %w", err)
	}
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(
		attribute.String("service.name", "galago"),
		attribute.String("service.version", o.Version),
		attribute.String("host.name", o.Host.Hostname),
		attribute.String("host.id", o.Host.UUID),
		attribute.String("machine_id", o.Host.MachineID()),
	))
	if err != nil {
		return nil, fmt.Errorf("otlp traces: resource: %w", err)
	}
	q := o.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	e := &Exporter{ch: make(chan l7probe.Span, q)}
	// The batcher blocks instead of dropping: the bound is e.ch, where
	// drops are counted.
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBlocking(), sdktrace.WithMaxQueueSize(q)),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(o.Ratio)),
		sdktrace.WithResource(res),
	)
	e.tracer = e.tp.Tracer("github.com/galago-project/galago/l7")
	e.wg.Add(1)
	go e.run()
	return e, nil
}

// Span queues s; it never blocks.
func (e *Exporter) Span(s l7probe.Span) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		e.dropped.Add(1)
		return
	}
	select {
	case e.ch <- s:
	default:
		e.dropped.Add(1)
	}
}

func (e *Exporter) run() {
	defer e.wg.Done()
	for s := range e.ch {
		e.emit(s)
	}
}

// httpAPI splits an HTTP API template ("GET /users/{id}", "CONNECT")
// into method and route; ok is false for none ("") and for gRPC's
// ("/pkg.Service/Method").
func httpAPI(api string) (method, route string, ok bool) {
	if api == "" || api[0] == '/' {
		return "", "", false
	}
	method, route, _ = strings.Cut(api, " ")
	return method, route, true
}

// dbSystems names the database protocols as db.system.name does.
var dbSystems = map[string]string{"redis": "redis", "mysql": "mysql", "pgsql": "postgresql", "mongo": "mongodb", "memcached": "memcached"}

func (e *Exporter) emit(s l7probe.Span) {
	start, end := s.Start, s.End
	if start.IsZero() {
		start = end // a response whose request was not seen
	}
	if start.IsZero() {
		return
	}
	kind := trace.SpanKindClient
	if s.Server {
		kind = trace.SpanKindServer
	}
	name := s.API
	if name == "" {
		name = s.Protocol
	}
	attrs := []attribute.KeyValue{
		attribute.String("network.protocol.name", s.Protocol),
		attribute.Int("process.pid", int(s.TGID)),
		attribute.Bool("tls", s.SSL),
	}
	server, peer := s.Remote, s.Local
	if s.Server {
		server, peer = s.Local, s.Remote
	}
	attrs = append(attrs, attribute.String("server.address", server.Addr().String()), attribute.Int("server.port", int(server.Port())))
	if s.Server && peer.IsValid() {
		attrs = append(attrs, attribute.String("client.address", peer.Addr().String()))
	}
	switch {
	case s.Protocol == "http" || s.Protocol == "http2":
		if method, route, ok := httpAPI(s.API); ok {
			attrs = append(attrs, attribute.String("http.request.method", method))
			// The HTTP conventions' span name: "{method} {http.route}",
			// "HTTP" for a method outside the known set.
			name = method
			if method == l7http.OtherMethod {
				name = "HTTP"
			}
			if route != "" {
				attrs = append(attrs, attribute.String("http.route", route))
				name += " " + route
			}
			if s.Path != "" {
				attrs = append(attrs, attribute.String("url.path", s.Path))
			}
		}
	case dbSystems[s.Protocol] != "":
		attrs = append(attrs, attribute.String("db.system.name", dbSystems[s.Protocol]), attribute.String("db.operation.name", s.API))
	}
	if s.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", int(s.Status)))
	}
	if s.GRPC {
		attrs = append(attrs, attribute.String("rpc.system", "grpc"), attribute.Int("rpc.grpc.status_code", int(s.GRPCStatus)))
		// The RPC conventions' span name is "{rpc.service}/{rpc.method}":
		// the gRPC path without its leading slash.
		if svc, method, ok := strings.Cut(strings.TrimPrefix(s.API, "/"), "/"); ok && svc != "" && method != "" {
			name = svc + "/" + method
			attrs = append(attrs, attribute.String("rpc.service", svc), attribute.String("rpc.method", method))
		}
	}
	if s.ReqBytes > 0 {
		attrs = append(attrs, attribute.Int("request.size", s.ReqBytes))
	}
	if s.RespBytes > 0 {
		attrs = append(attrs, attribute.Int("response.size", s.RespBytes))
	}
	_, span := e.tracer.Start(context.Background(), name, trace.WithSpanKind(kind), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	errType := s.Class.String()
	if s.Status >= 400 && !s.GRPC {
		errType = strconv.Itoa(int(s.Status))
	}
	switch {
	case end.IsZero():
		span.SetAttributes(attribute.String("error.type", "no_response"))
		span.SetStatus(codes.Error, "no response")
		end = start
	case s.Class == l7.ServerError, s.Class == l7.ClientError && !s.Server:
		// Semantic conventions: a server's 4xx is not its own error; the
		// client's is.
		span.SetAttributes(attribute.String("error.type", errType))
		span.SetStatus(codes.Error, errType)
	case s.Class == l7.ClientError:
		span.SetAttributes(attribute.String("error.type", errType))
	}
	span.End(trace.WithTimestamp(end))
	e.spans.Add(1)
}

var (
	spansDesc   = prometheus.NewDesc("galago_otlp_spans_total", "L7 exchanges handed to the OTLP span exporter (before sampling).", nil, nil)
	droppedDesc = prometheus.NewDesc("galago_otlp_spans_dropped_total", "L7 exchanges dropped because the span queue was full.", nil, nil)
)

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) { ch <- spansDesc; ch <- droppedDesc }

// Collect implements prometheus.Collector.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(spansDesc, prometheus.CounterValue, float64(e.spans.Load()))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(e.dropped.Load()))
}

// Close sends what is queued (within ctx) and stops. Spans handed over
// after Close are dropped and counted.
func (e *Exporter) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.ch)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.tp.Shutdown(ctx)
}

// Flush pushes every span emitted so far (tests, shutdown).
func (e *Exporter) Flush(ctx context.Context) error { return e.tp.ForceFlush(ctx) }
