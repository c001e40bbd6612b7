package tcp

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// fakeRT is a probe.Runtime that keeps what the probe publishes.
type fakeRT struct {
	mu      sync.Mutex
	records []*table.Record
	events  []event.Event
	lost    uint64
	errors  int
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	goErr   []error
}

func newFakeRT() *fakeRT {
	ctx, cancel := context.WithCancel(context.Background())
	return &fakeRT{ctx: ctx, cancel: cancel, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func (f *fakeRT) Record(r *table.Record) {
	f.mu.Lock()
	f.records = append(f.records, r)
	f.mu.Unlock()
}
func (f *fakeRT) Event(e event.Event)  { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }
func (f *fakeRT) Lost(n uint64)        { f.mu.Lock(); f.lost += n; f.mu.Unlock() }
func (f *fakeRT) Error()               { f.mu.Lock(); f.errors++; f.mu.Unlock() }
func (f *fakeRT) Logger() *slog.Logger { return f.log }

func (f *fakeRT) Go(fn func(ctx context.Context) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := fn(f.ctx); err != nil {
			f.mu.Lock()
			f.goErr = append(f.goErr, err)
			f.mu.Unlock()
		}
	}()
}

// stop cancels and waits for the probe's goroutines, as the Manager does.
func (f *fakeRT) stop() { f.cancel(); f.wg.Wait() }

func (f *fakeRT) snapshot() ([]*table.Record, []event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.records), slices.Clone(f.events)
}

// fakeTargets is a fixed snoop.Targets.
type fakeTargets struct {
	mode snoop.Mode
	pids []int
}

func (f fakeTargets) Mode() snoop.Mode { return f.mode }
func (f fakeTargets) Observed(pid int) bool {
	return slices.Contains(f.pids, pid) == (f.mode == snoop.Whitelist)
}
func (f fakeTargets) PIDs() []int                  { return f.pids }
func (f fakeTargets) CgroupIDs() []uint64          { return nil }
func (f fakeTargets) Labels(int) map[string]string { return nil }
func (f fakeTargets) Changed() <-chan struct{}     { return nil }
