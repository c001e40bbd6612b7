package socket

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// fakeRT is a probe.Runtime that keeps what the probe publishes and runs
// its goroutines until cancel.
type fakeRT struct {
	mu      sync.Mutex
	records []*table.Record
	events  []event.Event
	lost    uint64
	errors  int
	logBuf  bytes.Buffer
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	goErrs []error
}

func newFakeRT() *fakeRT {
	rt := &fakeRT{}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.log = slog.New(slog.NewTextHandler(&lockedWriter{rt: rt}, nil))
	return rt
}

type lockedWriter struct{ rt *fakeRT }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.rt.mu.Lock()
	defer w.rt.mu.Unlock()
	return w.rt.logBuf.Write(b)
}

func (f *fakeRT) Record(r *table.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, r)
}

func (f *fakeRT) Event(e event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func (f *fakeRT) Go(fn func(ctx context.Context) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := fn(f.ctx); err != nil {
			f.mu.Lock()
			f.goErrs = append(f.goErrs, err)
			f.mu.Unlock()
		}
	}()
}

// stop cancels the goroutines and waits for them, as the Manager does
// before calling Probe.Stop.
func (f *fakeRT) stop() {
	f.cancel()
	f.wg.Wait()
}

func (f *fakeRT) Lost(n uint64)        { f.mu.Lock(); f.lost += n; f.mu.Unlock() }
func (f *fakeRT) Error()               { f.mu.Lock(); f.errors++; f.mu.Unlock() }
func (f *fakeRT) Logger() *slog.Logger { return f.log }

func (f *fakeRT) take() ([]*table.Record, []event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, e := f.records, f.events
	f.records, f.events = nil, nil
	return r, e
}

// fakeTargets is a fixed snoop.Targets.
type fakeTargets struct {
	mode snoop.Mode
	pids []int
}

func (f fakeTargets) Mode() snoop.Mode { return f.mode }
func (f fakeTargets) Observed(pid int) bool {
	for _, p := range f.pids {
		if p == pid {
			return f.mode == snoop.Whitelist
		}
	}
	return f.mode == snoop.Blacklist
}
func (f fakeTargets) PIDs() []int                  { return f.pids }
func (f fakeTargets) CgroupIDs() []uint64          { return nil }
func (f fakeTargets) Labels(int) map[string]string { return nil }
func (f fakeTargets) Changed() <-chan struct{}     { return nil }
