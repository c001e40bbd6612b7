package custom

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// testTables are the tables of testdata/myprobe.meta.
func testTables(t testing.TB) []*table.Table {
	t.Helper()
	data, err := os.ReadFile("testdata/myprobe.meta")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := table.ParseMeta("myprobe.meta", data)
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

func tableByName(tables []*table.Table, name string) *table.Table {
	for _, t := range tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// logEntry is one captured log record.
type logEntry struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// captureHandler is a slog.Handler that keeps every record, debug included.
type captureHandler struct {
	mu      *sync.Mutex
	entries *[]logEntry
	attrs   []slog.Attr
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	e := logEntry{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		e.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		e.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.entries = append(*h.entries, e)
	h.mu.Unlock()
	return nil
}
func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}
func (h captureHandler) WithGroup(string) slog.Handler { return h }

// fakeRuntime records what a probe publishes and runs its goroutines the
// way the Manager does.
type fakeRuntime struct {
	mu      sync.Mutex
	records []*table.Record
	events  []event.Event
	errors  int
	logs    []logEntry
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	goErrs chan error
	notify chan struct{}
}

func newFakeRuntime() *fakeRuntime {
	rt := &fakeRuntime{goErrs: make(chan error, 16), notify: make(chan struct{}, 1)}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.log = slog.New(captureHandler{mu: &rt.mu, entries: &rt.logs}).With("probe", "myprobe")
	return rt
}

func (rt *fakeRuntime) poke() {
	select {
	case rt.notify <- struct{}{}:
	default:
	}
}

func (rt *fakeRuntime) Record(r *table.Record) {
	rt.mu.Lock()
	rt.records = append(rt.records, r)
	rt.mu.Unlock()
	rt.poke()
}

func (rt *fakeRuntime) Event(e event.Event) {
	rt.mu.Lock()
	rt.events = append(rt.events, e)
	rt.mu.Unlock()
	rt.poke()
}

func (rt *fakeRuntime) Go(fn func(ctx context.Context) error) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if err := fn(rt.ctx); err != nil {
			rt.goErrs <- err
		}
	}()
}

func (rt *fakeRuntime) Lost(uint64) {}
func (rt *fakeRuntime) Error() {
	rt.mu.Lock()
	rt.errors++
	rt.mu.Unlock()
}
func (rt *fakeRuntime) Logger() *slog.Logger { return rt.log }

// shutdown is the Manager's stop sequence: cancel, wait for the
// goroutines, then Stop.
func (rt *fakeRuntime) shutdown(t *testing.T, p probe.Probe) {
	t.Helper()
	rt.cancel()
	rt.wg.Wait()
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// waitFor polls cond (under rt.mu) until it holds or the deadline passes.
func (rt *fakeRuntime) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rt.mu.Lock()
		ok := cond()
		rt.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rt.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// fakeTargets is a snoop.Targets whose pid set the test changes.
type fakeTargets struct {
	mu      sync.Mutex
	mode    snoop.Mode
	pids    []int
	cgroups []uint64
	changed chan struct{}
}

func newFakeTargets(mode snoop.Mode, pids ...int) *fakeTargets {
	return &fakeTargets{mode: mode, pids: pids, changed: make(chan struct{}, 1)}
}

func (f *fakeTargets) Mode() snoop.Mode { return f.mode }
func (f *fakeTargets) Observed(pid int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pids {
		if p == pid {
			return f.mode == snoop.Whitelist
		}
	}
	return f.mode == snoop.Blacklist
}
func (f *fakeTargets) PIDs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.pids...)
}
func (f *fakeTargets) CgroupIDs() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.cgroups...)
}
func (f *fakeTargets) Labels(int) map[string]string { return nil }
func (f *fakeTargets) Changed() <-chan struct{}     { return f.changed }
func (f *fakeTargets) set(pids ...int) {
	f.mu.Lock()
	f.pids = pids
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// testFeature is a custom probe declaration like LoadDecls makes.
func testFeature(bin string) *probe.Feature {
	return &probe.Feature{
		Name: "myprobe", IPCType: 101, Snooper: probe.SnooperProc,
		SubItems: []probe.SubItem{{Name: "sub1", Bit: 1}, {Name: "sub2", Bit: 2}},
		Custom: &probe.CustomDecl{Bin: bin, MetaPath: MetaPath(bin), Params: []string{"p1"},
			SubItemList: []string{"sub1", "sub2"}},
	}
}
