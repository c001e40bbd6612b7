// Package cputime reads the process's CPU time, for benchmarks that report
// CPU per operation: on a machine shared with other builds, wall time per
// operation measures the neighbours as much as the code.
package cputime

import (
	"syscall"
	"time"
)

// Now returns the user and system CPU time the process has used.
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
