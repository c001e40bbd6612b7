package event

import (
	"testing"
	"time"
)

func TestDedupPerEntityAndMetric(t *testing.T) {
	d := NewDedup(10 * time.Minute)
	t0 := time.Unix(1000, 0)
	cpu := Event{Time: t0, Entity: "cpu", EntityID: "cpu", Metric: "total_used_per"}
	if !d.Allow(cpu) {
		t.Fatal("first event suppressed")
	}
	cpu.Time = t0.Add(time.Minute)
	if d.Allow(cpu) {
		t.Fatal("repeat inside the window allowed")
	}
	// A different condition of the same entity is not hidden (gala-gopher
	// would suppress it: its window is per entity).
	mem := Event{Time: t0.Add(time.Minute), Entity: "mem", EntityID: "/proc/meminfo", Metric: "util"}
	swap := mem
	swap.Metric = "swap_util"
	if !d.Allow(mem) || !d.Allow(swap) {
		t.Fatal("different metric of one entity suppressed")
	}
	cpu.Time = t0.Add(10 * time.Minute)
	if !d.Allow(cpu) {
		t.Fatal("event after the window suppressed")
	}
}

func TestDedupZeroWindow(t *testing.T) {
	d := NewDedup(0)
	e := Event{Time: time.Unix(1, 0), Entity: "nic", EntityID: "eth0", Metric: "rx_dropped"}
	for i := 0; i < 3; i++ {
		if !d.Allow(e) {
			t.Fatal("window 0 suppressed an event")
		}
	}
}

func TestDedupBounded(t *testing.T) {
	d := NewDedup(time.Second)
	t0 := time.Unix(0, 0)
	for i := 0; i < 5000; i++ {
		d.Allow(Event{Time: t0, Entity: "e", EntityID: string(rune('a'+i%26)) + time.Duration(i).String(), Metric: "m"})
	}
	d.Allow(Event{Time: t0.Add(2 * time.Second), Entity: "e", EntityID: "late", Metric: "m"})
	if n := len(d.last); n > 4097 {
		t.Fatalf("dedup keeps %d entries after their window passed", n)
	}
}

func TestSeverityString(t *testing.T) {
	for s, want := range map[Severity]string{SeverityInfo: "INFO", SeverityWarn: "WARN", SeverityError: "ERROR", SeverityFatal: "FATAL", 3: "UNKNOWN"} {
		if s.String() != want {
			t.Errorf("%d: %s", s, s.String())
		}
	}
}
