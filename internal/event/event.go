// Package event defines gala-gopher's abnormal events: what a probe raises
// when a threshold is crossed, the catalogue of their descriptions in
// gala-gopher's two languages (en_US, zh_CN; event.desc_language), the
// de-duplication window that keeps one condition from flooding the event
// channel, and the OpenTelemetry log records probes report (|log| lines).
package event

import (
	"fmt"
	"sync"
	"time"
)

// Severity follows gala-gopher's (OpenTelemetry) severity numbers.
type Severity int

const (
	SeverityInfo  Severity = 9
	SeverityWarn  Severity = 13
	SeverityError Severity = 17
	SeverityFatal Severity = 21
)

func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "INFO"
	case SeverityWarn:
		return "WARN"
	case SeverityError:
		return "ERROR"
	case SeverityFatal:
		return "FATAL"
	}
	return "UNKNOWN"
}

// Event is one abnormal event.
type Event struct {
	Time time.Time
	// Entity is the table's entity_name (cpu, mem, nic, tcp_link, ...).
	Entity string
	// EntityID is gala-gopher's per-entity id, e.g. "cpu", "/proc/meminfo",
	// "<tgid>_<cip>_<sip>_<sport>_<role>".
	EntityID string
	// Metric is the field whose value raised the event (without prefix).
	Metric      string
	PID         int // 0 when not process related
	Comm        string
	IP          string
	ContainerID string
	PodID       string
	Device      string
	Severity    Severity
	// Message is the description, e.g. "Too high cpu utilization(93.20%).":
	// in en_US for an event made by New (the pipeline renders it again in
	// the configured desc_language), else the text as a custom probe
	// wrote it.
	Message string
	// Desc and Args are the catalogue entry and its arguments of an event
	// made by New; nil for a custom probe's event.
	Desc *Desc
	Args []any
}

// New returns the WARN event d describes, about entityID, at t; args are
// the arguments of d's texts. The caller fills the labels (PID, Comm, IP,
// ContainerID, PodID, Device).
func New(t time.Time, d *Desc, entityID string, args ...any) Event {
	return Event{
		Time: t, Entity: d.Entity, EntityID: entityID, Metric: d.Metric, Severity: SeverityWarn,
		Message: fmt.Sprintf(d.EnUS, args...), Desc: d, Args: args,
	}
}

// Describe is e's description in lang: its catalogue text with its
// arguments, or Message for an event without a catalogue entry.
func (e Event) Describe(lang Language) string {
	if e.Desc == nil {
		return e.Message
	}
	return fmt.Sprintf(e.Desc.Text(lang), e.Args...)
}

// Dedup suppresses repeats of the same (entity, id, metric) inside a window.
// gala-gopher keys the window on the entity only, which hides a second,
// different condition of one entity; galago keys it on the metric too.
type Dedup struct {
	mu     sync.Mutex
	window time.Duration
	last   map[dedupKey]time.Time
}

type dedupKey struct{ entity, id, metric string }

// NewDedup returns a filter with the given window; 0 lets everything pass.
func NewDedup(window time.Duration) *Dedup {
	return &Dedup{window: window, last: make(map[dedupKey]time.Time)}
}

// Allow reports whether e should be emitted and, if so, records it.
func (d *Dedup) Allow(e Event) bool {
	if d.window <= 0 {
		return true
	}
	k := dedupKey{e.Entity, e.EntityID, e.Metric}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.last[k]; ok && e.Time.Sub(t) < d.window {
		return false
	}
	d.last[k] = e.Time
	// Bound memory: forget entries whose window has passed.
	if len(d.last) > 4096 {
		for key, t := range d.last {
			if e.Time.Sub(t) >= d.window {
				delete(d.last, key)
			}
		}
	}
	return true
}
