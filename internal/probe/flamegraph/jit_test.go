package flamegraph

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/symtab"
)

// hsperfFixture is the jvm probe's hsperfdata of a running OpenJDK 17.
const hsperfFixture = "../jvm/testdata/hsperfdata-g1-jdk17"

// fakeJVM lays out /proc/<pid> of a JVM whose pid in its namespace is 7:
// status and the hsperfdata file in its root's /tmp.
func fakeJVM(t *testing.T, procRoot, pid string, perf []byte) {
	t.Helper()
	dir := filepath.Join(procRoot, pid)
	if err := os.MkdirAll(filepath.Join(dir, "root", "tmp", "hsperfdata_app"), 0o755); err != nil {
		t.Fatal(err)
	}
	// SigCgt: SIGQUIT (bit 2) caught but for pid 4000002 (-Xrs).
	sigcgt := "0000000000000004"
	if pid == "4000002" {
		sigcgt = "0000000000000000"
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tjava\nPid:\t"+pid+"\nSigCgt:\t"+sigcgt+"\nNStgid:\t"+pid+"\t7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if perf != nil {
		if err := os.WriteFile(filepath.Join(dir, "root", "tmp", "hsperfdata_app", "7"), perf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJITRequests: a JVM is asked for its map at its first unnamed frame,
// once while the request runs, and again only when unnamed frames keep
// coming and the gap has passed; a process without hsperfdata and a JVM
// with attach disabled are never asked.
func TestJITRequests(t *testing.T) {
	perf, err := os.ReadFile(hsperfFixture)
	if err != nil {
		t.Fatal(err)
	}
	noAttach := bytes.Replace(perf, []byte("1100000000"), []byte("0100000000"), 1)
	if bytes.Equal(noAttach, perf) {
		t.Fatal("fixture without jvmCapabilities")
	}
	host := t.TempDir()
	root := filepath.Join(host, "proc")
	fakeJVM(t, root, "100", perf)
	fakeJVM(t, root, "200", nil)
	fakeJVM(t, root, "300", noAttach)
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	now := time.Unix(1000, 0)
	j := newJITSyms(host, rt, func() time.Time { return now })

	queued := func() []jitRequest {
		var rs []jitRequest
		for len(j.reqs) > 0 {
			rs = append(rs, <-j.reqs)
		}
		return rs
	}
	for _, pid := range []int{100, 200, 300} {
		if _, ok := j.lookup(pid, 0x1000); ok {
			t.Errorf("pid %d named without a map", pid)
		}
	}
	rs := queued()
	if len(rs) != 1 || rs[0].pid != 100 || rs[0].att.NSPID != 7 ||
		rs[0].mapPath != filepath.Join(root, "100", "root", "tmp", "perf-7.map") {
		t.Fatalf("requests %+v, want one for pid 100, its map at root/tmp/perf-7.map", rs)
	}
	if !strings.Contains(rt.Logs(), "pid=300") {
		t.Errorf("attach-disabled JVM not logged: %s", rt.Logs())
	}
	// In flight: not asked again.
	for range jitMissThreshold * 2 {
		j.lookup(100, 0x1000)
	}
	if rs := queued(); len(rs) != 0 {
		t.Fatalf("asked again while in flight: %+v", rs)
	}
	// The JVM answered.
	pm, _, err := symtab.ParsePerfMap(strings.NewReader("0x1000 0x100 long Burner.spinHot(long)\n"), 10)
	if err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	jp := j.procs[100]
	jp.inflight, jp.pm = false, pm
	j.mu.Unlock()
	if name, ok := j.lookup(100, 0x10ff); !ok || name != "Burner.spinHot(long)" {
		t.Errorf("lookup = %q %v", name, ok)
	}
	// Code compiled since: unnamed frames, but within the gap.
	for range jitMissThreshold {
		j.lookup(100, 0x5000)
	}
	if rs := queued(); len(rs) != 0 {
		t.Fatalf("asked again within the gap: %+v", rs)
	}
	now = now.Add(jitRefreshGap)
	if j.lookup(100, 0x5000); len(queued()) != 1 {
		t.Fatal("not asked again after the gap with unnamed frames")
	}
	j.forget(100)
	if _, ok := j.lookup(100, 0x1000); ok {
		t.Error("forgotten map still used")
	}
	if rt.ErrorCount() != 0 {
		t.Errorf("%d errors: %s", rt.ErrorCount(), rt.Logs())
	}
}

// TestJITNoSignalWithoutHandler: a JVM that does not catch SIGQUIT (-Xrs;
// its pid does not exist, so a signal would fail and count an error) is
// not signalled: it is given up with one log line and never asked again.
func TestJITNoSignalWithoutHandler(t *testing.T) {
	perf, err := os.ReadFile(hsperfFixture)
	if err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	fakeJVM(t, filepath.Join(host, "proc"), "4000002", perf)
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	j := newJITSyms(host, rt, time.Now)
	j.lookup(4000002, 0x1000)
	if len(j.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(j.reqs))
	}
	j.serve(rt.Context(), <-j.reqs)
	j.gap = 0
	for range jitMissThreshold * 2 {
		j.lookup(4000002, 0x1000)
	}
	if len(j.reqs) != 0 {
		t.Error("asked again after attach was found impossible")
	}
	if rt.ErrorCount() != 0 {
		t.Errorf("%d errors (a signal tried?): %s", rt.ErrorCount(), rt.Logs())
	}
	if n := strings.Count(rt.Logs(), "not asked for a perf map"); n != 1 || !strings.Contains(rt.Logs(), "-Xrs") {
		t.Errorf("%d log lines, want one naming -Xrs:\n%s", n, rt.Logs())
	}
}

// TestJITStartingJVM: a JVM whose hsperfdata is not ready yet is looked
// at again only after jitRecheck, then asked.
func TestJITStartingJVM(t *testing.T) {
	perf, err := os.ReadFile(hsperfFixture)
	if err != nil {
		t.Fatal(err)
	}
	starting := bytes.Clone(perf)
	starting[7] = 0 // the prologue's "accessible" flag
	host := t.TempDir()
	fakeJVM(t, filepath.Join(host, "proc"), "100", starting)
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	now := time.Unix(1000, 0)
	j := newJITSyms(host, rt, func() time.Time { return now })
	j.lookup(100, 0x1000)
	// Ready now, but not looked at before the recheck time.
	fakeJVM(t, filepath.Join(host, "proc"), "100", perf)
	j.lookup(100, 0x1000)
	if len(j.reqs) != 0 {
		t.Fatal("a starting JVM asked, or looked at again before jitRecheck")
	}
	now = now.Add(jitRecheck)
	if j.lookup(100, 0x1000); len(j.reqs) != 1 {
		t.Fatal("not asked once started")
	}
}
