package symtab

import (
	"os"
	"strings"
	"testing"
)

// TestParsePerfMap reads the map OpenJDK 17 wrote on Compiler.perfmap for
// testdata Burner (flamegraph's Java test program).
func TestParsePerfMap(t *testing.T) {
	b, err := os.ReadFile("testdata/perf-jdk17.map")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	starts := map[string]bool{}
	for _, l := range lines {
		starts[strings.Fields(l)[0]] = true
	}
	pm, dropped, err := ParsePerfMap(strings.NewReader(string(b)), MaxPerfMapEntries)
	if err != nil || dropped != 0 {
		t.Fatalf("parse: %v, %d dropped", err, dropped)
	}
	// The JVM lists some blobs twice: one entry per start address.
	if pm.Len() != len(starts) {
		t.Errorf("%d entries, want %d distinct starts of %d lines", pm.Len(), len(starts), len(lines))
	}
	for _, c := range []struct {
		pc   uint64
		want string
	}{
		{0x7f9f18ec7600, "Burner.spinHot(long)"},
		{0x7f9f18ec7600 + 0x177, "Burner.spinHot(long)"},
		{0x7f9f11401340 + 0x10, "Burner.spinHot(long)"},
		{0x7f9f18940b80 + 0x17ddf, "Interpreter"},
		{0x7f9f18938c00 + 1, "StubRoutines (1)"},
		{0x7f9f18ec71c0 + 8, "jdk.internal.misc.Unsafe.getReferenceVolatile(java.lang.Object,long)"},
	} {
		if got, ok := pm.Lookup(c.pc); !ok || got != c.want {
			t.Errorf("Lookup(%#x) = %q %v, want %q", c.pc, got, ok, c.want)
		}
	}
	for _, pc := range []uint64{0, 0x7f9f18940b80 + 0x17de0, ^uint64(0)} {
		if got, ok := pm.Lookup(pc); ok && got == "Interpreter" || pc == 0 && ok {
			t.Errorf("Lookup(%#x) = %q, want no entry", pc, got)
		}
	}
}

func TestParsePerfMapBoundAndReuse(t *testing.T) {
	in := "1000 10 a\n0x2000 0x10 b\n1000 20 long c.d(int, java.lang.String)\n3000 10 e\n"
	pm, dropped, err := ParsePerfMap(strings.NewReader(in), 3)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 1 || pm.Len() != 2 {
		t.Errorf("dropped %d, %d entries: want 1 and 2", dropped, pm.Len())
	}
	// The later line for 0x1000 wins: the code was freed and reused.
	if got, _ := pm.Lookup(0x101f); got != "c.d(int,java.lang.String)" {
		t.Errorf("Lookup(0x101f) = %q", got)
	}
	if got, ok := pm.Lookup(0x3000); ok {
		t.Errorf("dropped entry found: %q", got)
	}
}

func TestParsePerfMapErrors(t *testing.T) {
	for in, want := range map[string]string{
		"1000 10 a\nnonsense\n":  "line 2",
		"zz 10 a\n":              `start "zz"`,
		"1000 -1 a\n":            `size "-1"`,
		"ffffffffffffffff 2 a\n": `size "2"`,
	} {
		pm, _, err := ParsePerfMap(strings.NewReader(in), 10)
		if err == nil || pm != nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", in, err, want)
		}
	}
}

func TestJavaName(t *testing.T) {
	for in, want := range map[string]string{
		"long Burner.spinHot(long)":          "Burner.spinHot(long)",
		"void java.lang.Object.<init>()":     "java.lang.Object.<init>()",
		"StubRoutines (1)":                   "StubRoutines (1)",
		"Interpreter":                        "Interpreter",
		"int[] a.B.c(java.lang.Object, int)": "a.B.c(java.lang.Object,int)",
	} {
		if got := javaName(in); got != want {
			t.Errorf("javaName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParsePerfMap: any input parses or fails, never panics, and what
// parses is sorted and bounded.
func FuzzParsePerfMap(f *testing.F) {
	f.Add("0x1000 0x10 long a.b(int)\n2000 10 Interpreter\n")
	f.Add("1 1 x\n1 2 y\n")
	f.Fuzz(func(t *testing.T, s string) {
		pm, _, err := ParsePerfMap(strings.NewReader(s), 8)
		if err != nil {
			return
		}
		if pm.Len() > 8 {
			t.Fatalf("%d entries past the bound", pm.Len())
		}
		for i := 1; i < pm.Len(); i++ {
			if pm.starts[i] <= pm.starts[i-1] {
				t.Fatalf("unsorted at %d", i)
			}
		}
		for i := range pm.starts {
			pm.Lookup(pm.starts[i])
		}
	})
}
