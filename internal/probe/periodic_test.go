package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestReportPeriod(t *testing.T) {
	p := DefaultParams()
	if got := ReportPeriod(0, p); got != p.Period() {
		t.Errorf("default: %v", got)
	}
	p.ReportPeriod = 7
	if got := ReportPeriod(0, p); got != 7*time.Second {
		t.Errorf("report_period 7: %v", got)
	}
	if got := ReportPeriod(time.Millisecond, p); got != time.Millisecond {
		t.Errorf("override: %v", got)
	}
	p.ReportPeriod = 0
	if got := ReportPeriod(0, p); got != DefaultParams().Period() {
		t.Errorf("unset: %v", got)
	}
}

// TestEvery: a kick with a new period takes effect at once (a long
// period is replaced by a short one), and ctx ends the loop.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	var period atomic.Int64
	period.Store(int64(time.Hour))
	var runs atomic.Int32
	done := make(chan struct{})
	go func() {
		Every(ctx, kick, &sync.Mutex{}, func() time.Duration { return time.Duration(period.Load()) }, func() { runs.Add(1) })
		close(done)
	}()
	period.Store(int64(time.Millisecond))
	Kick(kick)
	Kick(kick) // a wake-up is already pending: does not block
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs after the kick", runs.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
