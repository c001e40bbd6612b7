// Package periodic is the report loop of the probes that read the host once
// per report period (files under /proc and /sys, BPF maps) rather than
// follow a stream of kernel events: one collection per report_period,
// serialised, with the period it covers and once-per-instance warnings.
package periodic

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/probe"
)

// Cycle is one collection: the period it ends and what the probe runs with.
type Cycle struct {
	Now    time.Time
	Period time.Duration // since the previous collection (or the start)
	Config probe.Config
	RT     probe.Runtime
	loop   *Loop
}

// WarnOnce logs msg once per loop (probe instance) and key.
func (c Cycle) WarnOnce(key, msg string, attrs ...any) {
	if c.loop.warned[key] {
		return
	}
	c.loop.warned[key] = true
	c.RT.Logger().Warn(msg, attrs...)
}

// Option configures a Loop.
type Option func(*Loop)

// Interval replaces report_period (tests use sub-second periods).
func Interval(d time.Duration) Option { return func(l *Loop) { l.interval = d } }

// AtStart makes the first collection right at start, not one period later.
func AtStart() Option { return func(l *Loop) { l.atStart = true } }

// Loop calls collect once per period from a goroutine the Manager
// supervises. Collections never overlap.
type Loop struct {
	interval time.Duration
	atStart  bool
	now      func() time.Time
	collect  func(Cycle)

	mu     sync.Mutex
	cfg    probe.Config
	rt     probe.Runtime
	last   time.Time
	warned map[string]bool
}

// New returns a stopped loop around collect.
func New(collect func(Cycle), opts ...Option) *Loop {
	l := &Loop{now: time.Now, collect: collect}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Period is how often the loop collects under cfg.
func (l *Loop) Period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(l.interval, cfg.Params)
}

// Start runs the loop through rt.Go until the probe's context ends.
func (l *Loop) Start(cfg probe.Config, rt probe.Runtime) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rt != nil {
		return errors.New("started twice")
	}
	l.cfg, l.rt, l.last, l.warned = cfg, rt, l.now(), map[string]bool{}
	rt.Go(l.run)
	return nil
}

// Collect runs one collection ending now (the loop calls it; tests too).
func (l *Loop) Collect(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := Cycle{Now: now, Period: now.Sub(l.last), Config: l.cfg, RT: l.rt, loop: l}
	l.last = now
	l.collect(c)
}

// Idle returns once no collection is running. A collection publishes its
// records one at a time: a test that has seen one of them calls Idle
// before it takes them, so that none of that collection's come later.
func (l *Loop) Idle() {
	l.mu.Lock()
	defer l.mu.Unlock()
}

func (l *Loop) run(ctx context.Context) error {
	if l.atStart {
		l.Collect(l.now())
	}
	probe.Every(ctx, nil, &l.mu, func() time.Duration { return l.Period(l.cfg) }, func() { l.Collect(l.now()) })
	return nil
}
