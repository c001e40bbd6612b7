// Package probe defines what a collection feature is (the Probe interface and
// the Runtime it is handed), gala-gopher's catalogue of features with their
// sub-items and parameters, and the Manager that serialises every lifecycle
// call, keeps each probe's state and restarts failed probes with backoff.
// The pieces every probe's lifecycle repeats live here too: the report loop
// (Every, Kick, ReportPeriod), the idempotent Stop (StopOnce) and the
// counted, logged non-fatal error (LogError).
package probe

import (
	"context"
	"errors"
	"log/slog"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// ErrNotSupported marks a hook or capability this kernel or host lacks.
var ErrNotSupported = errors.New("not supported on this system")

// Probe is one collection feature. Start begins collection: long-running
// work goes through rt.Go so that the Manager supervises it. When the probe
// is stopped the Manager cancels ctx, waits for every rt.Go goroutine, then
// calls Stop, which releases what Start acquired (links, readers, objects) in
// reverse order. Stop must be idempotent.
type Probe interface {
	Name() string
	Start(ctx context.Context, cfg Config, rt Runtime) error
	Stop() error
}

// Reconfigurer is implemented by probes that take new parameters, sub-items
// or snoopers without a restart. Probes without it are restarted.
type Reconfigurer interface {
	Reconfigure(cfg Config) error
}

// Tables is implemented by probes that export tables; their definitions feed
// the metadata channel.
type Tables interface {
	Tables() []*table.Table
}

// LogRuntime is the Runtime of a probe whose output may carry OpenTelemetry
// log records (custom probes' |log| lines); the Manager's runtime has it.
type LogRuntime interface {
	// Log publishes one log record to the event channels.
	Log(l event.Log)
}

// LogPipeline is a Pipeline that carries log records.
type LogPipeline interface {
	Log(l event.Log)
}

// Config is a probe's running configuration.
type Config struct {
	// SubItems is the bit set of enabled sub-items (Feature.SubItems bits).
	SubItems uint32
	Params   Params
	// Targets is the live set of observed processes and cgroups resolved
	// from the snoopers (or the blacklist); nil for features without snoopers.
	Targets snoop.Targets
	// CustomLabels are added to every record of the probe.
	CustomLabels map[string]string
	// PodLabels name the Kubernetes pod labels added to the records of pod
	// containers (pod_labels).
	PodLabels []string
}

// Has reports whether the sub-item with the given bit is enabled.
func (c Config) Has(bit uint32) bool { return c.SubItems&bit != 0 }

// Runtime is what the Manager hands a running probe.
type Runtime interface {
	// Record publishes one record for its period.
	Record(r *table.Record)
	// Event publishes an abnormal event (subject to de-duplication).
	Event(e event.Event)
	// Go runs fn as a supervised goroutine: a returned error or a panic
	// marks the probe failed, and the Manager restarts it with backoff.
	// fn must return when ctx is done.
	Go(fn func(ctx context.Context) error)
	// Lost counts events the probe could not deliver (ring buffer, queues).
	Lost(n uint64)
	// Error counts a non-fatal error (logged by the caller).
	Error()
	// Logger is the probe's logger, with a "probe" attribute.
	Logger() *slog.Logger
}
