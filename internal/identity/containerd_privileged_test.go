package identity_test

// Privileged tier: a real containerd (Debian's, CRI plugin disabled, its
// root, state and socket in a temporary directory) running a container
// made with ctr from a hand-built OCI image (busybox-static), asked through
// containerd's own API.

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/identity/identitytest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ociBlob adds a content-addressed blob to an OCI layout tar and returns
// its descriptor.
func ociBlob(t *testing.T, tw *tar.Writer, mediaType string, b []byte) map[string]any {
	t.Helper()
	sum := sha256.Sum256(b)
	d := "sha256:" + hex.EncodeToString(sum[:])
	tarFile(t, tw, "blobs/sha256/"+hex.EncodeToString(sum[:]), b, 0o644)
	return map[string]any{"mediaType": mediaType, "digest": d, "size": len(b)}
}

func tarFile(t *testing.T, tw *tar.Writer, name string, b []byte, mode int64) {
	t.Helper()
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(b); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// busyboxImage writes an OCI image layout archive of one layer (busybox
// with sh and sleep) named name, and returns its path.
func busyboxImage(t *testing.T, name string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("busybox not installed (apt-get install busybox-static):", err)
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for _, d := range []string{"bin/", "proc/", "sys/", "dev/", "tmp/"} {
		if err := lw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			t.Fatal(err)
		}
	}
	tarFile(t, lw, "bin/busybox", bb, 0o755)
	for _, a := range []string{"sh", "sleep"} {
		if err := lw.WriteHeader(&tar.Header{Name: "bin/" + a, Linkname: "busybox", Typeflag: tar.TypeSymlink, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	diff := sha256.Sum256(layer.Bytes())

	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tarFile(t, tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	layerDesc := ociBlob(t, tw, "application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	cfg := ociBlob(t, tw, "application/vnd.oci.image.config.v1+json", mustJSON(t, map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/bin/sleep", "600"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	}))
	manifest := ociBlob(t, tw, "application/vnd.oci.image.manifest.v1+json", mustJSON(t, map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": cfg, "layers": []any{layerDesc},
	}))
	manifest["annotations"] = map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}
	tarFile(t, tw, "index.json", mustJSON(t, map[string]any{"schemaVersion": 2, "manifests": []any{manifest}}), 0o644)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}


func ctrRun(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"-a", sock}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPrivilegedContainerd: a container run with ctr in a namespace of a
// real containerd, labelled as nerdctl labels its containers: containerd's
// API gives its name, image and labels (compared with what `ctr containers
// info` says), and its process is mapped to it by its cgroup.
func TestPrivilegedContainerd(t *testing.T) {
	probetest.RequireTools(t, "containerd", "ctr", "containerd-shim-runc-v2", "runc")
	dir, err := os.MkdirTemp("", "galago-ctrd") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := identitytest.StartContainerd(t, dir)
	const ns, image = "galago-test", "docker.io/galago/busybox:test"
	id := randomHex(t, 64)
	ctrRun(t, sock, "-n", ns, "images", "import", busyboxImage(t, image))
	ctrRun(t, sock, "-n", ns, "run", "-d", "--label", "nerdctl/name=web", "--label", "team=observability", image, id)
	t.Cleanup(func() {
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "kill", "-s", "KILL", id).Run()
		for i := 0; i < 50 && exec.Command("ctr", "-a", sock, "-n", ns, "tasks", "delete", id).Run() != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "containers", "delete", id).Run()
		_ = exec.Command("ctr", "-a", sock, "-n", ns, "images", "rm", image).Run()
		// The shim keeps runc's state under /run/containerd/runc/<namespace>.
		_ = syscall.Rmdir(filepath.Join("/run/containerd/runc", ns))
		for _, h := range append([]string{"/sys/fs/cgroup"}, globDirs("/sys/fs/cgroup/*")...) {
			_ = syscall.Rmdir(filepath.Join(h, ns, id))
			_ = syscall.Rmdir(filepath.Join(h, ns))
		}
	})
	var info struct {
		Labels map[string]string `json:"Labels"`
		Image  string            `json:"Image"`
	}
	if err := json.Unmarshal([]byte(ctrRun(t, sock, "-n", ns, "containers", "info", id)), &info); err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, line := range strings.Split(ctrRun(t, sock, "-n", ns, "tasks", "ls"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if pid <= 0 {
		t.Fatal("no running task for", id)
	}

	r, logs := startRuntimes(t, identity.Runtimes{Containerd: "unix://" + sock})
	got := waitContainer(t, r, id)
	want := identity.Container{ID: id, Name: "web", Image: image, Labels: info.Labels}
	if !reflect.DeepEqual(got, want) || info.Image != image || info.Labels["team"] != "observability" {
		t.Errorf("Container = %+v\nwant %+v (ctr info: image %q, labels %v)", got, want, info.Image, info.Labels)
	}
	t.Logf("ctr info labels: %v", info.Labels)
	if !strings.Contains(logs.Logs(), `reachable="containerd `+sock+` (1 containers)"`) {
		t.Errorf("no reachable line:\n%s", logs.Logs())
	}

	p, ok := r.Process(pid)
	if !ok || p.ContainerID != id || p.Comm != "sleep" {
		t.Fatalf("Process(%d) = %+v %v, want sleep in %s", pid, p, ok, id)
	}
	tbl := table.New("galago_test", "tcp_link", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey}, table.Field{Name: "v", Kind: table.KindGauge})
	rec := tbl.NewRecord(time.Now(), time.Second)
	rec.SetStr(0, strconv.Itoa(pid))
	host := identity.HostInfo{UUID: "u", IP: "192.0.2.1"}
	var labels []string
	for _, l := range identity.NewEnricher(r, host).Enrich(rec, nil) {
		labels = append(labels, l.Name+"="+l.Value)
	}
	wantLabels := []string{"comm=sleep", "container_id=" + id[:12], "container_name=web", "container_image=" + image, "machine_id=u-192.0.2.1"}
	if !reflect.DeepEqual(labels, wantLabels) {
		t.Errorf("labels\n got %q\nwant %q", labels, wantLabels)
	}
}

func globDirs(p string) []string {
	m, _ := filepath.Glob(p)
	return m
}
