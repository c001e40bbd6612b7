package bench

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestParseHeapAlloc(t *testing.T) {
	page := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# TotalAlloc = 99\n# HeapAlloc = 8675309\n# HeapSys = 1\n"
	if n, err := parseMemStat([]byte(page), "HeapAlloc"); err != nil || n != 8675309 {
		t.Errorf("got %d, %v", n, err)
	}
	if n, err := parseMemStat([]byte(page), "TotalAlloc"); err != nil || n != 99 {
		t.Errorf("TotalAlloc: got %d, %v", n, err)
	}
	if _, err := parseMemStat([]byte("# Alloc = 1\n"), "HeapAlloc"); err == nil {
		t.Error("no HeapAlloc: parsed")
	}
}
