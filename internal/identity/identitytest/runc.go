package identitytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// RuncBundle makes a busybox bundle whose container runs args, in a
// Kubernetes cgroup layout (/kubepods/burstable/pod<uid>/<cid>, in every
// hierarchy) with CRI annotations (container galago-test of pod galago-pod
// in galago-ns); it returns the container id, pod uid, cgroup path and
// bundle directory.
func RuncBundle(t testing.TB, runc, busybox string, args ...string) (cid, uid, cgPath, bundle string) {
	t.Helper()
	cid = randHex(t, 64)
	uid = fmt.Sprintf("%s-%s-%s-%s-%s", randHex(t, 8), randHex(t, 4), randHex(t, 4), randHex(t, 4), randHex(t, 12))
	cgPath = "/kubepods/burstable/pod" + uid + "/" + cid

	bundle = t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "sleep"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	specPath := filepath.Join(bundle, "config.json")
	var spec map[string]any
	b, err = os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = args
	spec["linux"].(map[string]any)["cgroupsPath"] = cgPath
	spec["annotations"] = map[string]string{
		"io.kubernetes.cri.container-type":    "container",
		"io.kubernetes.cri.container-name":    "galago-test",
		"io.kubernetes.cri.image-name":        "docker.io/library/busybox:test",
		"io.kubernetes.cri.sandbox-name":      "galago-pod",
		"io.kubernetes.cri.sandbox-namespace": "galago-ns",
		"io.kubernetes.cri.sandbox-uid":       uid,
	}
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}

	return cid, uid, cgPath, bundle
}

// RemoveCgroupDirs removes a container's cgroup and the parents runc
// leaves behind, in every hierarchy; a parent still used by someone else
// is not empty and stays.
func RemoveCgroupDirs(t testing.TB, cgPath string) {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		for p := cgPath; p != "/" && p != "."; p = filepath.Dir(p) {
			dir := filepath.Join(h, p)
			if err := syscall.Rmdir(dir); err != nil && err != syscall.ENOENT && err != syscall.ENOTDIR && err != syscall.EBUSY && err != syscall.ENOTEMPTY {
				t.Logf("rmdir %s: %v", dir, err)
			}
		}
	}
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}
