package applog

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

func TestTable(t *testing.T) {
	if AppLog.Name != "app_log" || AppLog.Entity != "app_log" {
		t.Fatalf("%s/%s", AppLog.Name, AppLog.Entity)
	}
	if got := AppLog.MetricName(fMessages); got != "gala_gopher_app_log_messages" {
		t.Errorf("metric %s", got)
	}
	for _, f := range AppLog.Fields {
		if f.Description == "" {
			t.Errorf("field %s has no description", f.Name)
		}
	}
	if table.Lookup("app_log") != nil {
		t.Error("app_log is among gala-gopher's generated tables")
	}
	f := probe.LookupBuiltin(Name)
	if f == nil || f.Snooper != probe.SnooperProcCon {
		t.Fatalf("feature %+v", f)
	}
}

func TestFdinfoWritable(t *testing.T) {
	for in, want := range map[string]bool{
		"pos:\t0\nflags:\t0102001\nmnt_id:\t30\n": true,  // O_WRONLY|O_APPEND|O_CREAT
		"pos:\t0\nflags:\t0100002\n":              true,  // O_RDWR
		"pos:\t0\nflags:\t0100000\n":              false, // O_RDONLY
		"pos:\t0\n":                               false,
		"flags:\tzz\n":                            false,
	} {
		if got := fdinfoWritable([]byte(in)); got != want {
			t.Errorf("%q: %v", in, got)
		}
	}
}

func TestUnitFromCgroup(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/nginx.service\n":                                          "nginx.service",
		"12:pids:/x\n1:name=systemd:/system.slice/cron.service/sub\n0::/\n":         "cron.service",
		"1:name=systemd:/system.slice/cron.service\n0::/system.slice/web.service\n": "web.service",
		"0::/user.slice/user-0.slice/session-1.scope\n":                             "",
		"0::/kubepods/pod1/abc\n":                                                   "",
		"0::/.service\n":                                                            "",
	} {
		if got := unitFromCgroup(identity.ParseCgroup([]byte(in))); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "offsets.json")
	m := map[fileID]stateEntry{}
	for i := 0; i < maxStateEntries+10; i++ {
		m[fileID{1, uint64(i)}] = stateEntry{Dev: 1, Ino: uint64(i), Path: fmt.Sprint(i), Off: int64(i), Seen: int64(i)}
	}
	if err := saveState(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxStateEntries || len(m) != maxStateEntries {
		t.Fatalf("%d entries kept (map %d), want %d", len(got), len(m), maxStateEntries)
	}
	if _, ok := got[fileID{1, 5}]; ok {
		t.Error("an oldest entry was kept")
	}
	if e := got[fileID{1, maxStateEntries + 9}]; e.Off != maxStateEntries+9 {
		t.Errorf("newest entry %+v", e)
	}
	if err := os.WriteFile(path, []byte(`{"version":9}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(path); err == nil {
		t.Error("wrong version accepted")
	}
	if m, err := loadState(filepath.Join(t.TempDir(), "none")); err != nil || len(m) != 0 {
		t.Errorf("missing file: %v %v", m, err)
	}
}

// key is what a test compares: the level and pattern of a row.
type key struct{ level, template string }

type tally struct{ messages, lines int }

// sum adds up the app_log rows of one source by level and template.
func sum(recs []*table.Record, match func(*table.Record) bool) map[key]tally {
	out := map[key]tally{}
	for _, r := range recs {
		if r.Table != AppLog || !match(r) {
			continue
		}
		k := key{r.Str("level"), r.Str("template")}
		if r.Str("pattern") == overflowID {
			k.template = overflowID
		}
		c := out[k]
		c.messages += int(r.Values[fMessages].Num)
		c.lines += int(r.Values[fLines].Num)
		out[k] = c
	}
	return out
}

func total(m map[key]tally) (n int) {
	for _, c := range m {
		n += c.messages
	}
	return n
}

func show(m map[key]tally) string {
	var lines []string
	for k, c := range m {
		lines = append(lines, fmt.Sprintf("  %-8s %-60q messages %d lines %d", k.level, k.template, c.messages, c.lines))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func checkTally(t *testing.T, what string, got, want map[key]tally) {
	t.Helper()
	if fmt.Sprint(show(got)) != fmt.Sprint(show(want)) {
		t.Errorf("%s:\ngot\n%s\nwant\n%s", what, show(got), show(want))
	}
}

// plainPhase1 is what the test process writes before its file rotates:
// 5 info logins (one pattern), 3 warnings, a Java trace (one error message
// of 5 lines) and 2 messages without a level.
const plainPhase1 = `2024-05-01 12:00:01 INFO user 101 logged in from 10.0.0.1
2024-05-01 12:00:02 INFO user 102 logged in from 10.0.0.2
2024-05-01 12:00:03 WARN disk /data at 91% capacity
2024-05-01 12:00:04 INFO user 103 logged in from 10.0.0.3
2024-05-01 12:00:05 ERROR [worker-3] job 7 failed
java.lang.IllegalStateException: queue "jobs" closed
	at com.example.Jobs.run(Jobs.java:42)
	at java.base/java.lang.Thread.run(Thread.java:833)
Caused by: java.io.IOException: broken pipe
2024-05-01 12:00:06 WARN disk /var at 95% capacity
GET /healthz 200
GET /healthz 200
2024-05-01 12:00:07 INFO user 104 logged in from 10.0.0.4
2024-05-01 12:00:08 WARN disk /home at 99% capacity
2024-05-01 12:00:09 INFO user 105 logged in from 10.0.0.5
`

// plainPhase2 is written to the new file after the rotation: a Python
// traceback (4 lines), 2 logins, a critical message.
const plainPhase2 = `2024-05-01 12:01:00 INFO user 106 logged in from 10.0.0.6
Traceback (most recent call last):
  File "/app/worker.py", line 12, in <module>
    run()
ValueError: bad input 42
2024-05-01 12:01:01 FATAL out of memory after 3 retries
2024-05-01 12:01:02 INFO user 107 logged in from 10.0.0.7
`

// plainPhase3 is written while the probe is stopped.
const plainPhase3 = `2024-05-01 12:02:00 INFO user 108 logged in from 10.0.0.8
2024-05-01 12:02:01 ERROR [worker-1] job 9 failed
java.lang.IllegalStateException: queue "mail" closed
	at com.example.Jobs.run(Jobs.java:42)
`

const (
	tplLogin = "<*> <*> INFO user <*> logged in from <*>"
	tplDisk  = "<*> <*> WARN disk <*> at <*> capacity"
	tplJob   = "<*> <*> ERROR [<*>] job <*> failed"
)

// waitFollowing waits until the probe follows n files.
func waitFollowing(t *testing.T, rt *probetest.Runtime, n int) {
	t.Helper()
	probetest.WaitFor(t, fmt.Sprintf("%d files followed", n), func() bool {
		k := 0
		for _, e := range rt.LogEntries() {
			if e.Msg == "applog: following" {
				k++
			}
		}
		return k >= n
	})
}

// TestPlainFileRotationAndRestart runs a shell that writes a log file under
// a private log root, renames it and reopens it mid-test (logrotate's
// create mode), and checks the counts per level and pattern exactly; then
// it stops the probe, lets the shell write more, starts a new probe on the
// same offsets file and checks that only the new messages are counted.
func TestPlainFileRotationAndRestart(t *testing.T) {
	dir := t.TempDir()
	logRoot := filepath.Join(dir, "var", "log")
	appDir := filepath.Join(logRoot, "app")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{plainPhase1, plainPhase2, plainPhase3} {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("phase%d", i+1)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(dir, "run", "applog-offsets.json")
	// Each phase waits for its go file; a message is written whole with
	// one cat so that a trace never straddles a poll.
	script := fmt.Sprintf(`
cd %[1]s
exec 3>>%[2]s/app.log
while [ ! -e go1 ]; do sleep 0.02; done
cat phase1 >&3
mv %[2]s/app.log %[2]s/app.log.1
exec 3>>%[2]s/app.log
touch rotated
while [ ! -e go2 ]; do sleep 0.02; done
cat phase2 >&3
while [ ! -e go3 ]; do sleep 0.02; done
cat phase3 >&3
touch wrote3
while [ ! -e stop ]; do sleep 0.02; done
`, dir, appDir)
	sh := exec.Command("sh", "-c", script)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	}

	start := func() (*Probe, *probetest.Runtime) {
		p := New(WithLogRoot(logRoot), WithStateFile(state), WithInterval(300*time.Millisecond), WithPoll(50*time.Millisecond))
		rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
		targets := probetest.NewTargets(snoop.Whitelist, sh.Process.Pid)
		cfg := probe.Config{SubItems: bitFile, Params: probe.DefaultParams(), Targets: targets}
		if err := p.Start(rt.Context(), cfg, rt); err != nil {
			t.Fatal(err)
		}
		return p, rt
	}
	ours := func(r *table.Record) bool { return r.Str("tgid") == fmt.Sprint(sh.Process.Pid) }
	waitTotal := func(rt *probetest.Runtime, n int) map[key]tally {
		t.Helper()
		defer func() {
			if t.Failed() {
				t.Logf("logs:\n%s\nrecords:\n%s", rt.Logs(), show(sum(rt.Records(), func(*table.Record) bool { return true })))
			}
		}()
		recs := rt.WaitRecords(t, fmt.Sprintf("%d messages", n), func(recs []*table.Record) bool {
			return total(sum(recs, ours)) >= n
		})
		// One more period: nothing else may come.
		time.Sleep(700 * time.Millisecond)
		return sum(append(recs, rt.Records()[len(recs):]...), ours)
	}

	p, rt := start()
	// The file was created before the probe started: it is read from its
	// end, once the probe follows it.
	waitFollowing(t, rt, 1)
	touch("go1")
	probetest.WaitFor(t, "rotation", exists("rotated"))
	touch("go2")
	got := waitTotal(rt, 15)
	checkTally(t, "before restart", got, map[key]tally{
		{"info", tplLogin}:                                            {7, 7},
		{"warning", tplDisk}:                                          {3, 3},
		{"error", tplJob}:                                             {1, 5},
		{"unknown", "GET /healthz <*>"}:                               {2, 2},
		{"error", "Traceback (most recent call last):"}:               {1, 4},
		{"critical", "<*> <*> FATAL out of memory after <*> retries"}: {1, 1},
	})
	for _, r := range rt.Records() {
		if r.Str("pattern") == "" || r.Str("sample") == "" || r.Str("unit") != "" || r.Str("container_id") != "" {
			t.Errorf("row %v", r.Labels())
		}
		if r.Str("template") == tplLogin && !strings.HasSuffix(r.Str("sample"), "INFO user 101 logged in from 10.0.0.1") {
			t.Errorf("login sample %q", r.Str("sample"))
		}
	}
	if rt.ErrorCount() != 0 {
		t.Errorf("%d errors: %s", rt.ErrorCount(), rt.Logs())
	}
	rt.Shutdown(t, p)

	// Written while galago is down.
	touch("go3")
	probetest.WaitFor(t, "phase 3 written", exists("wrote3"))
	var saved stateFile
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &saved); err != nil || len(saved.Files) == 0 {
		t.Fatalf("state %s: %v", b, err)
	}

	p, rt = start()
	got = waitTotal(rt, 2)
	checkTally(t, "after restart", got, map[key]tally{
		{"info", tplLogin}: {1, 1},
		{"error", tplJob}:  {1, 3},
	})
	rt.Shutdown(t, p)
	touch("stop")
}
