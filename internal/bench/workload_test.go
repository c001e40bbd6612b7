package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPgbenchArgs: the select-only workload runs -S; the work one runs
// its script once calibrated (and -S for the calibration's baseline), and
// the script holds the calibrated row count.
func TestPgbenchArgs(t *testing.T) {
	dir := t.TempDir()
	sel := &pgbenchLoad{clients: 16, threads: 2}
	if sel.Name() != "pgbench" {
		t.Errorf("name %q", sel.Name())
	}
	got := strings.Join(sel.args(5432, dir, "/l/p", 16, 2, 8*time.Second, true), " ")
	want := "-h 127.0.0.1 -p 5432 -U postgres -n -S -c 16 -j 2 -T 8 -l --log-prefix /l/p postgres"
	if got != want {
		t.Errorf("select-only args\n got %s\nwant %s", got, want)
	}
	work := &pgbenchLoad{clients: 16, threads: 2, work: time.Millisecond}
	if work.Name() != "pgbench-1ms" {
		t.Errorf("name %q", work.Name())
	}
	if a := work.args(5432, dir, "", 1, 1, 2*time.Second, false); !slices.Contains(a, "-S") || slices.Contains(a, "-l") {
		t.Errorf("uncalibrated work args %q: want select-only, no log", a)
	}
	work.rows = 7309
	if err := work.writeWorkScript(dir); err != nil {
		t.Fatal(err)
	}
	a := work.args(5432, dir, "", 16, 2, 8*time.Second, false)
	if i := slices.Index(a, "-f"); i < 0 || a[i+1] != filepath.Join(dir, "work.sql") || slices.Contains(a, "-S") {
		t.Errorf("calibrated work args %q: want -f %s", a, filepath.Join(dir, "work.sql"))
	}
	b, err := os.ReadFile(filepath.Join(dir, "work.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "SELECT sum(i) FROM generate_series(1, 7309) AS s(i);\n" {
		t.Errorf("script %q", b)
	}
}
