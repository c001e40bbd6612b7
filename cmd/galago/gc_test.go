package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestDefaultGCPercent checks the daemon's collector target: 50 when the
// environment does not set GOGC, left alone when it does.
func TestDefaultGCPercent(t *testing.T) {
	const before = 137
	orig := debug.SetGCPercent(before)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "137")
	defaultGCPercent()
	if got := debug.SetGCPercent(before); got != before {
		t.Fatalf("GOGC set in the environment: target %d, want it left at %d", got, before)
	}

	os.Unsetenv("GOGC") // t.Setenv restores it
	defaultGCPercent()
	if got := debug.SetGCPercent(before); got != gcPercent {
		t.Fatalf("GOGC unset: target %d, want %d", got, gcPercent)
	}
}
