package probe

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// TestStopOnce: the teardown runs once, under the lock, and only the
// first call returns its error.
func TestStopOnce(t *testing.T) {
	var o StopOnce
	var mu sync.Mutex
	runs := 0
	teardown := func() error {
		if mu.TryLock() {
			t.Error("teardown ran without the lock")
		}
		runs++
		return errors.New("detach failed")
	}
	if err := o.Do(&mu, teardown); err == nil || err.Error() != "detach failed" {
		t.Fatalf("first Stop: %v", err)
	}
	if err := o.Do(&mu, teardown); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if runs != 1 {
		t.Fatalf("teardown ran %d times", runs)
	}
}

// errRuntime counts errors; its logger writes to a buffer.
type errRuntime struct {
	errors int
	log    *slog.Logger
}

func (r *errRuntime) Record(*table.Record)           {}
func (r *errRuntime) Event(event.Event)              {}
func (r *errRuntime) Go(func(context.Context) error) {}
func (r *errRuntime) Lost(uint64)                    {}
func (r *errRuntime) Error()                         { r.errors++ }
func (r *errRuntime) Logger() *slog.Logger           { return r.log }

func TestLogError(t *testing.T) {
	var buf bytes.Buffer
	rt := &errRuntime{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))}
	LogError(rt, "x: write outputs", errors.New("disk full"), "pid", 7)
	if want := `level=WARN msg="x: write outputs" pid=7 err="disk full"` + "\n"; rt.errors != 1 || buf.String() != want {
		t.Fatalf("%d errors, logged %q, want %q", rt.errors, buf.String(), want)
	}
}
