package identity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCgroupChangedLayouts: a container is live from its first cgroup
// directory to the removal of its last one, in every runtime's layout and
// on v1, v2 and hybrid hosts (a directory per hierarchy); its cgroup2 ids
// and pod come from the cgroup2 events; other cgroups are ignored.
func TestCgroupChangedLayouts(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const pod = "5a1f0c7e-9b2d-4c3e-8f10-112233445566"
	podU := strings.ReplaceAll(pod, "-", "_")
	type dir struct {
		h    uint32
		path string
		id   uint64
	}
	tests := []struct {
		name    string
		dirs    []dir // made in order, removed in reverse
		pod     string
		cgroups []uint64
	}{
		{"kubernetes cgroupfs, hybrid", []dir{
			{3, "/kubepods/burstable/pod" + pod + "/" + id, 901}, {5, "/kubepods/burstable/pod" + pod + "/" + id, 902},
			{0, "/kubepods/burstable/pod" + pod + "/" + id, 100}}, pod, []uint64{100}},
		{"kubernetes systemd, containerd, v2", []dir{
			{0, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podU + ".slice/cri-containerd-" + id + ".scope", 200}},
			pod, []uint64{200}},
		{"CRI-O, v2, with a sub-cgroup", []dir{
			{0, "/kubepods.slice/kubepods-pod" + podU + ".slice/crio-" + id + ".scope", 300},
			{0, "/kubepods.slice/kubepods-pod" + podU + ".slice/crio-" + id + ".scope/container", 301}}, pod, []uint64{300, 301}},
		{"docker cgroupfs, v1 only", []dir{{2, "/docker/" + id, 11}, {4, "/docker/" + id, 12}}, "", nil},
		{"docker systemd, hybrid", []dir{{0, "/system.slice/docker-" + id + ".scope", 400}, {1, "/system.slice/docker-" + id + ".scope", 401}},
			"", []uint64{400}},
		{"podman", []dir{{0, "/machine.slice/libpod-" + id + ".scope", 500}}, "", []uint64{500}},
		{"containerd plain", []dir{{0, "/default/" + id, 600}}, "", []uint64{600}},
		{"isulad, hybrid", []dir{{6, "/isulad/" + id, 701}, {0, "/isulad/" + id, 700}}, "", []uint64{700}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewResolver(t.TempDir(), WithCgroup2Mount(t.TempDir()))
			// Not containers: slices, services, QoS and pod cgroups.
			for _, p := range []string{"/system.slice/sshd.service", "/kubepods/burstable", "/kubepods/burstable/pod" + pod,
				"/kubepods.slice/kubepods-besteffort.slice", "/user.slice/user-0.slice/session-1.scope"} {
				if cid, changed := r.CgroupChanged(CgroupEvent{Path: p, ID: 7}); cid != "" || changed {
					t.Errorf("%s: container %q, changed %v", p, cid, changed)
				}
			}
			for i, d := range tt.dirs {
				cid, changed := r.CgroupChanged(CgroupEvent{Hierarchy: d.h, ID: d.id, Path: d.path})
				if cid != id || changed != (i == 0) {
					t.Errorf("mkdir %s: %q, changed %v", d.path, cid, changed)
				}
			}
			live := r.LiveContainers()
			if len(live) != 1 || live[0].ID != id || live[0].PodID != tt.pod || !slices.Equal(live[0].CgroupIDs, tt.cgroups) {
				t.Fatalf("live %+v, want %s in pod %q with cgroups %v", live, id, tt.pod, tt.cgroups)
			}
			if c, ok := r.Container(id); !ok || c.ID != id || c.PodID != tt.pod || (tt.cgroups != nil && c.CgroupID != tt.cgroups[0]) {
				t.Errorf("Container = %+v %v before any process", c, ok)
			}
			for i := len(tt.dirs) - 1; i >= 0; i-- {
				d := tt.dirs[i]
				cid, changed := r.CgroupChanged(CgroupEvent{Removed: true, Hierarchy: d.h, ID: d.id, Path: d.path})
				if cid != id || changed != (i == 0) {
					t.Errorf("rmdir %s: %q, changed %v", d.path, cid, changed)
				}
				if got := len(r.LiveContainers()); got != min(i, 1) {
					t.Errorf("after rmdir %s: %d live", d.path, got)
				}
			}
			// A directory removed again, or of a container never seen.
			if _, changed := r.CgroupChanged(CgroupEvent{Removed: true, Path: tt.dirs[0].path}); changed {
				t.Error("second rmdir changed the live set")
			}
		})
	}
}

// TestCgroupChangedNaming: a container whose cgroup was just made is
// looked up again every pendingRetry until its state file names it (runc
// writes it after the cgroups), instead of trusting a nameless answer for
// containerTTL; after pendingFor, the usual TTLs apply again.
func TestCgroupChangedNaming(t *testing.T) {
	const id = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	root := t.TempDir()
	now := time.Unix(1000, 0)
	r := NewResolver(root, WithCgroup2Mount(t.TempDir()), WithClock(func() time.Time { return now }))
	path := "/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/" + id
	if _, changed := r.CgroupChanged(CgroupEvent{ID: 42, Path: path}); !changed {
		t.Fatal("not a new container")
	}
	c, ok := r.Container(id)
	if !ok || c.Name != "" || c.CgroupID != 42 {
		t.Fatalf("before its state: %+v %v", c, ok)
	}
	dir := filepath.Join(root, "run/runc", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state := `{"id":"` + id + `","init_process_pid":1,"config":{"labels":["io.kubernetes.cri.container-name=web",` +
		`"io.kubernetes.cri.image-name=nginx:1"]}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.Container(id); c.Name != "" {
		t.Errorf("re-read before pendingRetry: %+v", c)
	}
	now = now.Add(pendingRetry)
	if c, _ := r.Container(id); c.Name != "web" || c.Image != "nginx:1" || c.CgroupID != 42 {
		t.Errorf("after its state was written: %+v", c)
	}

	// Past pendingFor, a nameless answer is trusted for containerTTL.
	const other = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	r.CgroupChanged(CgroupEvent{ID: 43, Path: "/docker/" + other})
	now = now.Add(pendingFor)
	if c, ok := r.Container(other); !ok || c.Name != "" {
		t.Fatalf("%+v %v", c, ok)
	}
	dir = filepath.Join(root, "run/runc", other)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(strings.ReplaceAll(state, id, other)), 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(pendingRetry)
	if c, _ := r.Container(other); c.Name != "" {
		t.Errorf("old container re-read within containerTTL: %+v", c)
	}
}

// TestCgroupChangedBound: past the container cache's size, new containers
// are not tracked and are counted.
func TestCgroupChangedBound(t *testing.T) {
	r := NewResolver(t.TempDir(), WithCgroup2Mount(t.TempDir()), WithCacheSize(10, 2))
	for i := range 3 {
		id := strings.Repeat(string(rune('a'+i)), 64)
		r.CgroupChanged(CgroupEvent{ID: uint64(i + 1), Path: "/docker/" + id})
	}
	if n, d := len(r.LiveContainers()), r.LiveDropped(); n != 2 || d != 1 {
		t.Errorf("%d live, %d dropped; want 2 and 1", n, d)
	}
}
