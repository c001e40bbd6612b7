package applog

// Privileged tier: a real runc container (busybox) whose output the test
// writes to a CRI log file, as containerd does. Runs when
// GALAGO_PRIVILEGED_TESTS=1 (CI sets it), as root, with runc and
// busybox-static installed (`make test-deps`).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// The container's output. Stdout: 3 GET lines of one pattern, 2 debug
// lines, a startup line, a slow-query warning, an error with a Java trace
// (4 lines), a long line the "runtime" splits into partial CRI lines, and
// a Go panic (5 lines, the blank one skipped). Stderr: 2 deprecation
// warnings. Phase 2 is written while the probe is stopped.
const (
	ctrPhase1 = "2024-05-01T12:00:00Z INFO  http server listening on :8080\n" +
		"2024-05-01T12:00:01Z INFO  GET /api/items/17 200 3ms\n" +
		"2024-05-01T12:00:01Z INFO  GET /api/items/18 200 4ms\n" +
		"2024-05-01T12:00:02Z DEBUG cache miss key=item:17\n" +
		"2024-05-01T12:00:02Z DEBUG cache miss key=item:18\n" +
		"2024-05-01T12:00:03Z WARN  slow query took 1532ms: \"SELECT * FROM items WHERE id = 17\"\n" +
		"2024-05-01T12:00:04Z ERROR request 9f2c failed: upstream 10.0.0.7:5432 timed out\n" +
		"java.net.SocketTimeoutException: Read timed out\n" +
		"\tat java.base/java.net.SocketInputStream.socketRead0(Native Method)\n" +
		"\tat org.postgresql.core.PGStream.receive(PGStream.java:490)\n" +
		"2024-05-01T12:00:05Z INFO  GET /api/items/19 200 2ms\n" +
		"2024-05-01T12:00:06Z INFO  batch 3 done: processed 1200 items in 5230ms, 0 errors, next batch in 60s\n" +
		"panic: runtime error: invalid memory address or nil pointer dereference\n" +
		"[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x47b2c5]\n" +
		"\n" +
		"goroutine 1 [running]:\n" +
		"main.handler(0x0)\n" +
		"\t/app/main.go:42 +0x25\n"
	ctrPhase1Err = "2024-05-01T12:00:07Z WARN  config key \"timeout\" is deprecated\n" +
		"2024-05-01T12:00:08Z WARN  config key \"retries\" is deprecated\n"
	// What the container's process writes to /var/log/app.log in its own
	// file system (found through /proc/<pid>/fd, read through
	// /proc/<pid>/root).
	ctrFile1 = "audit: user 5 granted role admin\n" +
		"audit: user 6 granted role admin\n" +
		"audit: user 7 granted role admin\n" +
		"NOTICE key rotation finished in 35ms\n"
	ctrFile2 = "audit: user 9 granted role admin\n"
	// Written after the runtime rotated the log.
	ctrPhase1b = "2024-05-01T12:00:09Z INFO  GET /api/items/21 200 1ms\n" +
		"2024-05-01T12:00:10Z ERROR request 5e5e failed: upstream 10.0.0.9:5432 timed out\n" +
		"java.net.SocketTimeoutException: Read timed out\n"
	ctrPhase2 = "2024-05-01T12:01:00Z INFO  GET /api/items/20 200 5ms\n" +
		"2024-05-01T12:01:01Z ERROR request 7a1b failed: upstream 10.0.0.8:5432 timed out\n" +
		"java.net.SocketTimeoutException: Read timed out\n" +
		"\tat org.postgresql.core.PGStream.receive(PGStream.java:490)\n" +
		"2024-05-01T12:01:02Z INFO  phase 2 done\n"
)

const (
	tplGET   = "<*> INFO GET /api/items/<*> <*> <*>"
	tplUpErr = "<*> ERROR request <*> failed: upstream <*> timed out"
)

// criWriter plays the container runtime: it turns a stream's lines into
// CRI lines appended to the log file, a chunk at a time (one write per
// read, as a runtime's copier does), splitting lines over 60 bytes into
// partial (P) lines of 40 bytes, as containerd does at 16 KiB.
type criWriter struct {
	mu   sync.Mutex
	f    *os.File
	seen bytes.Buffer // everything written, to wait on
}

func (w *criWriter) copy(t *testing.T, r io.Reader, stream string, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 64<<10)
	var rest []byte
	for {
		n, err := r.Read(buf)
		data := append(rest, buf[:n]...)
		var out bytes.Buffer
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			line := data[:i]
			data = data[i+1:]
			for len(line) > 60 {
				fmt.Fprintf(&out, "%s %s P %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, line[:40])
				line = line[40:]
			}
			fmt.Fprintf(&out, "%s %s F %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, line)
		}
		rest = append([]byte(nil), data...)
		if out.Len() > 0 {
			w.mu.Lock()
			if _, werr := w.f.Write(out.Bytes()); werr != nil {
				t.Errorf("write CRI log: %v", werr)
			}
			w.seen.Write(out.Bytes())
			w.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// rotate renames the log file and continues in a new one at its name.
func (w *criWriter) rotate(t *testing.T, path, rotated string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close()
	w.f = f
}

func (w *criWriter) contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Contains(w.seen.Bytes(), []byte(s))
}

// TestPrivilegedRuncCRILog runs a busybox container with runc in a
// Kubernetes cgroup layout, writes its stdout and stderr to
// <log root>/pods/<ns>_<pod>_<uid>/<name>/0.log in CRI format, and checks
// the app_log counts per level and pattern exactly; the probe finds the
// file from the container's pod uid and name. The container's process
// also writes /var/log/app.log in its own file system, counted under the
// same container. Then it stops the probe,
// lets the container write more, and checks that a new probe on the same
// offsets file counts only the new messages.
func TestPrivilegedRuncCRILog(t *testing.T) {
	probetest.RequireTools(t, "runc")
	runc, _ := exec.LookPath("runc")
	busybox := "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Fatal("busybox not installed (apt-get install busybox-static):", err)
	}

	cid := randHex(t, 64)
	uid := fmt.Sprintf("%s-%s-%s-%s-%s", randHex(t, 8), randHex(t, 4), randHex(t, 4), randHex(t, 4), randHex(t, 12))
	cgPath := "/kubepods/burstable/pod" + uid + "/" + cid
	dir := t.TempDir()
	// The real /var/log, as a node has it: the pod directory is unique to
	// this test and removed after it.
	logRoot := "/var/log"
	podsDir := filepath.Join(logRoot, "pods")
	_, err := os.Stat(podsDir)
	madePods := os.IsNotExist(err)
	podDir := filepath.Join(podsDir, "shop_web-0_"+uid, "app")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(filepath.Dir(podDir))
		if madePods {
			_ = syscall.Rmdir(podsDir)
		}
	})
	state := filepath.Join(dir, "run", "applog-offsets.json")

	bundle := filepath.Join(dir, "bundle")
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "var/log"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "sleep", "cat", "["} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		"phase1": ctrPhase1, "phase1err": ctrPhase1Err, "phase2": ctrPhase2, "phase1b": ctrPhase1b, "file1": ctrFile1, "file2": ctrFile2,
		"run.sh": "exec 3>>/var/log/app.log\ncat /phase1\ncat /phase1err >&2\ncat /file1 >&3\n" +
			"while [ ! -e /go1b ]; do sleep 0.05; done\ncat /phase1b\n" +
			"while [ ! -e /go2 ]; do sleep 0.05; done\ncat /file2 >&3\ncat /phase2\nexec sleep 600\n",
	} {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	specPath := filepath.Join(bundle, "config.json")
	var spec map[string]any
	if b, err = os.ReadFile(specPath); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"/bin/sh", "/run.sh"}
	spec["linux"].(map[string]any)["cgroupsPath"] = cgPath
	spec["root"].(map[string]any)["readonly"] = false // it writes /var/log/app.log
	spec["annotations"] = map[string]string{
		"io.kubernetes.cri.container-type":    "container",
		"io.kubernetes.cri.container-name":    "app",
		"io.kubernetes.cri.image-name":        "docker.io/library/busybox:test",
		"io.kubernetes.cri.sandbox-name":      "web-0",
		"io.kubernetes.cri.sandbox-namespace": "shop",
		"io.kubernetes.cri.sandbox-uid":       uid,
	}
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(runc, "kill", cid, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", cid).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		removeCgroupDirs(cgPath)
	})

	ids := identity.NewResolver("/")
	targets := probetest.NewTargets(snoop.Whitelist)
	start := func() (*Probe, *probetest.Runtime) {
		p := New(WithLogRoot(logRoot), WithStateFile(state), WithIdentity(ids),
			WithInterval(300*time.Millisecond), WithPoll(50*time.Millisecond))
		rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
		cfg := probe.Config{SubItems: bitContainer | bitFile, Params: probe.DefaultParams(), Targets: targets}
		if err := p.Start(rt.Context(), cfg, rt); err != nil {
			t.Fatal(err)
		}
		return p, rt
	}
	p, rt := start()

	// The runtime's log file, born after the probe started: read from its
	// start once the container is found.
	logf, err := os.OpenFile(filepath.Join(podDir, "0.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	w := &criWriter{f: logf}
	defer func() { w.mu.Lock(); w.f.Close(); w.mu.Unlock() }()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var copiers sync.WaitGroup
	copiers.Add(2)
	go w.copy(t, outR, "stdout", &copiers)
	go w.copy(t, errR, "stderr", &copiers)
	// Pipes given as *os.File: runc hands them to the container and
	// returns; the test keeps no write end, so the copiers end with it.
	run := exec.Command(runc, "run", "--detach", "--bundle", bundle, cid)
	run.Stdout, run.Stderr = outW, errW
	err = run.Run()
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatalf("runc run: %v", err)
	}
	out, err := exec.Command(runc, "state", cid).Output()
	if err != nil {
		t.Fatal("runc state:", err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("runc state %s: %v", out, err)
	}
	targets.Set(st.Pid)

	ours := func(r *table.Record) bool { return r.Str("container_id") == identity.ShortID(cid) }
	waitTotal := func(rt *probetest.Runtime, n int) map[key]tally {
		t.Helper()
		defer func() {
			if t.Failed() {
				t.Logf("logs:\n%s\nrecords:\n%s", rt.Logs(), show(sum(rt.Records(), func(*table.Record) bool { return true })))
			}
		}()
		rt.WaitRecords(t, fmt.Sprintf("%d messages", n), func(recs []*table.Record) bool {
			return total(sum(recs, ours)) >= n
		})
		time.Sleep(700 * time.Millisecond) // one more period: nothing else may come
		return sum(rt.Records(), ours)
	}
	got := waitTotal(rt, 16)
	checkTally(t, "phase 1", got, map[key]tally{
		{"unknown", "audit: user <*> granted role admin"}:  {3, 3},
		{"info", "NOTICE key rotation finished in <*>"}:    {1, 1},
		{"info", "<*> INFO http server listening on :<*>"}: {1, 1},
		{"info", tplGET}: {3, 3},
		{"debug", "<*> DEBUG cache miss key=item:<*>"}:   {2, 2},
		{"warning", "<*> WARN slow query took <*>: <*>"}: {1, 1},
		{"error", tplUpErr}:                              {1, 4},
		{"info", "<*> INFO batch <*> done: processed <*> items in <*>, <*> errors, next batch in <*>"}: {1, 1},
		{"critical", "panic: runtime error: invalid memory address or nil pointer dereference"}:        {1, 5},
		{"warning", "<*> WARN config key <*> is deprecated"}:                                           {2, 2},
	})
	for _, r := range rt.Records() {
		if r.Str("tgid") != "" || r.Str("unit") != "" {
			t.Errorf("container row with a process key: %v", r.Labels())
		}
	}
	if rt.ErrorCount() != 0 {
		t.Errorf("%d errors: %s", rt.ErrorCount(), rt.Logs())
	}

	// The runtime rotates the log as kubelet asks: 0.log is renamed with
	// a timestamp and a new 0.log opened; the container writes on.
	w.rotate(t, filepath.Join(podDir, "0.log"), filepath.Join(podDir, "0.log.20240501-120009"))
	if err := os.WriteFile(filepath.Join(rootfs, "go1b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got = waitTotal(rt, 18)
	if n := total(got); n != 18 {
		t.Errorf("%d messages after rotation, want 18:\n%s", n, show(got))
	}
	if g := got[key{"info", tplGET}]; g != (tally{4, 4}) {
		t.Errorf("GET after rotation: %+v, want 4 messages", g)
	}
	if g := got[key{"error", tplUpErr}]; g != (tally{2, 6}) {
		t.Errorf("upstream errors after rotation: %+v, want 2 messages of 6 lines", g)
	}
	rt.Shutdown(t, p)

	// Written while galago is down.
	if err := os.WriteFile(filepath.Join(rootfs, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, "phase 2 written", func() bool { return w.contains("phase 2 done") })

	p, rt = start()
	got = waitTotal(rt, 4)
	checkTally(t, "after restart", got, map[key]tally{
		{"unknown", "audit: user <*> granted role admin"}: {1, 1},
		{"info", tplGET}:                    {1, 1},
		{"error", tplUpErr}:                 {1, 3},
		{"info", "<*> INFO phase <*> done"}: {1, 1},
	})
	rt.Shutdown(t, p)
}

// removeCgroupDirs removes a container's cgroup and the parents runc
// leaves behind, in every hierarchy; a parent still in use stays.
func removeCgroupDirs(cgPath string) {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		for p := cgPath; p != "/" && p != "."; p = filepath.Dir(p) {
			_ = syscall.Rmdir(filepath.Join(h, p))
		}
	}
}

// TestPrivilegedSystemdUnit moves a shell into a cgroup named like a
// systemd service and checks that the file it writes is counted under the
// unit (not the process), exactly.
func TestPrivilegedSystemdUnit(t *testing.T) {
	probetest.RequirePrivileged(t)
	cg2, err := identity.FindCgroup2Mount("/")
	if err != nil {
		t.Fatal(err)
	}
	unit := "galago-applog-" + randHex(t, 8) + ".service"
	cgDir := filepath.Join(cg2, unit)
	if err := os.Mkdir(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logRoot := filepath.Join(dir, "var", "log")
	if err := os.MkdirAll(logRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := "2024-05-01 12:00:01 INFO user 1 logged in from 10.0.0.1\n" +
		"2024-05-01 12:00:02 ERROR job 7 failed\n\tat a.B.c(B.java:1)\n" +
		"2024-05-01 12:00:03 INFO user 2 logged in from 10.0.0.2\n"
	if err := os.WriteFile(filepath.Join(dir, "lines"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", fmt.Sprintf(`exec 3>>%s/daemon.log
while [ ! -e %[2]s/go ]; do sleep 0.02; done
cat %[2]s/lines >&3
while [ ! -e %[2]s/stop ]; do sleep 0.02; done`, logRoot, dir))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sh.Process.Kill()
		_ = sh.Wait()
		// The shell's last sleep may still be in the cgroup for a moment.
		for i := 0; i < 50 && syscall.Rmdir(cgDir) == syscall.EBUSY; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(cgDir, "cgroup.procs"), []byte(fmt.Sprint(sh.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	p := New(WithLogRoot(logRoot), WithInterval(300*time.Millisecond), WithPoll(50*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	cfg := probe.Config{SubItems: bitFile, Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, sh.Process.Pid)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	waitFollowing(t, rt, 1)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ours := func(r *table.Record) bool { return r.Str("unit") == unit }
	rt.WaitRecords(t, "3 messages of the unit", func(recs []*table.Record) bool { return total(sum(recs, ours)) >= 3 })
	time.Sleep(700 * time.Millisecond)
	recs := rt.Records()
	checkTally(t, "unit", sum(recs, ours), map[key]tally{
		{"info", "<*> <*> INFO user <*> logged in from <*>"}: {2, 2},
		{"error", "<*> <*> ERROR job <*> failed"}:            {1, 2},
	})
	for _, r := range recs {
		if r.Str("unit") != unit || r.Str("tgid") != "" || r.Str("container_id") != "" {
			t.Errorf("row %v", r.Labels())
		}
	}
	rt.Shutdown(t, p)
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
