package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// Factory makes a fresh probe instance for a feature.
type Factory func() Probe

// Pipeline is where probe output goes (store, exporter, sinks).
type Pipeline interface {
	Record(r *table.Record, src *table.Source)
	Event(e event.Event)
}

// MetaWriter is a Pipeline that also takes metadata: a probe that starts
// has its tables' metadata written at once, as the consumers
// expect (and every meta interval after, with the rest).
type MetaWriter interface {
	WriteMeta(tables []*table.Table)
}

// WatchedTargets is a snoop.Targets the Manager must close when done.
type WatchedTargets interface {
	snoop.Targets
	Close()
}

// Watcher resolves selectors into live targets (the snoop resolver).
type Watcher interface {
	Watch(sel snoop.Selectors, mode snoop.Mode) WatchedTargets
}

// Status is a probe's actual state.
type Status int32

const (
	StatusStopped Status = iota
	StatusStarting
	StatusRunning
	StatusFailed
)

func (s Status) String() string {
	return [...]string{"stopped", "starting", "running", "failed"}[s]
}

// Backoff bounds for restarting a failed probe.
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// feature is the Manager's per-feature state.
type feature struct {
	def     *Feature
	factory Factory // nil: not implemented in galago yet
	desired Desired

	inst    *instance // the running instance, nil when stopped
	gen     uint64    // bumped on every start/stop, invalidates stale restarts
	status  atomic.Int32
	lastErr error
	backoff time.Duration

	restarts atomic.Uint64
	errors   atomic.Uint64
	records  atomic.Uint64
	events   atomic.Uint64
	lost     atomic.Uint64
}

// instance is one started probe with its supervised goroutines.
type instance struct {
	probe   Probe
	cfg     Config
	targets WatchedTargets
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	failed  sync.Once
	// src is read by the probe's goroutines on every record; reconfiguration
	// swaps it.
	src atomic.Pointer[table.Source]
}

func (inst *instance) setSource(name string) {
	src := &table.Source{Probe: name, CustomLabels: inst.cfg.CustomLabels, PodLabels: inst.cfg.PodLabels}
	if t := inst.cfg.Targets; t != nil {
		src.SnooperLabels = t.Labels
	}
	inst.src.Store(src)
}

// Manager serialises every lifecycle call, keeps each feature's desired and
// actual state, isolates probe faults and restarts failed probes.
type Manager struct {
	log      *slog.Logger
	pipe     Pipeline
	watcher  Watcher
	ctx      context.Context
	mu       sync.Mutex
	features map[string]*feature // key: canonical name
	order    []string
	closed   bool
	// changed, when set, is called after every Put that was applied
	// (under the lock: it must not block).
	changed func()
}

// NewManager returns a Manager with every built-in feature known (and not
// implemented until Register gives it a factory). ctx bounds restarts.
func NewManager(ctx context.Context, log *slog.Logger, pipe Pipeline, w Watcher) *Manager {
	m := &Manager{log: log, pipe: pipe, watcher: w, ctx: ctx, features: map[string]*feature{}}
	for i := range Builtin {
		m.add(&Builtin[i], nil)
	}
	return m
}

func (m *Manager) add(def *Feature, f Factory) {
	fs := &feature{def: def, factory: f}
	fs.desired.Params = DefaultParams()
	m.features[def.Name] = fs
	m.order = append(m.order, def.Name)
}

// Register gives a built-in feature its implementation.
func (m *Manager) Register(name string, f Factory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs, ok := m.features[name]
	if !ok {
		panic("probe: register of unknown feature " + name)
	}
	fs.factory = f
}

// AddCustom declares a third-party probe (gala-gopher-custom.json).
func (m *Manager) AddCustom(def *Feature, f Factory) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if LookupBuiltin(def.Name) != nil {
		return fmt.Errorf("custom probe %s: name clashes with a built-in feature", def.Name)
	}
	if _, dup := m.features[def.Name]; dup {
		return fmt.Errorf("custom probe %s declared twice", def.Name)
	}
	m.add(def, f)
	m.features[def.Name].desired.Bin = def.Custom.Bin
	return nil
}

// lookup finds a feature: built-ins case-insensitively, custom exactly.
func (m *Manager) lookup(name string) *feature {
	if def := LookupBuiltin(name); def != nil {
		return m.features[def.Name]
	}
	if fs, ok := m.features[name]; ok && fs.def.Custom != nil {
		return fs
	}
	return nil
}

// OnChange makes f called after every Put that was applied (a probe
// started, reconfigured or stopped). f must not block.
func (m *Manager) OnChange(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changed = f
}

// Put applies a PUT /<feature> body.
func (m *Manager) Put(name string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("galago is shutting down")
	}
	fs := m.lookup(name)
	if fs == nil {
		return fmt.Errorf("invalid probe name %s", name)
	}
	if fs.factory == nil {
		return ErrNotImplemented
	}
	running := fs.inst != nil
	next, err := applyRequest(fs.def, fs.desired, body, running)
	if err != nil {
		return err
	}
	prev := fs.desired
	fs.desired = next
	if err := m.reconcile(fs, prev); err != nil {
		fs.desired = prev
		return err
	}
	if m.changed != nil {
		m.changed()
	}
	if idle := observesNothing(fs.def, next); idle != nil {
		m.log.Warn(fmt.Sprintf("%s: sub-items %s observe no process until snoopers or a blacklist are given; %s collect host-wide",
			fs.def.Name, strings.Join(idle, ", "), strings.Join(fs.def.SubItemNames(next.SubItems&fs.def.SystemItems), ", ")),
			"probe", fs.def.Name)
	}
	return nil
}

// Get answers GET /<feature>.
func (m *Manager) Get(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.lookup(name)
	if fs == nil {
		return nil, ErrUnknownFeature
	}
	return encodeDesired(fs.def, fs.desired, false), nil
}

// Saved returns the configuration of a feature to write to probes.init:
// GET's answer plus the labels GET does not echo, so that applying it as
// PUT /<feature> restores the feature whole. "{}" means never configured.
func (m *Manager) Saved(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.lookup(name)
	if fs == nil {
		return nil, ErrUnknownFeature
	}
	return encodeDesired(fs.def, fs.desired, true), nil
}

// Names lists every feature (built-in then custom), as probes.init --save
// walks them.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.order...)
}

// reconcile makes the actual state follow fs.desired. Called with m.mu held.
func (m *Manager) reconcile(fs *feature, prev Desired) error {
	d := fs.desired
	switch {
	case !d.Running && fs.inst != nil:
		m.stop(fs)
		fs.status.Store(int32(StatusStopped))
	case d.Running && fs.inst == nil:
		fs.backoff = 0
		if err := m.start(fs); err != nil {
			return fmt.Errorf("failed to start probe: %w", err)
		}
	case d.Running && fs.inst != nil:
		return m.reconfigure(fs, prev)
	}
	return nil
}

func selectorsEqual(a, b Desired) bool {
	return a.Mode == b.Mode && reflect.DeepEqual(a.Snoopers, b.Snoopers)
}

func (m *Manager) reconfigure(fs *feature, prev Desired) error {
	inst := fs.inst
	r, ok := inst.probe.(Reconfigurer)
	if !ok || fs.desired.Params.RingbufMapSize != prev.Params.RingbufMapSize {
		m.stop(fs)
		if err := m.start(fs); err != nil {
			return fmt.Errorf("failed to start probe: %w", err)
		}
		return nil
	}
	cfg := inst.cfg
	cfg.SubItems = fs.desired.SubItems
	cfg.Params = fs.desired.Params
	cfg.CustomLabels = fs.desired.CustomLabels
	cfg.PodLabels = fs.desired.PodLabels
	var old WatchedTargets
	if !selectorsEqual(fs.desired, prev) && fs.def.Snooper != SnooperNone {
		old = inst.targets
		inst.targets = m.watcher.Watch(fs.desired.Snoopers, fs.desired.Mode)
		cfg.Targets = inst.targets
	}
	if err := safeCall(func() error { return r.Reconfigure(cfg) }); err != nil {
		if old != nil {
			inst.targets.Close()
			inst.targets = old
		}
		return fmt.Errorf("failed to send ipc msg to probe: %w", err)
	}
	if old != nil {
		old.Close()
	}
	inst.cfg = cfg
	inst.setSource(fs.def.Name)
	return nil
}

// safeCall runs fn, turning a panic into an error.
func safeCall(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn()
}

func (m *Manager) start(fs *feature) error {
	fs.status.Store(int32(StatusStarting))
	fs.gen++
	ctx, cancel := context.WithCancel(m.ctx)
	inst := &instance{probe: fs.factory(), cancel: cancel}
	inst.cfg = Config{
		SubItems:     fs.desired.SubItems,
		Params:       fs.desired.Params,
		CustomLabels: fs.desired.CustomLabels,
		PodLabels:    fs.desired.PodLabels,
	}
	if fs.def.Snooper != SnooperNone && m.watcher != nil {
		inst.targets = m.watcher.Watch(fs.desired.Snoopers, fs.desired.Mode)
		inst.cfg.Targets = inst.targets
	}
	inst.setSource(fs.def.Name)
	rt := &runtimeImpl{m: m, fs: fs, inst: inst, gen: fs.gen, ctx: ctx,
		log: m.log.With("probe", fs.def.Name)}
	fs.inst = inst
	err := safeCall(func() error { return inst.probe.Start(ctx, inst.cfg, rt) })
	if err != nil {
		m.stop(fs)
		fs.status.Store(int32(StatusFailed))
		fs.lastErr = err
		fs.errors.Add(1)
		m.log.Error("probe failed to start", "probe", fs.def.Name, "err", err)
		return err
	}
	// lastErr stays: after a restart it tells why the probe had failed.
	fs.status.Store(int32(StatusRunning))
	if mw, ok := m.pipe.(MetaWriter); ok {
		if t, ok := inst.probe.(Tables); ok {
			mw.WriteMeta(t.Tables())
		}
	}
	m.log.Info("probe started", "probe", fs.def.Name,
		"sub_items", strings.Join(fs.def.SubItemNames(fs.desired.SubItems), ","))
	return nil
}

// stop tears an instance down: cancel, wait for its goroutines, Stop, close
// the targets. Called with m.mu held.
func (m *Manager) stop(fs *feature) {
	inst := fs.inst
	if inst == nil {
		return
	}
	fs.inst = nil
	fs.gen++
	inst.cancel()
	inst.wg.Wait()
	if err := safeCall(inst.probe.Stop); err != nil {
		m.log.Warn("probe stop", "probe", fs.def.Name, "err", err)
	}
	if inst.targets != nil {
		inst.targets.Close()
	}
	m.log.Info("probe stopped", "probe", fs.def.Name)
}

// fail handles a supervised goroutine's error or panic: the instance is torn
// down and, while the feature is still wanted, restarted after a backoff.
func (m *Manager) fail(fs *feature, inst *instance, gen uint64, err error) {
	inst.failed.Do(func() {
		inst.cancel()
		go func() {
			m.mu.Lock()
			if fs.gen != gen || fs.inst != inst {
				m.mu.Unlock()
				return // stopped or restarted meanwhile
			}
			fs.errors.Add(1)
			fs.lastErr = err
			m.log.Error("probe failed; restarting", "probe", fs.def.Name, "err", err)
			m.stop(fs)
			fs.status.Store(int32(StatusFailed))
			m.scheduleRestart(fs)
			m.mu.Unlock()
		}()
	})
}

// scheduleRestart restarts fs after its backoff. Called with m.mu held.
func (m *Manager) scheduleRestart(fs *feature) {
	fs.backoff = min(max(fs.backoff*2, minBackoff), maxBackoff)
	gen := fs.gen
	delay := fs.backoff
	time.AfterFunc(delay, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed || fs.gen != gen || fs.inst != nil || !fs.desired.Running || m.ctx.Err() != nil {
			return
		}
		fs.restarts.Add(1)
		if err := m.start(fs); err != nil {
			m.scheduleRestart(fs)
		}
	})
}

// StopAll stops every probe (daemon shutdown). Further Puts fail.
func (m *Manager) StopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, name := range m.order {
		fs := m.features[name]
		if fs.inst != nil {
			m.stop(fs)
			fs.status.Store(int32(StatusStopped))
		}
	}
}

// ProbeStatus is one feature's health, for self-metrics and views.
type ProbeStatus struct {
	Name        string
	Implemented bool
	Wanted      bool
	Status      Status
	LastError   string
	Restarts    uint64
	Errors      uint64
	Records     uint64
	Events      uint64
	Lost        uint64
}

// Statuses reports every feature's health, sorted by name.
func (m *Manager) Statuses() []ProbeStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ProbeStatus, 0, len(m.features))
	for _, fs := range m.features {
		st := ProbeStatus{
			Name: fs.def.Name, Implemented: fs.factory != nil, Wanted: fs.desired.Running,
			Status: Status(fs.status.Load()), Restarts: fs.restarts.Load(), Errors: fs.errors.Load(),
			Records: fs.records.Load(), Events: fs.events.Load(), Lost: fs.lost.Load(),
		}
		if fs.lastErr != nil {
			st.LastError = fs.lastErr.Error()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tables lists the tables of every implemented probe, for the metadata channel.
func (m *Manager) Tables() []*table.Table {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*table.Table
	for _, name := range m.order {
		fs := m.features[name]
		if fs.factory == nil {
			continue
		}
		if t, ok := fs.factory().(Tables); ok {
			out = append(out, t.Tables()...)
		}
	}
	return out
}

// runtimeImpl is the Runtime handed to one probe instance.
type runtimeImpl struct {
	m    *Manager
	fs   *feature
	inst *instance
	gen  uint64
	ctx  context.Context
	log  *slog.Logger
}

func (rt *runtimeImpl) Record(r *table.Record) {
	rt.fs.records.Add(1)
	rt.m.pipe.Record(r, rt.inst.src.Load())
}

func (rt *runtimeImpl) Event(e event.Event) {
	rt.fs.events.Add(1)
	rt.m.pipe.Event(e)
}

// Log implements LogRuntime; a pipeline without LogPipeline drops it.
func (rt *runtimeImpl) Log(l event.Log) {
	if lp, ok := rt.m.pipe.(LogPipeline); ok {
		lp.Log(l)
	}
}

func (rt *runtimeImpl) Go(fn func(ctx context.Context) error) {
	rt.inst.wg.Add(1)
	go func() {
		defer rt.inst.wg.Done()
		err := safeCall(func() error { return fn(rt.ctx) })
		if rt.ctx.Err() != nil {
			return // stopping: whatever it returned is expected
		}
		if err == nil {
			err = errors.New("probe goroutine returned while running")
		}
		rt.m.fail(rt.fs, rt.inst, rt.gen, err)
	}()
}

func (rt *runtimeImpl) Lost(n uint64)        { rt.fs.lost.Add(n) }
func (rt *runtimeImpl) Error()               { rt.fs.errors.Add(1) }
func (rt *runtimeImpl) Logger() *slog.Logger { return rt.log }
