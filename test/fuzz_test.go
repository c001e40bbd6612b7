// Package test holds the scripts of the test tiers that `make test` runs
// (fuzz.sh) and their tests; the end-to-end tier is the e2e package.
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFuzzTierReportsAndMovesFailingInput runs fuzz.sh on a scratch module
// whose fuzz target fails on the first mutated input: the tier must fail,
// print the failure and where the input went, and leave nothing in the
// module's testdata, where it would fail every later unit run.
func TestFuzzTierReportsAndMovesFailingInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Go fuzzer")
	}
	script, err := filepath.Abs("fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module scratch\n\ngo 1.22\n")
	write("scratch_test.go", `package scratch

import "testing"

func FuzzPasses(f *testing.F) {
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {})
}

func FuzzOnlySeed(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if string(b) != "seed" {
			t.Fatalf("not the seed: %q", b)
		}
	})
}
`)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(script, out, "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "FUZZTIME=2s", "GOFLAGS=")
	b, err := cmd.CombinedOutput()
	text := string(b)
	if err == nil {
		t.Fatalf("fuzz tier passed with a failing target:\n%s", text)
	}
	for _, want := range []string{
		"ok   scratch FuzzPasses",
		"FAIL scratch FuzzOnlySeed",
		"not the seed:",
		"failing input saved to " + filepath.Join(out, "failing-inputs", "scratch", "testdata", "fuzz", "FuzzOnlySeed") + "/",
		"go test fuzz v1",
		"mkdir -p " + filepath.Join(mod, "testdata", "fuzz", "FuzzOnlySeed"),
		"fuzz: 1 of 2 targets failed: scratch FuzzOnlySeed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat(filepath.Join(mod, "testdata")); !os.IsNotExist(err) {
		t.Errorf("testdata left in the module: %v", err)
	}
	saved, err := filepath.Glob(filepath.Join(out, "failing-inputs", "scratch", "testdata", "fuzz", "FuzzOnlySeed", "*"))
	if err != nil || len(saved) != 1 {
		t.Fatalf("saved inputs %v, %v", saved, err)
	}
	for _, log := range []string{"fuzz-scratch-FuzzPasses.log", "fuzz-scratch-FuzzOnlySeed.log"} {
		if _, err := os.Stat(filepath.Join(out, log)); err != nil {
			t.Errorf("log %s: %v", log, err)
		}
	}
	// The printed command reproduces the failure from the saved input.
	var repro string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "mkdir -p ") {
			repro = strings.TrimSpace(l)
		}
	}
	rc := exec.Command("bash", "-c", repro)
	rc.Dir = mod
	if b, err := rc.CombinedOutput(); err == nil || !strings.Contains(string(b), "not the seed:") {
		t.Errorf("%s: %v\n%s", repro, err, b)
	}
}
