// Package probetest holds what probe tests share: Runtime, a probe.Runtime
// that keeps everything a probe publishes and runs its goroutines the way
// the Manager does; Targets, a snoop.Targets the test controls; and
// RequirePrivileged / RequireTools / RequireHooks, the gate of the
// privileged tier. Only tests import it.
//
// A typical probe test:
//
//	rt := probetest.NewRuntime(t)
//	if err := p.Start(rt.Context(), cfg, rt); err != nil {
//		t.Fatal(err)
//	}
//	recs := rt.WaitTable(t, table.EndpointTcp, 1, nil) // polls until published
//	rt.Shutdown(t, p)                                  // cancel, wait, p.Stop, goroutine errors
//	recs, evs := rt.Take()                             // everything published, cleared
//
// Every method is safe for concurrent use.
package probetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// DefaultTimeout bounds every Wait* call unless WithTimeout says otherwise.
// It is a ceiling for a test that is going wrong, not a measurement.
const DefaultTimeout = 15 * time.Second

// Runtime is a probe.Runtime for tests. It keeps every record, event, lost
// count and error count the probe publishes and every log line it writes;
// it runs rt.Go functions on goroutines under Context() (unless built with
// DiscardGo) and keeps what they return. A panic in one fails the test (and
// is kept as an error), as the Manager would mark the probe failed.
type Runtime struct {
	t       testing.TB
	timeout time.Duration
	runGo   bool
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	notify chan struct{} // poked on every publication and goroutine error

	mu       sync.Mutex
	records  []*table.Record
	events   []event.Event
	logs     []event.Log
	lost     uint64
	errors   int
	goErrs   []error
	goTaken  int // goErrs[:goTaken] were handed to the test by WaitGoErr
	logText  bytes.Buffer
	logLines []LogEntry
}

var _ probe.Runtime = (*Runtime)(nil)

// Option configures NewRuntime.
type Option func(*Runtime)

// DiscardGo makes Go drop its functions: for unit tests that drive the
// probe's collection by hand instead of through its loop.
func DiscardGo() Option { return func(rt *Runtime) { rt.runGo = false } }

// WithTimeout replaces DefaultTimeout for this runtime's Wait* calls.
func WithTimeout(d time.Duration) Option { return func(rt *Runtime) { rt.timeout = d } }

// ProbeName adds the "probe" attribute to the logger, as the Manager's
// runtime does.
func ProbeName(name string) Option {
	return func(rt *Runtime) { rt.log = rt.log.With("probe", name) }
}

// NewRuntime returns a Runtime bound to t. A cleanup cancels Context and
// waits for the goroutines, so none outlives the test.
func NewRuntime(t testing.TB, opts ...Option) *Runtime {
	rt := &Runtime{t: t, timeout: DefaultTimeout, runGo: true, notify: make(chan struct{}, 1)}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.log = slog.New(&logHandler{rt: rt, text: slog.NewTextHandler(&lockedWriter{rt}, &slog.HandlerOptions{Level: slog.LevelDebug})})
	for _, o := range opts {
		o(rt)
	}
	t.Cleanup(func() { rt.Stop() })
	return rt
}

// Context is the context to Start the probe with; Stop cancels it, as the
// Manager cancels a probe's context before calling Probe.Stop.
func (rt *Runtime) Context() context.Context { return rt.ctx }

// Record implements probe.Runtime.
func (rt *Runtime) Record(r *table.Record) {
	rt.mu.Lock()
	rt.records = append(rt.records, r)
	rt.mu.Unlock()
	rt.poke()
}

// Event implements probe.Runtime. An event whose arguments do not fit its
// catalogue texts in every language, or that has no text at all, fails the
// test.
func (rt *Runtime) Event(e event.Event) {
	if e.Desc != nil {
		for _, lang := range event.Languages {
			if s := e.Describe(lang); event.BadArgs(s) {
				rt.t.Errorf("event %s/%s: its arguments %v do not fit the %s text: %q", e.Entity, e.Metric, e.Args, lang, s)
			}
		}
	} else if e.Message == "" {
		rt.t.Errorf("event %s/%s has no description: raise it with event.New and a catalogue Desc", e.Entity, e.Metric)
	}
	rt.mu.Lock()
	rt.events = append(rt.events, e)
	rt.mu.Unlock()
	rt.poke()
}

// Log implements probe.LogRuntime; LogRecords reads what was published.
func (rt *Runtime) Log(l event.Log) {
	rt.mu.Lock()
	rt.logs = append(rt.logs, l)
	rt.mu.Unlock()
	rt.poke()
}

// LogRecords returns the log records (|log| lines) published so far.
func (rt *Runtime) LogRecords() []event.Log {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.logs)
}

// Lost implements probe.Runtime; LostCount reads the sum.
func (rt *Runtime) Lost(n uint64) {
	rt.mu.Lock()
	rt.lost += n
	rt.mu.Unlock()
}

// Error implements probe.Runtime; ErrorCount reads the count.
func (rt *Runtime) Error() {
	rt.mu.Lock()
	rt.errors++
	rt.mu.Unlock()
}

// Logger implements probe.Runtime: every level, Debug included, is kept
// (Logs, LogEntries).
func (rt *Runtime) Logger() *slog.Logger { return rt.log }

// Go implements probe.Runtime: fn runs on its own goroutine with Context
// until it returns. A non-nil error is kept (GoErrors, WaitGoErr, Stop); a
// panic fails the test at once and is kept as an error too.
func (rt *Runtime) Go(fn func(ctx context.Context) error) {
	if !rt.runGo {
		return
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("probe goroutine panicked: %v\n%s", v, debug.Stack())
					rt.t.Errorf("%v", err)
				}
			}()
			err = fn(rt.ctx)
		}()
		if err != nil {
			rt.mu.Lock()
			rt.goErrs = append(rt.goErrs, err)
			rt.mu.Unlock()
			rt.poke()
		}
	}()
}

// Stop cancels Context and waits for the goroutines, the Manager's first
// step in stopping a probe, and returns every error they returned so far
// (WaitGoErr's included). It is idempotent.
func (rt *Runtime) Stop() []error {
	rt.cancel()
	rt.wg.Wait()
	return rt.GoErrors()
}

// Shutdown is the Manager's whole stop sequence: Stop, then p.Stop. It
// fails t if p.Stop fails or if a goroutine returned an error the test did
// not collect with WaitGoErr.
func (rt *Runtime) Shutdown(t testing.TB, p probe.Probe) {
	t.Helper()
	rt.Stop()
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	rt.mu.Lock()
	unseen := slices.Clone(rt.goErrs[rt.goTaken:])
	rt.mu.Unlock()
	if len(unseen) > 0 {
		t.Errorf("probe goroutines failed: %v", unseen)
	}
}

// GoErrors returns every error a Go function returned so far, in order.
func (rt *Runtime) GoErrors() []error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.goErrs)
}

// WaitGoErr waits for the next goroutine error the test has not yet taken
// and returns it; it fails t after the timeout.
func (rt *Runtime) WaitGoErr(t testing.TB, what string) error {
	t.Helper()
	var err error
	rt.waitUntil(t, what, func() bool {
		if rt.goTaken < len(rt.goErrs) {
			err = rt.goErrs[rt.goTaken]
			rt.goTaken++
			return true
		}
		return false
	})
	return err
}

// Records returns a copy of every record published so far (since the last
// Take), in order.
func (rt *Runtime) Records() []*table.Record {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.records)
}

// Events returns a copy of every event published so far (since the last
// Take), in order.
func (rt *Runtime) Events() []event.Event {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.events)
}

// Take returns the records and events published since the last Take and
// forgets them: one report period at a time.
func (rt *Runtime) Take() ([]*table.Record, []event.Event) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r, e := rt.records, rt.events
	rt.records, rt.events = nil, nil
	return r, e
}

// LostCount is the sum of the probe's Lost calls.
func (rt *Runtime) LostCount() uint64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lost
}

// ErrorCount is the number of the probe's Error calls.
func (rt *Runtime) ErrorCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.errors
}

// WaitRecords polls until cond holds for the records published so far
// (since the last Take) and returns them; it fails t after the timeout.
// cond must not keep the slice past its call.
func (rt *Runtime) WaitRecords(t testing.TB, what string, cond func(recs []*table.Record) bool) []*table.Record {
	t.Helper()
	var recs []*table.Record
	rt.waitUntil(t, what, func() bool {
		if cond(rt.records) {
			recs = slices.Clone(rt.records)
			return true
		}
		return false
	})
	return recs
}

// WaitTable waits until at least n records of tbl for which match holds
// (every record of tbl when match is nil) are published, and returns those
// records, in order; it fails t after the timeout.
func (rt *Runtime) WaitTable(t testing.TB, tbl *table.Table, n int, match func(*table.Record) bool) []*table.Record {
	t.Helper()
	var out []*table.Record
	rt.WaitRecords(t, fmt.Sprintf("%d %s records", n, tbl.Name), func(recs []*table.Record) bool {
		out = out[:0]
		for _, r := range recs {
			if r.Table == tbl && (match == nil || match(r)) {
				out = append(out, r)
			}
		}
		return len(out) >= n
	})
	return out
}

// WaitFor polls cond every 20 ms until it holds, for state no Runtime
// sees (a file a child writes, a process exiting); it fails t after
// DefaultTimeout.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", DefaultTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUntil calls cond under rt.mu on every publication, and every 20 ms
// for state that changes without one (files, the probe's own fields).
func (rt *Runtime) waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(rt.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rt.mu.Lock()
		ok := cond()
		rt.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rt.notify:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", rt.timeout, what)
		}
	}
}

func (rt *Runtime) poke() {
	select {
	case rt.notify <- struct{}{}:
	default:
	}
}

// Logs is everything logged so far in slog's text format (key=value, one
// line per call), for substring checks.
func (rt *Runtime) Logs() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.logText.String()
}

// LogEntry is one log call: its level, message and attributes (those of
// Logger.With included), values in their String form. Attributes under a
// group are named group.key.
type LogEntry struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// LogEntries returns every log call so far, in order.
func (rt *Runtime) LogEntries() []LogEntry {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.logLines)
}

type lockedWriter struct{ rt *Runtime }

// Write is called by the text handler from inside logHandler.Handle, which
// already holds rt.mu.
func (w *lockedWriter) Write(b []byte) (int, error) { return w.rt.logText.Write(b) }

// logHandler keeps each record twice: as a LogEntry and through a text
// handler, under rt.mu so both orders agree.
type logHandler struct {
	rt     *Runtime
	text   slog.Handler
	attrs  []slog.Attr
	prefix string
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	e := LogEntry{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		e.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		e.Attrs[h.prefix+a.Key] = a.Value.String()
		return true
	})
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	h.rt.logLines = append(h.rt.logLines, e)
	return h.text.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clone(h.attrs)
	for _, a := range as {
		c.attrs = append(c.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	c.text = h.text.WithAttrs(as)
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	c.text = h.text.WithGroup(name)
	return &c
}

// Targets is a snoop.Targets the test sets: a mode, a pid set and a cgroup
// id set. Set and SetCgroups signal Changed, as a snooper does.
type Targets struct {
	mode    snoop.Mode
	changed chan struct{}

	mu      sync.Mutex
	pids    []int
	cgroups []uint64
	labels  map[int]map[string]string
	// handled, once SetHandled was called, is the time Settled answers
	// for (see snoop.Set.Settled).
	handled    uint64
	hasHandled bool
}

var _ snoop.Targets = (*Targets)(nil)

// NewTargets returns the targets of mode with pids resolved.
func NewTargets(mode snoop.Mode, pids ...int) *Targets {
	return &Targets{mode: mode, pids: slices.Clone(pids), changed: make(chan struct{}, 1)}
}

// Mode implements snoop.Targets.
func (f *Targets) Mode() snoop.Mode { return f.mode }

// Observed implements snoop.Targets: a listed pid is observed in whitelist
// mode, an unlisted one in blacklist mode.
func (f *Targets) Observed(pid int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.pids, pid) == (f.mode == snoop.Whitelist)
}

// PIDs implements snoop.Targets.
func (f *Targets) PIDs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pids)
}

// CgroupIDs implements snoop.Targets.
func (f *Targets) CgroupIDs() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cgroups)
}

// Labels implements snoop.Targets: the labels SetLabels gave pid, if any.
func (f *Targets) Labels(pid int) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.labels[pid])
}

// Changed implements snoop.Targets.
func (f *Targets) Changed() <-chan struct{} { return f.changed }

// Settled is snoop.Set's: true for data up to the time SetHandled last
// gave, always true before a call.
func (f *Targets) Settled(ts uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.hasHandled || f.handled >= ts
}

// SetHandled says the lifecycle events up to ts (CLOCK_MONOTONIC ns) are
// handled: Settled answers for data up to it.
func (f *Targets) SetHandled(ts uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handled, f.hasHandled = ts, true
}

// Set replaces the pid set and signals Changed.
func (f *Targets) Set(pids ...int) {
	f.mu.Lock()
	f.pids = slices.Clone(pids)
	f.mu.Unlock()
	f.signal()
}

// SetCgroups replaces the cgroup id set and signals Changed.
func (f *Targets) SetCgroups(ids ...uint64) {
	f.mu.Lock()
	f.cgroups = slices.Clone(ids)
	f.mu.Unlock()
	f.signal()
}

// SetLabels sets the proc_name snooper labels of pid and signals Changed.
func (f *Targets) SetLabels(pid int, labels map[string]string) {
	f.mu.Lock()
	if f.labels == nil {
		f.labels = map[int]map[string]string{}
	}
	f.labels[pid] = maps.Clone(labels)
	f.mu.Unlock()
	f.signal()
}

func (f *Targets) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// PrivilegedEnv is the variable that asks for the privileged tier.
const PrivilegedEnv = "GALAGO_PRIVILEGED_TESTS"

// Privileged reports whether privileged tests were asked for
// (GALAGO_PRIVILEGED_TESTS=1).
func Privileged() bool { return os.Getenv(PrivilegedEnv) == "1" }

// RequirePrivileged gates a privileged test: it skips t unless
// GALAGO_PRIVILEGED_TESTS=1, and once that is set it fails t (never skips)
// unless the process is root. CI always sets the variable, so a privileged
// test cannot vanish silently.
func RequirePrivileged(t testing.TB) {
	t.Helper()
	if !Privileged() {
		t.Skip("set " + PrivilegedEnv + "=1 to run (needs root and BPF)")
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s=1 but not root (euid %d)", PrivilegedEnv, os.Geteuid())
	}
}

// RequireTools is RequirePrivileged plus the executables the test runs
// (ip, tc, df, ...): each must be on PATH, or t fails.
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	RequirePrivileged(t)
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s=1 but %s is missing: %v", PrivilegedEnv, tool, err)
		}
	}
}

// RequireHooks is RequirePrivileged plus the kernel hooks the test relies
// on: pass the results of bpfrt.HaveTPBTF, HaveRawTracepoint, ... (nil for
// a hook that exists); any error fails t, naming every missing hook. A
// probe degrades without an optional hook, so without this a test would
// see the fields stay unset instead of failing on the missing hook.
func RequireHooks(t testing.TB, checks ...error) {
	t.Helper()
	RequirePrivileged(t)
	var missing []error
	for _, err := range checks {
		if err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s=1 but hooks are missing: %v", PrivilegedEnv, missing)
	}
}
