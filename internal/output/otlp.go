package output

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/prometheus/client_golang/prometheus"
)

// OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	OTLPProtocolGRPC = "grpc"
	OTLPProtocolHTTP = "http/protobuf"
)

// OTLPOptions configure the otlp metric channel. Empty fields take the
// standard OTEL_EXPORTER_OTLP_* and OTEL_METRIC_EXPORT_INTERVAL variables
// (read by the OpenTelemetry SDK as in every language), then the SDK's
// defaults (http/protobuf to localhost:4318, every 60 s).
type OTLPOptions struct {
	// Gatherer is what /metrics serves: every family is sent with the
	// same name, type and labels (attributes).
	Gatherer prometheus.Gatherer
	Host     Host
	Version  string
	// Protocol is grpc or http/protobuf.
	Protocol string
	// Endpoint is host:port, or a URL for http/protobuf: a URL without a
	// path gets /v1/metrics, as OTEL_EXPORTER_OTLP_ENDPOINT does.
	Endpoint string
	Insecure bool
	Interval time.Duration
	Log      *slog.Logger
}

// OTLP pushes the exporter's metrics over OTLP: an OpenTelemetry SDK
// periodic reader whose only producer is the Prometheus registry, so the
// channel adds no second bookkeeping of the data.
type OTLP struct {
	provider *sdkmetric.MeterProvider
	exports  atomic.Uint64
	failures atomic.Uint64
}

// OTLPProtocol returns the protocol the options and the environment select.
func OTLPProtocol(configured string) string {
	for _, p := range []string{configured, os.Getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" {
			return p
		}
	}
	return OTLPProtocolHTTP
}

// countingExporter counts exports and their failures for galago's own
// metrics; the SDK reports a failed export to otel's error handler only.
type countingExporter struct {
	sdkmetric.Exporter
	o *OTLP
}

func (c countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	c.o.exports.Add(1)
	if err != nil {
		c.o.failures.Add(1)
	}
	return err
}

// StartOTLP starts pushing. A protocol other than grpc and http/protobuf
// is an error naming it.
func StartOTLP(ctx context.Context, o OTLPOptions) (*OTLP, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		exp sdkmetric.Exporter
		err error
	)
	switch proto := OTLPProtocol(o.Protocol); proto {
	case OTLPProtocolGRPC:
		var opts []otlpmetricgrpc.Option
		if o.Endpoint != "" {
			opts = append(opts, otlpmetricgrpc.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	case OTLPProtocolHTTP:
		var opts []otlpmetrichttp.Option
		if strings.Contains(o.Endpoint, "://") {
			u, err := url.Parse(o.Endpoint)
			if err != nil {
				return nil, fmt.Errorf("otlp endpoint %q: %w", o.Endpoint, err)
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/metrics" // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
			}
			opts = append(opts, otlpmetrichttp.WithEndpointURL(u.String()))
		} else if o.Endpoint != "" {
			opts = append(opts, otlpmetrichttp.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("otlp protocol %q: must be %s or %s (http/json is not supported)", proto, OTLPProtocolGRPC, OTLPProtocolHTTP)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(
		attribute.String("service.name", "galago"),
		attribute.String("service.version", o.Version),
		attribute.String("host.name", o.Host.Hostname),
		attribute.String("host.id", o.Host.UUID),
		attribute.String("machine_id", o.Host.MachineID()),
	))
	if err != nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	out := &OTLP{}
	readerOpts := []sdkmetric.PeriodicReaderOption{
		sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(o.Gatherer))),
	}
	if o.Interval > 0 {
		readerOpts = append(readerOpts, sdkmetric.WithInterval(o.Interval))
	}
	reader := sdkmetric.NewPeriodicReader(countingExporter{exp, out}, readerOpts...)
	out.provider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	otel.SetErrorHandler(otelErrors{log})
	return out, nil
}

// otelErrors logs what the SDK reports (failed exports, conversion
// problems); their count is galago_otlp_export_failures_total.
type otelErrors struct{ log *slog.Logger }

func (h otelErrors) Handle(err error) { h.log.Warn("otlp", "err", err) }

// Describe and Collect make the channel's own counters part of /metrics.
func (o *OTLP) Describe(ch chan<- *prometheus.Desc) {
	ch <- otlpExportsDesc
	ch <- otlpFailuresDesc
}

var (
	otlpExportsDesc  = prometheus.NewDesc("galago_otlp_exports_total", "OTLP metric exports attempted.", nil, nil)
	otlpFailuresDesc = prometheus.NewDesc("galago_otlp_export_failures_total", "OTLP metric exports that failed after the exporter's retries; their data points were not delivered.", nil, nil)
)

func (o *OTLP) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(otlpExportsDesc, prometheus.CounterValue, float64(o.exports.Load()))
	ch <- prometheus.MustNewConstMetric(otlpFailuresDesc, prometheus.CounterValue, float64(o.failures.Load()))
}

// Close sends what is pending and stops.
func (o *OTLP) Close(ctx context.Context) error {
	err := o.provider.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("otlp: last export did not finish: %w", err)
	}
	return err
}
