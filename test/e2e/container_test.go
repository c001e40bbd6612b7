package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// runcSleeper runs a busybox container sleeping, in a Kubernetes-like
// cgroup, with CRI annotations; it returns its id, cgroup path and pid.
func runcSleeper(t *testing.T) (id, cgPath string, pid int) {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not installed (apt-get install runc):", err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("busybox not installed (apt-get install busybox-static):", err)
	}
	id = randomHex(t, 64)
	pod := fmt.Sprintf("%s-%s-%s-%s-%s", randomHex(t, 8), randomHex(t, 4), randomHex(t, 4), randomHex(t, 4), randomHex(t, 12))
	cgPath = "/kubepods/burstable/pod" + pod + "/" + id
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(rootfs, "bin/sleep")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	var spec map[string]any
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"/bin/sleep", "600"}
	spec["linux"].(map[string]any)["cgroupsPath"] = cgPath
	spec["annotations"] = map[string]string{
		"io.kubernetes.cri.container-type":    "container",
		"io.kubernetes.cri.container-name":    "galago-e2e",
		"io.kubernetes.cri.image-name":        "docker.io/library/busybox:e2e",
		"io.kubernetes.cri.sandbox-name":      "e2e-pod",
		"io.kubernetes.cri.sandbox-namespace": "e2e-ns",
		"io.kubernetes.cri.sandbox-uid":       pod,
	}
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(runc, "kill", id, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", id).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		hier, _ := filepath.Glob("/sys/fs/cgroup/*")
		for _, h := range append(hier, "/sys/fs/cgroup") {
			for p := cgPath; p != "/" && p != "."; p = filepath.Dir(p) {
				_ = syscall.Rmdir(filepath.Join(h, p))
			}
		}
	})
	// stdio to /dev/null: a pipe would stay open in the detached container.
	if err := exec.Command(runc, "run", "--detach", "--bundle", bundle, id).Run(); err != nil {
		t.Fatalf("runc run: %v", err)
	}
	out, err := exec.Command(runc, "state", id).Output()
	if err != nil {
		t.Fatal("runc state:", err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("runc state %s: %v", out, err)
	}
	return id, cgPath, st.Pid
}

// sampleValue finds the one sample of name whose labels contain every
// label in want, and returns its labels and value.
func sampleValue(expo, name string, want ...string) (string, float64, bool) {
	for _, l := range samples(expo, name) {
		ok := true
		for _, w := range want {
			if !strings.Contains(l, w) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(l[strings.LastIndexByte(l, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return l, v, true
	}
	return "", 0, false
}

// TestContainerProbe drives PUT /container on the real daemon with a
// container_id snooper and checks, in the Prometheus exposition, the
// container's rows and enrichment labels against its cgroup files and
// /proc; cadvisor_port is accepted and echoed, and nothing listens on it.
func TestContainerProbe(t *testing.T) {
	requireE2E(t)
	id, cgPath, pid := runcSleeper(t)
	d := startDaemon(t, daemonOpts{})
	short := id[:12]
	body := fmt.Sprintf(`{"snoopers":{"container_id":["%s"]},"params":{"report_period":5,"cadvisor_port":18083},"state":"running"}`, short)
	if code, reply := d.put("container", body); code != 200 || reply != successReply {
		t.Fatalf("PUT /container: %d %q", code, reply)
	}
	if code, reply := d.get("container"); code != 200 || !strings.Contains(reply, `"cadvisor_port":18083`) || !strings.Contains(reply, `"state":"running"`) {
		t.Errorf("GET /container: %d %q", code, reply)
	}
	labels := []string{`container_id="` + short + `"`, `container_name="galago-e2e"`,
		`container_image="docker.io/library/busybox:e2e"`, `pod="e2e-ns/e2e-pod"`}
	var expo string
	waitFor(t, 30*time.Second, "container rows in /metrics", func() bool {
		expo = d.scrape()
		_, _, ok := sampleValue(expo, "gala_gopher_container_file_descriptors", labels...)
		return ok
	})
	// The sleeping busybox's levels hold still: the exposition must show the
	// cgroup's and /proc's own numbers.
	memDir := filepath.Join("/sys/fs/cgroup/memory", cgPath)
	usageFile := filepath.Join(memDir, "memory.usage_in_bytes")
	if _, err := os.Stat(usageFile); err != nil {
		usageFile = filepath.Join("/sys/fs/cgroup", cgPath, "memory.current")
	}
	b, err := os.ReadFile(usageFile)
	if err != nil {
		t.Fatal(err)
	}
	wantUsage, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"gala_gopher_container_memory_usage_bytes", wantUsage},
		{"gala_gopher_container_file_descriptors", float64(len(fds))},
		{"gala_gopher_container_oom_events_total", 0},
	} {
		l, v, ok := sampleValue(expo, c.name, labels...)
		if !ok {
			t.Errorf("%s: no sample with %v", c.name, labels)
			continue
		}
		if v != c.want {
			t.Errorf("%s = %v, want %v (%s)", c.name, v, c.want, l)
		}
	}
	for _, name := range []string{"gala_gopher_container_cpu_usage_seconds_total", "gala_gopher_container_start_time_seconds",
		"gala_gopher_container_fs_inodes_total", "gala_gopher_container_memory_rss"} {
		if _, _, ok := sampleValue(expo, name, labels...); !ok {
			t.Errorf("%s: no sample", name)
		}
	}
	// Its own network namespace holds only lo: a network row of zeros.
	if _, v, ok := sampleValue(expo, "gala_gopher_container_network_transmit_bytes_total", labels...); !ok || v != 0 {
		t.Errorf("network_transmit_bytes_total = %v (%v), want 0 (only lo in the container)", v, ok)
	}
	if _, _, ok := sampleValue(expo, "gala_gopher_container_fs_read_seconds_total", labels...); ok {
		t.Error("fs_read_seconds_total exported; no kernel source here")
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:18083", time.Second); err == nil {
		c.Close()
		t.Error("something listens on cadvisor_port 18083")
	}
}
