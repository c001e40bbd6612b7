// Package output carries what probes produce to where users read it: the
// Prometheus exporter (web_server), the logs and json metric files, the
// event and metadata logs, the Kafka topics, and the Pipeline that fans
// records and events out to them. Every destination is a MetricSink,
// EventSink or MetaSink; the event channels are also LogSinks, for the
// OpenTelemetry log records of custom probes' |log| lines.
//
// Limits: the file channels are append-only logs with one backup (.1); a
// sink that fails is counted and logged, never retried (the next period
// brings fresh data). The Kafka channels queue in memory within the kafka
// section's limits and drop the oldest message when full (KafkaProducer);
// they never block the pipeline. The exporter never consumes data: every
// scrape sees the store as it is.
package output

import (
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/table"
)

// MetricSink receives every record the store accepted, once per report
// period. Implementations must be safe for concurrent use.
type MetricSink interface {
	WriteRecord(r *table.Record) error
	Close() error
}

// EventSink receives every abnormal event that passed de-duplication.
type EventSink interface {
	WriteEvent(e event.Event) error
	Close() error
}

// LogSink is an EventSink that also takes the OpenTelemetry log records
// probes report (|log| lines).
type LogSink interface {
	WriteLog(l event.Log) error
}

// MetaSink receives the table definitions at start and every meta period.
type MetaSink interface {
	WriteMeta(ts time.Time, tables []*table.Table) error
	Close() error
}

// Host is this machine's identity as gala-gopher reports it (uuid, first
// IPv4, hostname); its MachineID() is "<uuid>-<ip>".
type Host = identity.HostInfo
