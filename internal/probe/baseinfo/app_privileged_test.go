package baseinfo

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// The app sub-item: a shell that execs a python program after the
// baseline gets one proc_app row naming python (detected again after the
// exec); a process of no known type (sleep) gets none.
func TestPrivilegedApp(t *testing.T) {
	probetest.RequireTools(t, "python3", "sleep")
	py := childtest.Start(t, exec.Command("sh", "-c", `read go; exec python3 -u -c "print('ready'); import time; time.sleep(60)"`), childtest.Kill())
	sl := childtest.Start(t, exec.Command("sleep", "60"), childtest.Kill())
	d := newDelayRun(t, py.Pid(), sl.Pid())
	ac := &appCollector{}
	ac.sample(d.p.newCycle(d.now(), false)) // the shell, still reading
	if recs, _ := d.rt.Take(); len(recs) != 0 {
		t.Fatalf("a baseline published %d records", len(recs))
	}
	py.Send(t, "go")
	py.Expect(t, "ready")
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
	if r.Str("tgid") != strconv.Itoa(py.Pid()) || r.Str("app_type") != "python" || r.Str("app") != "" || r.Values[appF.info].Num != 1 {
		t.Errorf("proc_app row %v", r.Labels())
	}
}
