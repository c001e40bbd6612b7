package probetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// recorder keeps failures so the helpers can be shown to fail.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errs   []string
	fatals []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	panic(errFatal)
}

var errFatal = errors.New("fatal")

// fatal runs fn and reports whether it called Fatalf.
func fatal(fn func()) (failed bool) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); !ok || !errors.Is(err, errFatal) {
				panic(v)
			}
			failed = true
		}
	}()
	fn()
	return false
}

type stopper struct{ err error }

func (s stopper) Name() string                                             { return "x" }
func (s stopper) Start(context.Context, probe.Config, probe.Runtime) error { return nil }
func (s stopper) Stop() error                                              { return s.err }

func TestRuntimeRecords(t *testing.T) {
	rt := NewRuntime(t, WithTimeout(2*time.Second))
	tbl := table.EndpointTcp
	rt.Go(func(ctx context.Context) error {
		// Each event before its records: once the ten records are
		// seen, the five events are in too.
		for i := range 5 {
			rt.Event(event.New(time.Time{}, event.CPUTotalUsedPer, "cpu", 1.0))
			rt.Record(&table.Record{Table: tbl, Period: time.Duration(i)})
			rt.Record(&table.Record{Table: table.EndpointUdp})
			rt.Lost(3)
			rt.Error()
		}
		<-ctx.Done()
		return nil
	})
	got := rt.WaitTable(t, tbl, 4, func(r *table.Record) bool { return r.Period >= 1 })
	if len(got) != 4 || got[0].Period != 1 {
		t.Fatalf("WaitTable: %d records, first %+v", len(got), got)
	}
	got = rt.WaitTable(t, tbl, 5, nil)
	if len(got) != 5 {
		t.Fatalf("WaitTable nil: %d", len(got))
	}
	all := rt.WaitRecords(t, "ten", func(recs []*table.Record) bool { return len(recs) == 10 })
	if len(all) != 10 || len(rt.Records()) != 10 || len(rt.Events()) != 5 {
		t.Fatalf("%d records, %d events", len(all), len(rt.Events()))
	}
	rt.Shutdown(t, stopper{})
	if rt.LostCount() != 15 || rt.ErrorCount() != 5 {
		t.Errorf("lost %d errors %d, want 15 and 5", rt.LostCount(), rt.ErrorCount())
	}
	r, e := rt.Take()
	if len(r) != 10 || len(e) != 5 {
		t.Errorf("Take: %d %d", len(r), len(e))
	}
	if r, e := rt.Take(); len(r)+len(e) != 0 {
		t.Errorf("second Take: %d %d", len(r), len(e))
	}
	// A wait that cannot succeed fails after the timeout.
	rec := &recorder{TB: t}
	rt2 := NewRuntime(t, WithTimeout(50*time.Millisecond))
	if !fatal(func() { rt2.WaitTable(rec, tbl, 1, nil) }) || len(rec.fatals) != 1 ||
		rec.fatals[0] != "timed out after 50ms waiting for 1 endpoint_tcp records" {
		t.Errorf("WaitTable on nothing: %q", rec.fatals)
	}
}

func TestRuntimeGoErrors(t *testing.T) {
	rt := NewRuntime(t)
	boom := errors.New("boom")
	rt.Go(func(context.Context) error { return boom })
	if err := rt.WaitGoErr(t, "boom"); !errors.Is(err, boom) {
		t.Fatalf("WaitGoErr = %v", err)
	}
	late := errors.New("late")
	rt.Go(func(ctx context.Context) error { <-ctx.Done(); return late })
	rec := &recorder{TB: t}
	rt.Shutdown(rec, stopper{err: errors.New("stop failed")})
	if want := []string{"Stop: stop failed", "probe goroutines failed: [late]"}; !reflect.DeepEqual(rec.errs, want) {
		t.Errorf("Shutdown errors %q, want %q", rec.errs, want)
	}
	if errs := rt.Stop(); len(errs) != 2 || !errors.Is(errs[0], boom) || !errors.Is(errs[1], late) {
		t.Errorf("Stop = %v", errs)
	}

	// A panic fails the test and is kept.
	rec = &recorder{TB: t}
	rt = NewRuntime(rec)
	rt.Go(func(context.Context) error { panic("kaboom") })
	errs := rt.Stop()
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "probe goroutine panicked: kaboom\n") ||
		len(rec.errs) != 1 || rec.errs[0] != errs[0].Error() {
		t.Errorf("panic: errors %v, test failures %q", errs, rec.errs)
	}

	// DiscardGo drops the functions.
	rt = NewRuntime(t, DiscardGo())
	ran := false
	rt.Go(func(context.Context) error { ran = true; return nil })
	rt.Stop()
	if ran {
		t.Error("DiscardGo ran a function")
	}
}

func TestRuntimeLogs(t *testing.T) {
	rt := NewRuntime(t, ProbeName("p1"))
	rt.Logger().Debug("dbg", "a", 1)
	rt.Logger().With("k", "v").WithGroup("g").Warn("warned", "b", "two words")
	want := []LogEntry{
		{slog.LevelDebug, "dbg", map[string]string{"probe": "p1", "a": "1"}},
		{slog.LevelWarn, "warned", map[string]string{"probe": "p1", "k": "v", "g.b": "two words"}},
	}
	if got := rt.LogEntries(); !reflect.DeepEqual(got, want) {
		t.Errorf("entries\n got %+v\nwant %+v", got, want)
	}
	logs := rt.Logs()
	for _, s := range []string{`level=DEBUG msg=dbg probe=p1 a=1` + "\n", `level=WARN msg=warned probe=p1 k=v g.b="two words"` + "\n"} {
		if strings.Count(logs, s) != 1 {
			t.Errorf("%q not once in %s", s, logs)
		}
	}
}

func TestTargets(t *testing.T) {
	w := NewTargets(snoop.Whitelist, 1, 2)
	b := NewTargets(snoop.Blacklist, 1, 2)
	for pid, want := range map[int][2]bool{1: {true, false}, 2: {true, false}, 3: {false, true}} {
		if w.Observed(pid) != want[0] || b.Observed(pid) != want[1] {
			t.Errorf("pid %d: whitelist %v blacklist %v, want %v", pid, w.Observed(pid), b.Observed(pid), want)
		}
	}
	if w.Mode() != snoop.Whitelist || b.Mode() != snoop.Blacklist {
		t.Error("modes")
	}
	select {
	case <-w.Changed():
		t.Fatal("changed before any Set")
	default:
	}
	w.Set(3)
	w.SetCgroups(7, 8)
	w.SetLabels(3, map[string]string{"l": "v"})
	<-w.Changed()
	if !reflect.DeepEqual(w.PIDs(), []int{3}) || !reflect.DeepEqual(w.CgroupIDs(), []uint64{7, 8}) ||
		!reflect.DeepEqual(w.Labels(3), map[string]string{"l": "v"}) || w.Labels(1) != nil || !w.Observed(3) || w.Observed(1) {
		t.Errorf("after Set: %v %v %v", w.PIDs(), w.CgroupIDs(), w.Labels(3))
	}
}

func TestRequirePrivileged(t *testing.T) {
	rec := &recorder{TB: t}
	if !Privileged() {
		t.Setenv(PrivilegedEnv, "1")
	}
	if fatal(func() {
		RequireHooks(rec, nil, errors.New("hook x unavailable"), nil, errors.New("hook y unavailable"))
	}) {
		// As root: only the hooks; as another user: root first.
		want := "GALAGO_PRIVILEGED_TESTS=1 but hooks are missing: [hook x unavailable hook y unavailable]"
		if rec.fatals[0] != want && !strings.HasPrefix(rec.fatals[0], "GALAGO_PRIVILEGED_TESTS=1 but not root") {
			t.Errorf("RequireHooks: %q", rec.fatals)
		}
	} else {
		t.Error("RequireHooks passed with missing hooks")
	}
	rec = &recorder{TB: t}
	if !fatal(func() { RequireTools(rec, "sh", "galago-no-such-tool") }) ||
		(!strings.HasPrefix(rec.fatals[0], "GALAGO_PRIVILEGED_TESTS=1 but galago-no-such-tool is missing") &&
			!strings.HasPrefix(rec.fatals[0], "GALAGO_PRIVILEGED_TESTS=1 but not root")) {
		t.Errorf("RequireTools: %q", rec.fatals)
	}
}
