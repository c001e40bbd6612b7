package baseinfo

import (
	"bufio"
	"os/exec"
	"strconv"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// The app sub-item: a shell that execs a python program after the
// baseline gets one proc_app row naming python (detected again after the
// exec); a process of no known type (sleep) gets none.
func TestPrivilegedApp(t *testing.T) {
	probetest.RequireTools(t, "python3", "sleep")
	py := exec.Command("sh", "-c", `read go; exec python3 -u -c "print('ready'); import time; time.sleep(60)"`)
	out, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := py.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sl := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{py, sl} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	d := newDelayRun(t, py.Process.Pid, sl.Process.Pid)
	ac := &appCollector{}
	ac.sample(d.p.newCycle(d.now(), false)) // the shell, still reading
	if recs, _ := d.rt.Take(); len(recs) != 0 {
		t.Fatalf("a baseline published %d records", len(recs))
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("python: %q %v", line, err)
	}
	ac.sample(d.p.newCycle(d.now(), true))
	recs, _ := d.rt.Take()
	var rows []*table.Record
	for _, r := range recs {
		if r.Table == ProcApp {
			rows = append(rows, r)
		}
	}
	if len(rows) != 1 {
		t.Fatalf("%d proc_app rows, want 1 (python only): %v", len(rows), rows)
	}
	r := rows[0]
	if r.Str("tgid") != strconv.Itoa(py.Process.Pid) || r.Str("app_type") != "python" || r.Str("app") != "" || r.Values[appF.info].Num != 1 {
		t.Errorf("proc_app row %v", r.Labels())
	}
}
