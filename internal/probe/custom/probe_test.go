package custom

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

func TestEncodeConfig(t *testing.T) {
	feat := testFeature("/opt/x/myprobe.sh")
	params := probe.DefaultParams()
	params.ReportPeriod = 5
	params.LatencyThr = 100
	params.CustomParam = map[string]string{"p1": "a<b&c"}
	got, err := encodeConfig(feat, probe.Config{SubItems: 2, Params: params,
		Targets: probetest.NewTargets(snoop.Whitelist, 300, 200)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"probe":["sub2"],"params":{"report_period":5,"sample_period":5000,"latency_thr":100,"offline_thr":0,` +
		`"drops_thr":0,"res_lower_thr":0,"res_upper_thr":0,"report_event":0,"custom_param":{"p1":"a<b&c"}},"pids":[200,300]}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}

	tg := probetest.NewTargets(snoop.Blacklist, 7)
	tg.SetCgroups(99, 12)
	got, _ = encodeConfig(feat, probe.Config{Params: probe.DefaultParams(), Targets: tg})
	want = `{"probe":[],"params":{"report_period":60,"sample_period":5000,"latency_thr":0,"offline_thr":0,` +
		`"drops_thr":0,"res_lower_thr":0,"res_upper_thr":0,"report_event":0,"custom_param":{}},"pids":[7],"blacklist":true,"cgroup_ids":[12,99]}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	got, _ = encodeConfig(feat, probe.Config{SubItems: 3, Params: probe.DefaultParams()})
	if !strings.Contains(string(got), `"probe":["sub1","sub2"]`) || !strings.HasSuffix(string(got), `"pids":[]}`) {
		t.Fatalf("no targets: %s", got)
	}
}

// writeProbe writes an executable probe script and its meta (the test
// tables) into a fresh directory with gala-gopher's modes, and returns the
// feature and a probe whose bin check expects the test's uid as owner (root
// in CI, where it is exactly LoadDecls' rule).
func writeProbe(t *testing.T, script string) (*probe.Feature, *Probe) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "myprobe.sh")
	if err := os.WriteFile(bin, []byte(script), 0o500); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(bin, 0o550))
	must(t, os.WriteFile(MetaPath(bin), mustRead(t, "testdata/myprobe.meta"), 0o640))
	feat := testFeature(bin)
	factory, err := Factory(feat)
	if err != nil {
		t.Fatal(err)
	}
	p := factory().(*Probe)
	p.checkBin = asTester().checkBinFile
	return feat, p
}

const e2eScript = `#!/bin/sh
printf '|custom_test|alpha|h1|42.5|7|3 10 1 100 4 1000 5 1234.5 900|\n'
printf '|custom_test|beta||0.25|||\n'
printf '[WARN] probe warming up\n'
printf 'plain line\n'
printf '[ERROR] on stderr\n' >&2
printf '|event|custom_ent|alpha|value|123|myproc|10.0.0.1|cid1|pod1|eth0|WARN|13|too high value(42.5).|\n'
printf '|nosuch|x|1|\n'
printf '|custom_cfg|env|%s|1|\n' "$GALAGO_PROBE_CONFIG"
printf '|custom_cfg|pid|%s|1|\n' "$$"
n=2
while IFS= read -r line; do
	printf '|custom_cfg|stdin|%s|%d|\n' "$line" "$n"
	n=$((n+1))
done
`

func recordByKey(recs []*table.Record, tableName, key string) []*table.Record {
	var out []*table.Record
	for _, r := range recs {
		if r.Table.Name == tableName && r.Values[0].Str == key {
			out = append(out, r)
		}
	}
	return out
}

// pidGone reports whether pid no longer exists at all (not even a zombie).
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// deadOrZombie reports whether pid has exited (gone, or a zombie waiting for
// a parent that is not us).
func deadOrZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestProbeEndToEnd runs a real probe executable: its records, event, log
// lines, configuration (environment, stdin on Reconfigure and on a target
// change), its death, and a clean stop.
func TestProbeEndToEnd(t *testing.T) {
	_, p := writeProbe(t, e2eScript)
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	targets := probetest.NewTargets(snoop.Whitelist, 300, 200)
	params := probe.DefaultParams()
	params.ReportPeriod = 5
	params.CustomParam = map[string]string{"p1": "v1"}
	cfg := probe.Config{SubItems: 1, Params: params, Targets: targets}

	before := time.Now()
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "the first records", func(recs []*table.Record) bool { return len(recordByKey(recs, "custom_cfg", "pid")) == 1 })
	after := time.Now()

	recs := rt.Records()
	events := rt.Events()
	errs := rt.ErrorCount()
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	for _, r := range recs {
		if r.Period != 5*time.Second || r.Time.Before(before) || r.Time.After(after) {
			t.Errorf("%s: period %v time %v", r.Table.Name, r.Period, r.Time)
		}
	}
	alpha := recs[0]
	wantAlpha := []table.Value{
		{Set: true, Str: "alpha"}, {Set: true, Str: "h1"}, {Set: true, Num: 42.5}, {Set: true, Num: 7},
		{Set: true, Hist: &table.Histogram{Bounds: []float64{10, 100, 1000}, Counts: []uint64{1, 3, 1, 0}, Sum: 1234.5, Max: 900}},
	}
	if alpha.Table.Name != "custom_test" || !reflect.DeepEqual(alpha.Values, wantAlpha) {
		t.Errorf("alpha: %s %+v", alpha.Table.Name, alpha.Values)
	}
	wantBeta := []table.Value{{Set: true, Str: "beta"}, {}, {Set: true, Num: 0.25}, {}, {}}
	if !reflect.DeepEqual(recs[1].Values, wantBeta) {
		t.Errorf("beta: %+v", recs[1].Values)
	}
	wantEnv := `{"probe":["sub1"],"params":{"report_period":5,"sample_period":5000,"latency_thr":0,"offline_thr":0,` +
		`"drops_thr":0,"res_lower_thr":0,"res_upper_thr":0,"report_event":0,"custom_param":{"p1":"v1"}},"pids":[200,300]}`
	if got := recs[2].Str("config"); recs[2].Str("id") != "env" || got != wantEnv {
		t.Errorf("environment config\n got %s\nwant %s", got, wantEnv)
	}
	pid, err := strconv.Atoi(recs[3].Str("config"))
	if err != nil || pid != p.run.pid {
		t.Fatalf("probe pid %q, started %d", recs[3].Str("config"), p.run.pid)
	}
	if len(events) != 1 {
		t.Fatalf("events %+v", events)
	}
	e := events[0]
	wantEvent := event.Event{Time: e.Time, Entity: "custom_ent", EntityID: "alpha", Metric: "value", PID: 123,
		Comm: "myproc", IP: "10.0.0.1", ContainerID: "cid1", PodID: "pod1", Device: "eth0",
		Severity: event.SeverityWarn, Message: "too high value(42.5)."}
	if !reflect.DeepEqual(e, wantEvent) || e.Time.Before(before) || e.Time.After(after) {
		t.Errorf("event\n got %+v\nwant %+v", e, wantEvent)
	}
	if errs != 1 { // the |nosuch| line
		t.Errorf("errors %d, want 1", errs)
	}

	// Reconfigure: one JSON line on stdin, echoed back by the script.
	params.ReportPeriod = 10
	cfg.Params = params
	cfg.SubItems = 3
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "the reconfiguration echo", func(recs []*table.Record) bool { return len(recordByKey(recs, "custom_cfg", "stdin")) == 1 })
	echo := recordByKey(rt.Records(), "custom_cfg", "stdin")[0]
	wantStdin := `{"probe":["sub1","sub2"],"params":{"report_period":10,"sample_period":5000,"latency_thr":0,"offline_thr":0,` +
		`"drops_thr":0,"res_lower_thr":0,"res_upper_thr":0,"report_event":0,"custom_param":{"p1":"v1"}},"pids":[200,300]}`
	if echo.Str("config") != wantStdin || echo.Values[2].Num != 2 || echo.Period != 10*time.Second {
		t.Errorf("stdin config\n got %s (seq %v, period %v)\nwant %s", echo.Str("config"), echo.Values[2].Num, echo.Period, wantStdin)
	}

	// The observed processes change: the configuration is sent again.
	targets.Set(400)
	rt.WaitRecords(t, "the target change echo", func(recs []*table.Record) bool { return len(recordByKey(recs, "custom_cfg", "stdin")) == 2 })
	echo = recordByKey(rt.Records(), "custom_cfg", "stdin")[1]
	if !strings.HasSuffix(echo.Str("config"), `"pids":[400]}`) || echo.Values[2].Num != 3 {
		t.Errorf("after target change: %s seq %v", echo.Str("config"), echo.Values[2].Num)
	}

	// Log lines at the level their prefix gives.
	logs := rt.LogEntries()
	wantLogs := []probetest.LogEntry{
		{Level: slog.LevelWarn, Msg: "probe warming up", Attrs: map[string]string{"probe": "myprobe", "stream": "stdout"}},
		{Level: slog.LevelDebug, Msg: "plain line", Attrs: map[string]string{"probe": "myprobe", "stream": "stdout"}},
		{Level: slog.LevelError, Msg: "on stderr", Attrs: map[string]string{"probe": "myprobe", "stream": "stderr"}},
	}
	for _, w := range wantLogs {
		found := false
		for _, l := range logs {
			if reflect.DeepEqual(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no log %+v in %+v", w, logs)
		}
	}

	// The probe is killed: the supervised reader reports it.
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	err = rt.WaitGoErr(t, "the reader to report the probe's death")
	if err == nil || !strings.Contains(err.Error(), "signal: killed") || !strings.Contains(err.Error(), "myprobe") {
		t.Fatalf("reader error %v", err)
	}
	rt.Shutdown(t, p)
	if !pidGone(pid) {
		t.Fatalf("pid %d still exists after Stop", pid)
	}
	if err := p.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := p.Reconfigure(cfg); err == nil {
		t.Fatal("Reconfigure of a stopped probe succeeded")
	}
}

// TestStopInterrupts: a probe that honours SIGINT exits by it, and nothing
// is left behind.
func TestStopInterrupts(t *testing.T) {
	_, p := writeProbe(t, e2eScript)
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	if err := p.Start(rt.Context(), probe.Config{SubItems: 1, Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "the probe's pid", func(recs []*table.Record) bool { return len(recordByKey(recs, "custom_cfg", "pid")) == 1 })
	c := p.run
	rt.Shutdown(t, p)
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Fatalf("probe ended with %v, want SIGINT", c.err)
	}
	if !pidGone(c.pid) {
		t.Fatalf("pid %d still exists", c.pid)
	}
	if errs := rt.GoErrors(); len(errs) != 0 {
		t.Fatalf("a stopped probe reported %v", errs)
	}
}

// TestStopKillsGroup: a probe that ignores SIGINT, and a child it started,
// are killed after the grace period.
func TestStopKillsGroup(t *testing.T) {
	_, p := writeProbe(t, `#!/bin/sh
trap '' INT
sleep 1000 &
printf '|custom_cfg|child|%s|1|\n' "$!"
wait
`)
	p.stopGrace = 200 * time.Millisecond
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	if err := p.Start(rt.Context(), probe.Config{SubItems: 1, Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "the child's pid", func(recs []*table.Record) bool { return len(recordByKey(recs, "custom_cfg", "child")) == 1 })
	child, err := strconv.Atoi(recordByKey(rt.Records(), "custom_cfg", "child")[0].Str("config"))
	if err != nil {
		t.Fatal(err)
	}
	c := p.run
	rt.Shutdown(t, p)
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("probe ended with %v, want SIGKILL", c.err)
	}
	if !pidGone(c.pid) {
		t.Fatalf("probe pid %d still exists", c.pid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !deadOrZombie(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the probe's child %d survived", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartRefusesUnsafeBin: the bin is checked again at every start.
func TestStartRefusesUnsafeBin(t *testing.T) {
	feat, p := writeProbe(t, e2eScript)
	must(t, os.Chmod(feat.Custom.Bin, 0o755))
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt)
	if err == nil || !strings.Contains(err.Error(), "mode 0755") || !strings.Contains(err.Error(), feat.Custom.Bin) {
		t.Fatalf("Start: %v", err)
	}
	if p.run != nil {
		t.Fatal("a refused probe was started")
	}
	// The default check is root's.
	q := New(feat, nil).(*Probe)
	must(t, os.Chmod(feat.Custom.Bin, 0o550))
	err = q.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt)
	if os.Geteuid() == 0 {
		if err != nil {
			t.Fatalf("root-owned 0550 bin refused: %v", err)
		}
		rt.Shutdown(t, q)
	} else if err == nil || !strings.Contains(err.Error(), "not root") {
		t.Fatalf("Start of a bin not owned by root: %v", err)
	}
}

// TestReconfigureUnreadStdin: a probe that never reads its stdin fails the
// reconfiguration instead of blocking it.
func TestReconfigureUnreadStdin(t *testing.T) {
	_, p := writeProbe(t, "#!/bin/sh\nprintf '|custom_cfg|up||1|\\n'\nexec sleep 1000\n")
	rt := probetest.NewRuntime(t, probetest.ProbeName("myprobe"))
	cfg := probe.Config{SubItems: 1, Params: probe.DefaultParams(), CustomLabels: map[string]string{"x": strings.Repeat("y", 100)}}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "start", func(recs []*table.Record) bool { return len(recs) == 1 })
	cfg.Params.CustomParam = map[string]string{"p1": strings.Repeat("v", 64)}
	var err error
	for range 1000 { // a pipe holds 64 KiB; each line is ~250 bytes
		if err = p.Reconfigure(cfg); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "does not read its stdin") {
		t.Fatalf("Reconfigure: %v", err)
	}
	rt.Shutdown(t, p)
}

// fakePipeline collects what the Manager forwards.
type fakePipeline struct {
	mu      sync.Mutex
	records []*table.Record
	notify  chan struct{}
}

func (f *fakePipeline) Record(r *table.Record, _ *table.Source) {
	f.mu.Lock()
	f.records = append(f.records, r)
	f.mu.Unlock()
	select {
	case f.notify <- struct{}{}:
	default:
	}
}
func (f *fakePipeline) Event(event.Event) {}

func (f *fakePipeline) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, r := range recordByKey(f.records, "custom_cfg", "pid") {
		n, _ := strconv.Atoi(r.Str("config"))
		out = append(out, n)
	}
	return out
}

// TestManagerRestartsDeadProbe runs a custom probe under the real Manager:
// started by PUT, restarted after it is killed, stopped with nothing left.
func TestManagerRestartsDeadProbe(t *testing.T) {
	feat, p := writeProbe(t, e2eScript)
	pipe := &fakePipeline{notify: make(chan struct{}, 1)}
	m := probe.NewManager(context.Background(), slog.New(slog.DiscardHandler), pipe, nil)
	if err := m.AddCustom(feat, func() probe.Probe {
		q := New(feat, p.list).(*Probe)
		q.checkBin = p.checkBin
		return q
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Put("myprobe", []byte(`{"cmd":{"probe":["sub1"]},"blacklist":{},"state":"running"}`)); err != nil {
		t.Fatal(err)
	}
	waitPids := func(n int) []int {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			if pids := pipe.pids(); len(pids) >= n {
				return pids
			}
			select {
			case <-pipe.notify:
			case <-time.After(20 * time.Millisecond):
			case <-deadline:
				t.Fatalf("timed out waiting for start %d", n)
			}
		}
	}
	first := waitPids(1)[0]
	must(t, syscall.Kill(first, syscall.SIGKILL))
	second := waitPids(2)[1]
	if second == first {
		t.Fatalf("not restarted: pid %d", second)
	}
	var st probe.ProbeStatus
	for _, s := range m.Statuses() {
		if s.Name == "myprobe" {
			st = s
		}
	}
	if st.Restarts != 1 || st.Errors == 0 || st.Status != probe.StatusRunning {
		t.Errorf("status %+v", st)
	}
	m.StopAll()
	for _, pid := range []int{first, second} {
		if !pidGone(pid) {
			t.Errorf("pid %d still exists", pid)
		}
	}
}
