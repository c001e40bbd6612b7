package l7test

import (
	"syscall"
	"testing"
	"time"
)

// CPU measures the CPU time (user and system) the test process spends,
// which, unlike the wall clock of ns/op, does not grow when other
// processes compete for the cores.
type CPU struct{ start time.Duration }

// StartCPU starts a measurement.
func StartCPU() CPU { return CPU{start: cpuTime()} }

// Report adds "cpu-ns/exchange": the process's CPU time since StartCPU
// per exchange (n exchanges in all). Run the benchmark alone: other
// goroutines' work, the garbage collector's included, counts too.
func (c CPU) Report(b *testing.B, n int) {
	b.Helper()
	if n > 0 {
		b.ReportMetric(float64(cpuTime()-c.start)/float64(n), "cpu-ns/exchange")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
