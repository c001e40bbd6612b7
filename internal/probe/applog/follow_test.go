package applog

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/logpattern"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// newTestProbe is a probe set up for driving by hand: no loop.
func newTestProbe(t testing.TB, opts ...Option) (*Probe, *probetest.Runtime) {
	p := New(opts...)
	rt := probetest.NewRuntime(t, probetest.DiscardGo(), probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitContainer | bitFile}, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p, rt
}

// follow tracks one file as discovery would and reads all of it.
func follow(t testing.TB, p *Probe, c candidate) *tracked {
	p.gen++
	p.track(c)
	st, err := statFile(c.open)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.files[st.id]
	if tr == nil {
		t.Fatalf("%s not followed", c.open)
	}
	for {
		budget := int64(maxReadPerPoll)
		p.readFile(tr, &budget)
		if budget == maxReadPerPoll {
			return tr // nothing read: at the end, pending message flushed
		}
	}
}

func TestContainerLogDiscovery(t *testing.T) {
	root := t.TempDir()
	cid := strings.Repeat("ab", 32)
	docker := filepath.Join(root, "var/lib/docker/containers", cid, cid+"-json.log")
	link := filepath.Join(root, "var/log/containers", "web-0_shop_app-"+cid+".log")
	for _, f := range []string{docker, link, filepath.Join(root, "var/log/containers", "other_shop_app-"+strings.Repeat("cd", 32)+".log")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := New(WithHostPath(root))
	got := p.containerLogs(cid, "")
	if len(got) != 2 || got[0].open != docker || got[0].format != fmtDocker || got[1].open != link || got[1].format != fmtCRI ||
		got[0].src.container != cid {
		t.Errorf("containerLogs = %+v", got)
	}
	// Restart files: the highest number is the current instance's.
	dir := filepath.Join(root, "pods")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0.log", "2.log", "10.log", "x.log", "3.log.20240501-120000"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := newestRestartLog(dir); got != filepath.Join(dir, "10.log") {
		t.Errorf("newestRestartLog = %s", got)
	}
	if !p.underLogRoot("/var/log/app/x.log") || p.underLogRoot("/var/log/pods/a/b/0.log") ||
		p.underLogRoot("/var/logs/x") || p.underLogRoot("/var/log/x (deleted)") {
		t.Error("underLogRoot")
	}
}

// TestDockerJSONAndCap follows a Docker json-file log from its start with
// a pattern cap of 2: the third pattern's messages are counted as
// overflow, split partial lines are joined, and the rows carry the
// container id.
func TestDockerJSONAndCap(t *testing.T) {
	cid := strings.Repeat("12", 32)
	path := filepath.Join(t.TempDir(), cid+"-json.log")
	var b strings.Builder
	line := func(s, stream string) {
		fmt.Fprintf(&b, `{"log":%q,"stream":%q,"time":"2024-05-01T12:00:00.000000001Z"}`+"\n", s, stream)
	}
	for i := 0; i < 3; i++ {
		line(fmt.Sprintf("INFO served request %d\n", i), "stdout")
	}
	line("ERROR lost connection to ", "stderr") // split by the daemon
	line("10.0.0.1:6379\n", "stderr")
	line("ERROR lost connection to 10.0.0.2:6379\n", "stderr")
	line("WARN shutting down\n", "stdout")
	line("WARN shutting down\n", "stdout")
	b.WriteString("not json\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, rt := newTestProbe(t, WithMaxPatterns(2))
	p.started = 0 // every file is born after the start
	follow(t, p, candidate{open: path, format: fmtDocker, src: sourceKey{container: cid}})
	p.report(time.Unix(1000, 0), time.Second)
	recs, _ := rt.Take()
	checkTally(t, "docker", sum(recs, func(*table.Record) bool { return true }), map[key]tally{
		{"info", "INFO served request <*>"}:       {3, 3},
		{"error", "ERROR lost connection to <*>"}: {2, 2},
		{"warning", overflowID}:                   {2, 2},
	})
	for _, r := range recs {
		if r.Str("container_id") != identity.ShortID(cid) || r.Time != time.Unix(1000, 0) {
			t.Errorf("row %v at %v", r.Labels(), r.Time)
		}
		if r.Str("pattern") == overflowID && (r.Str("template") != "" || r.Str("sample") != "") {
			t.Errorf("overflow row with a pattern: %v", r.Labels())
		}
	}
	if n := rt.LostCount(); n != 1 {
		t.Errorf("lost = %d, want 1 (the malformed line)", n)
	}
	// Counts are per period: the next report has nothing.
	p.report(time.Unix(1001, 0), time.Second)
	if recs, _ := rt.Take(); len(recs) != 0 {
		t.Errorf("%d rows in an empty period", len(recs))
	}
}

// TestLongLineAndTruncation checks a line over MaxLine (its head counts
// once, its tail is dropped) and a file truncated in place.
func TestLongLineAndTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	long := "ERROR huge " + strings.Repeat("x", 3*logpattern.MaxLine) + "\n"
	if err := os.WriteFile(path, []byte(long+"INFO after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, rt := newTestProbe(t)
	p.started = 0
	tr := follow(t, p, candidate{open: path, format: fmtPlain, src: sourceKey{pid: 1}})
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("INFO again\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	budget := int64(maxReadPerPoll)
	p.readFile(tr, &budget)
	p.readFile(tr, &budget)
	p.report(time.Unix(1000, 0), time.Second)
	recs, _ := rt.Take()
	got := sum(recs, func(*table.Record) bool { return true })
	if len(got) != 3 || got[key{"info", "INFO after"}].messages != 1 || got[key{"info", "INFO again"}].messages != 1 {
		t.Errorf("got\n%s", show(got))
	}
	for k, c := range got {
		if k.level == "error" && (c.messages != 1 || !strings.HasPrefix(k.template, "ERROR huge x")) {
			t.Errorf("long line: %v %+v", k, c)
		}
	}
}

// BenchmarkDiscoverAll is one walk of every process on the host (a
// blacklist with nothing listed): cgroup and every descriptor of each. Run
// as root to see every process's descriptors.
func BenchmarkDiscoverAll(b *testing.B) {
	p, _ := newTestProbe(b)
	cfg := probe.Config{SubItems: bitContainer | bitFile, Targets: probetest.NewTargets(snoop.Blacklist)}
	procs := len(p.observedPIDsOf(cfg))
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for i := 0; i < b.N; i++ {
		p.discover(cfg)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(procs), "processes")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/walk")
}

// BenchmarkFollowCRI is the probe's whole per-line cost on a CRI file:
// read, CRI parse, grouping, level, masking and clustering. Its lines/s
// is the figure in BENCHMARKS.md.
func BenchmarkFollowCRI(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "0.log")
	var sb strings.Builder
	const n = 200000
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&sb, "2024-05-01T12:00:00.%09dZ stdout F 2024-05-01 12:00:%02d INFO GET /api/items/%d 200 %dms from 10.0.%d.%d\n", i, i%60, i, i%900, i%255, i%7)
		case 1:
			fmt.Fprintf(&sb, "2024-05-01T12:00:00.%09dZ stdout F level=warning msg=\"slow query\" duration=%dms user_id=%d\n", i, i%5000, i)
		case 2:
			fmt.Fprintf(&sb, "2024-05-01T12:00:00.%09dZ stderr F 2024-05-01 12:00:%02d ERROR job %d failed\n", i, i%60, i)
		case 3:
			fmt.Fprintf(&sb, "2024-05-01T12:00:00.%09dZ stderr F \tat com.example.Jobs.run(Jobs.java:%d)\n", i, i%100)
		}
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for i := 0; i < b.N; i++ {
		p, _ := newTestProbe(b)
		p.started = 0
		follow(b, p, candidate{open: path, format: fmtCRI, src: sourceKey{pid: 1}})
		_ = p.Stop()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "lines/cpu-s")
}

// TestReconfigure drives the probe by hand: a process's file is followed
// while file_log is on, let go at the first poll after file_log is turned
// off, and followed again, from where it stopped, once it is back on.
func TestReconfigure(t *testing.T) {
	dir := t.TempDir()
	logRoot := filepath.Join(dir, "log")
	if err := os.MkdirAll(logRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", fmt.Sprintf("exec 3>>%s/x.log; echo 'INFO one' >&3; exec sleep 30", logRoot))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	probetest.WaitFor(t, "x.log written", func() bool {
		fi, err := os.Stat(filepath.Join(logRoot, "x.log"))
		return err == nil && fi.Size() > 0
	})
	p := New(WithLogRoot(logRoot))
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	targets := probetest.NewTargets(snoop.Whitelist, sh.Process.Pid)
	cfg := probe.Config{SubItems: bitFile, Targets: targets}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.started = 0 // every file is born after the start: read from its start
	probetest.WaitFor(t, "the shell's exec of sleep", func() bool {
		p.poll()
		return len(p.files) == 1
	})
	cfg.SubItems = bitContainer
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	p.poll()
	if len(p.files) != 0 || len(p.finished) != 1 {
		t.Fatalf("after file_log off: %d files, %d finished", len(p.files), len(p.finished))
	}
	cfg.SubItems = bitFile
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	p.poll()
	if len(p.files) != 1 {
		t.Fatalf("after file_log on: %d files", len(p.files))
	}
	p.poll()
	// Read from its start once; followed again, it resumes where it
	// stopped: its one message is counted once.
	p.report(time.Unix(1000, 0), time.Second)
	recs, _ := rt.Take()
	if got := sum(recs, func(*table.Record) bool { return true }); total(got) != 1 {
		t.Errorf("counted\n%s\nwant INFO one once", show(got))
	}
}
