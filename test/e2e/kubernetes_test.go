package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/galago-project/galago/internal/identity/identitytest"
)

const manifestPath = "../../deploy/kubernetes/galago.yaml"

type manifest struct {
	daemonSet appsv1.DaemonSet
	configMap corev1.ConfigMap
}

// readManifest decodes every object of deploy/kubernetes/galago.yaml
// strictly (an unknown or misspelt field is an error) with the Kubernetes
// API types.
func readManifest(t *testing.T) manifest {
	t.Helper()
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	kinds := map[string]int{}
	for i, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", manifestPath, i, err)
		}
		var obj any
		switch meta.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "ConfigMap":
			obj = &m.configMap
		case "DaemonSet":
			obj = &m.daemonSet
		case "Service":
			obj = &corev1.Service{}
		default:
			t.Fatalf("%s document %d: unexpected kind %q", manifestPath, i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", manifestPath, i, meta.Kind, err)
		}
		kinds[meta.Kind]++
	}
	if kinds["DaemonSet"] != 1 || kinds["ConfigMap"] != 1 {
		t.Fatalf("%s: kinds %v, want one DaemonSet and one ConfigMap", manifestPath, kinds)
	}
	return m
}

// TestKubernetesManifestRunsUnderContainerd builds the image (make image),
// imports it into a real containerd and runs it the way the DaemonSet of
// deploy/kubernetes describes it: host PID and network namespaces, its
// hostPath mounts, its environment (the probes.init ConfigMap included)
// and its capabilities, nothing more. Only the two ports are moved to free
// ones. The containerized galago serves the host's baseinfo: memory equal
// to the host's /proc/meminfo, one CPU row per host CPU, and the tcp probe
// the ConfigMap starts is running.
func TestKubernetesManifestRunsUnderContainerd(t *testing.T) {
	requireE2E(t)
	m := readManifest(t)
	spec := m.daemonSet.Spec.Template.Spec
	if !spec.HostPID || !spec.HostNetwork || len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet: hostPID %v, hostNetwork %v, %d containers", spec.HostPID, spec.HostNetwork, len(spec.Containers))
	}
	c := spec.Containers[0]

	dist := t.TempDir()
	runOK(t, "make", "-C", "../..", "--no-print-directory", "image", "DIST="+dist, "IMAGE_TAG=docker.io/library/galago:e2e")
	dir, err := os.MkdirTemp("", "galago-k8s") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := identitytest.StartContainerd(t, dir)
	const ns, image, id = "galago-e2e", "docker.io/library/galago:e2e", "galago-e2e"
	ctr := func(args ...string) string {
		return runOK(t, "ctr", append([]string{"-a", sock, "-n", ns}, args...)...)
	}
	ctr("images", "import", filepath.Join(dist, "galago-image.tar"))

	metricPort, restPort := freePort(t), freePort(t)
	// hostPID: the test's own PID namespace (the host's; /proc/1 may be
	// unreadable where the test runs inside a sandbox).
	args := []string{"run", "-d", "--net-host", "--with-ns", fmt.Sprintf("pid:/proc/%d/ns/pid", os.Getpid())}
	// drop: ["ALL"]: this ctr takes no ALL, so containerd's default set
	// (the OCI default capabilities) is dropped by name, but for those
	// the DaemonSet adds (ctr drops after it adds).
	for _, cp := range []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
		"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"} {
		if slices.Contains(c.SecurityContext.Capabilities.Add, corev1.Capability(cp)) {
			continue
		}
		args = append(args, "--cap-drop", "CAP_"+cp)
	}
	bounding := boundingSet(t)
	for _, cp := range c.SecurityContext.Capabilities.Add {
		n, ok := capNumbers[string(cp)]
		if !ok {
			t.Fatalf("DaemonSet adds %s: not a capability this test knows", cp)
		}
		if bounding&(1<<n) == 0 {
			// A sandbox (this one lacks CAP_SYS_RESOURCE) cannot grant
			// what it does not hold itself.
			t.Logf("CAP_%s is not in this machine's bounding set: the container runs without it", cp)
			continue
		}
		args = append(args, "--cap-add", "CAP_"+string(cp))
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		src := dir + "/" + vm.Name // emptyDir
		if hp := volumes[vm.Name].HostPath; hp != nil {
			src = hp.Path
		} else if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		opts := "rbind:rw"
		if vm.ReadOnly {
			opts = "rbind:ro"
		}
		args = append(args, "--mount", fmt.Sprintf("type=bind,src=%s,dst=%s,options=%s", src, vm.MountPath, opts))
	}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.Name == "GOPHER_METRIC_PORT":
			v = strconv.Itoa(metricPort)
		case e.Name == "GOPHER_REST_PORT":
			v = strconv.Itoa(restPort)
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if ref.Name != m.configMap.Name {
				t.Fatalf("env %s refers to ConfigMap %s, the manifest has %s", e.Name, ref.Name, m.configMap.Name)
			}
			v = m.configMap.Data[ref.Key]
		}
		args = append(args, "--env", e.Name+"="+v)
	}
	ctr(append(args, image, id)...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "ls").CombinedOutput()
			t.Logf("tasks:\n%s", out)
		}
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "kill", "-s", "TERM", id).Run()
		for i := 0; i < 100 && exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "delete", id).Run() != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "delete", "-f", id).Run()
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "containers", "delete", id).Run()
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "images", "rm", image).Run()
		_ = os.Remove(filepath.Join("/run/containerd/runc", ns))
		for _, h := range append([]string{"/sys/fs/cgroup"}, globDirs("/sys/fs/cgroup/*")...) {
			_ = os.Remove(filepath.Join(h, ns, id))
			_ = os.Remove(filepath.Join(h, ns))
		}
	})

	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricPort)
	var expo string
	waitFor(t, 60*time.Second, "the containerized galago's baseinfo", func() bool {
		expo = httpGetBody(metrics)
		return len(samples(expo, "gala_gopher_mem_total_kB")) == 1 && len(samples(expo, "gala_gopher_cpu_user_msec")) > 0
	})
	_, total, _ := sampleValue(expo, "gala_gopher_mem_total_kB")
	if want := meminfo(t, "MemTotal"); total != want {
		t.Errorf("gala_gopher_mem_total_kB = %v in the container, host MemTotal = %v", total, want)
	}
	if n := len(samples(expo, "gala_gopher_cpu_user_msec")); n != runtime.NumCPU() {
		t.Errorf("%d cpu rows, host has %d CPUs", n, runtime.NumCPU())
	}
	if got := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/tcp", restPort)); !strings.Contains(got, `"state":"running"`) {
		t.Errorf("GET /tcp of the containerized galago: %s", got)
	}
}

// globDirs lists the directories matching pattern.
func globDirs(pattern string) []string {
	var out []string
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			out = append(out, m)
		}
	}
	return out
}

// httpGetBody returns the body of a GET, "" when it fails.
func httpGetBody(url string) string {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// capNumbers maps the capabilities the manifest may add to their numbers.
var capNumbers = map[string]uint{
	"BPF": unix.CAP_BPF, "PERFMON": unix.CAP_PERFMON, "NET_ADMIN": unix.CAP_NET_ADMIN,
	"SYS_PTRACE": unix.CAP_SYS_PTRACE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "SYSLOG": unix.CAP_SYSLOG, "SYS_ADMIN": unix.CAP_SYS_ADMIN,
	"KILL": unix.CAP_KILL, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE,
}

// boundingSet is the test process's capability bounding set.
func boundingSet(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return 0
}
