package periodic

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

func TestLoop(t *testing.T) {
	var mu sync.Mutex
	var cycles []Cycle
	l := New(func(c Cycle) {
		mu.Lock()
		cycles = append(cycles, c)
		mu.Unlock()
		c.WarnOnce("k", "warned")
		c.WarnOnce("k", "warned")
	}, Interval(20*time.Millisecond), AtStart())
	rt := probetest.NewRuntime(t)
	start := time.Now()
	if err := l.Start(probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(probe.Config{}, rt); err == nil {
		t.Error("second Start accepted")
	}
	probetest.WaitFor(t, "3 cycles", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cycles) >= 3
	})
	rt.Stop()
	mu.Lock()
	defer mu.Unlock()
	// The first cycle runs at start and covers the time since Start.
	if cycles[0].Period > 20*time.Millisecond || cycles[0].Now.Before(start) {
		t.Errorf("first cycle %+v", cycles[0])
	}
	for i := 1; i < len(cycles); i++ {
		if got := cycles[i].Now.Sub(cycles[i-1].Now); got != cycles[i].Period {
			t.Errorf("cycle %d period %v, want %v (since the previous)", i, cycles[i].Period, got)
		}
	}
	if n := strings.Count(rt.Logs(), "warned"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, rt.Logs())
	}
}

func TestPeriod(t *testing.T) {
	l := New(func(Cycle) {})
	if got := l.Period(probe.Config{}); got != time.Minute {
		t.Errorf("unset report_period: %v, want gala-gopher's 60 s", got)
	}
	if got := l.Period(probe.Config{Params: probe.Params{ReportPeriod: 5}}); got != 5*time.Second {
		t.Errorf("report_period 5: %v", got)
	}
	if got := New(func(Cycle) {}, Interval(time.Millisecond)).Period(probe.Config{Params: probe.Params{ReportPeriod: 5}}); got != time.Millisecond {
		t.Errorf("interval override: %v", got)
	}
}

// TestIdle: Idle returns only once the running collection has ended.
func TestIdle(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ended := false
	l := New(func(Cycle) {
		close(entered)
		<-release
		ended = true
	}, Interval(time.Hour), AtStart())
	rt := probetest.NewRuntime(t)
	if err := l.Start(probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	<-entered
	idle := make(chan struct{})
	go func() { l.Idle(); close(idle) }()
	select {
	case <-idle:
		t.Fatal("Idle returned while a collection ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-idle
	if !ended { // read after Idle: the collection's write happened before
		t.Error("Idle returned before the collection ended")
	}
}
