package jvm

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/hotspot"
)

// FuzzParsePerfData: any bytes parse or fail with an error, never panic;
// the seed is a real JDK 17 file.
func FuzzParsePerfData(f *testing.F) {
	if b, err := os.ReadFile("testdata/hsperfdata-g1-jdk17"); err == nil {
		f.Add(b)
	}
	f.Add([]byte{0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		pd, err := hotspot.ParsePerfData(b)
		if err == nil && (pd.Longs == nil || pd.Strings == nil) {
			t.Fatal("nil maps without an error")
		}
	})
}

// FuzzJcmdOutput: the diagnostic command parsers take any text.
func FuzzJcmdOutput(f *testing.F) {
	for _, n := range []string{"gc_heap_info.txt", "compiler_codecache.txt", "thread_print.txt", "vm_system_properties.txt"} {
		if b, err := os.ReadFile("testdata/" + n); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		parseHeapInfo(s)
		for _, c := range parseCodeCache(s) {
			if c.u.used < 0 {
				t.Fatalf("negative used %+v", c)
			}
		}
		parseFlags(s)
		parseProperties(s)
		if deadlocked(s) < 0 {
			t.Fatal("negative")
		}
	})
}
