package baseinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/galago-project/galago/internal/appinfo"
)

var appF = struct{ tgid, appType, app, info int }{
	ProcApp.MustIndex("tgid"), ProcApp.MustIndex("app_type"), ProcApp.MustIndex("app"), ProcApp.MustIndex("app_info"),
}

type appEntry struct {
	start uint64 // process start time: a reused pid is detected again
	exe   string // its executable: a process that execs is detected again
	app   appinfo.App
}

// appCollector fills proc_app for the observed processes whose type is
// known; a process is detected once per start and executable (one stat and
// one readlink per process and period otherwise) and remembered while it
// is observed.
type appCollector struct {
	known map[int]appEntry
}

func (ac *appCollector) forget() { ac.known = nil }

func (ac *appCollector) sample(c *cycle) {
	pids, err := observedPIDs(c)
	if err != nil {
		c.failed("app.list", "proc_app", err)
		return
	}
	next := make(map[int]appEntry, len(pids))
	for _, pid := range pids {
		st, err := c.fs.PIDStat(pid)
		if err != nil {
			continue // exited
		}
		exe, _ := os.Readlink(c.fs.Path(fmt.Sprintf("/proc/%d/exe", pid)))
		e, ok := ac.known[pid]
		if !ok || e.start != st.StartTime || e.exe != exe {
			a, err := appinfo.Read(c.fs, pid)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					c.unmeasured("app.read", "proc_app of processes whose /proc/<pid>/cmdline or comm is unreadable", err)
				}
				continue
			}
			e = appEntry{start: st.StartTime, exe: exe, app: a}
		}
		next[pid] = e
		if !c.emit || e.app.Type == "" {
			continue
		}
		r := ProcApp.NewRecord(c.now, c.period)
		r.SetStr(appF.tgid, strconv.Itoa(pid))
		r.SetStr(appF.appType, e.app.Type)
		if e.app.Detail != "" {
			r.SetStr(appF.app, e.app.Detail)
		}
		r.SetNum(appF.info, 1)
		c.rt.Record(r)
	}
	ac.known = next
}
