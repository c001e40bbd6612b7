package identity

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Container ids and pod uids of the fixture tree testdata/root.
const (
	dockerID    = "3d2c1b0a99887766554433221100ffeeddccbbaa99887766554433221100ffee"
	criID       = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	runcID      = "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce"
	ctrID       = "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"
	mobyID      = "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a"
	podSystemd  = "0f9c2a3e-1111-2222-3333-444455556666"
	podCgroupfs = "8c3d5e21-aaaa-bbbb-cccc-ddddeeeeffff"
)

const fixtureRoot = "testdata/root"

// fixtureCgroup2 makes a cgroup2 tree whose directories match the unified
// paths of the fixture processes and returns it with each path's inode.
func fixtureCgroup2(t *testing.T) (string, map[string]uint64) {
	t.Helper()
	dir := t.TempDir()
	ids := map[string]uint64{}
	for _, p := range []string{
		"/",
		"/user.slice/user-0.slice/session-1.scope",
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9c2a3e_1111_2222_3333_444455556666.slice/cri-containerd-" + criID + ".scope",
		"/kubepods/burstable/pod" + podCgroupfs + "/" + runcID,
		"/default/" + ctrID,
		"/system.slice/docker-" + mobyID + ".scope",
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		ids[p] = inode(full)
		if ids[p] == 0 {
			t.Fatalf("no inode for %s", full)
		}
	}
	return dir, ids
}

func TestParseStat(t *testing.T) {
	b := []byte("19107 (cat) R 19105 19105 9398 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 42969 3133440 387 18446744073709551615 94240441430016 0\n")
	st, err := ParseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stat{Comm: "cat", State: 'R', PPID: 19105, StartTime: 42969}) {
		t.Fatalf("got %+v", st)
	}
	st, err = ParseStat([]byte("9 (a) b) (c) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0\n"))
	if err != nil || st.Comm != "a) b) (c" || st.PPID != 1 || st.StartTime != 77 {
		t.Fatalf("comm with parentheses: %+v %v", st, err)
	}
	for _, bad := range []string{"", "1 cat S 1", "1 (cat) S 1 2 3"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
}

func TestJavaMainClass(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"/usr/bin/java", "-Xmx1g", "-cp", "a.jar:b.jar", "-Dx=y", "org.Main", "arg"}, "org.Main"},
		{[]string{"java", "-jar", "/opt/app.jar", "--flag"}, "/opt/app.jar"},
		{[]string{"java", "--class-path", "x", "-m", "mod/org.Main"}, "mod/org.Main"},
		{[]string{"java", "--module=mod/org.Main"}, "mod/org.Main"},
		{[]string{"java", "-version"}, ""},
		{[]string{"/usr/bin/python3", "x.py"}, ""},
		{nil, ""},
	} {
		if got := JavaMainClass(tc.args); got != tc.want {
			t.Errorf("JavaMainClass(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestContainerFromCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, file, cid, pod string
	}{
		{"host process", "0::/user.slice/user-0.slice/session-1.scope\n", "", ""},
		{"docker cgroupfs, v1 only", "4:memory:/docker/" + dockerID + "\n0::/\n", dockerID, ""},
		{"docker systemd", "0::/system.slice/docker-" + mobyID + ".scope\n", mobyID, ""},
		{"kubepods systemd containerd",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9c2a3e_1111_2222_3333_444455556666.slice/cri-containerd-" + criID + ".scope\n",
			criID, podSystemd},
		{"kubepods guaranteed systemd crio",
			"0::/kubepods.slice/kubepods-pod0f9c2a3e_1111_2222_3333_444455556666.slice/crio-" + criID + ".scope\n", criID, podSystemd},
		{"kubepods cgroupfs", "1:cpu:/kubepods/burstable/pod" + podCgroupfs + "/" + runcID + "\n0::/kubepods/burstable/pod" + podCgroupfs + "/" + runcID + "\n",
			runcID, podCgroupfs},
		{"static pod uid is 32 hex", "0::/kubepods/besteffort/pod6b24ef32c1d4a6cf07c8f1b2f5a0e9d3/" + runcID + "\n", runcID, "6b24ef32c1d4a6cf07c8f1b2f5a0e9d3"},
		{"containerd ctr", "0::/default/" + ctrID + "\n", ctrID, ""},
		{"sub-cgroup inside a container", "0::/system.slice/docker-" + mobyID + ".scope/init.scope\n", mobyID, ""},
		{"crio conmon is not a container", "0::/machine.slice/crio-conmon-" + criID + ".scope\n", "", ""},
		{"32 hex is not a container", "4:memory:/process_api/811eb0307650664c9dcbc39c8c5dc010\n0::/\n", "", ""},
		{"seen from a private cgroup namespace", "0::/../../kubepods/burstable/pod" + podCgroupfs + "/" + runcID + "\n", runcID, podCgroupfs},
		{"upper case id", "0::/docker/" + strings.ToUpper(dockerID) + "\n", dockerID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid, pod := ContainerFromCgroup(ParseCgroup([]byte(tc.file)))
			if cid != tc.cid || pod != tc.pod {
				t.Errorf("got (%q, %q), want (%q, %q)", cid, pod, tc.cid, tc.pod)
			}
		})
	}
}

func TestResolverProcess(t *testing.T) {
	cg, inodes := fixtureCgroup2(t)
	r := NewResolver(fixtureRoot, WithCgroup2Mount(cg))
	for _, want := range []Process{
		{PID: 100, PPID: 1, Comm: "bash", Cmdline: "bash -l", StartTime: 1000,
			CgroupID: inodes["/user.slice/user-0.slice/session-1.scope"]},
		{PID: 200, PPID: 150, Comm: "nginx", Cmdline: "nginx: master process nginx -g daemon off;", StartTime: 2000,
			ContainerID: dockerID, CgroupID: inodes["/"]},
		{PID: 300, PPID: 290, Comm: "redis-server", Cmdline: "redis-server *:6379", StartTime: 3000,
			ContainerID: criID, PodID: podSystemd,
			CgroupID: inodes["/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f9c2a3e_1111_2222_3333_444455556666.slice/cri-containerd-"+criID+".scope"]},
		{PID: 400, PPID: 390, Comm: "sleep", Cmdline: "/bin/sleep 3600", StartTime: 4000,
			ContainerID: runcID, PodID: podCgroupfs, CgroupID: inodes["/kubepods/burstable/pod"+podCgroupfs+"/"+runcID]},
		{PID: 500, PPID: 490, Comm: "httpd", Cmdline: "httpd -DFOREGROUND", StartTime: 5000,
			ContainerID: ctrID, CgroupID: inodes["/default/"+ctrID]},
		{PID: 600, PPID: 1, Comm: "java", StartTime: 6000,
			Cmdline:   "/usr/lib/jvm/java-17/bin/java -Xmx512m -cp /app/lib/*:/app/classes -Dspring.profiles.active=prod com.example.shop.Main --port 8080",
			MainClass: "com.example.shop.Main"},
		{PID: 601, PPID: 1, Comm: "java", Cmdline: "java -jar /opt/app/server.jar", MainClass: "/opt/app/server.jar", StartTime: 6001},
		{PID: 700, PPID: 1, Comm: "conmon", Cmdline: "/usr/bin/conmon -c d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35", StartTime: 7000},
		{PID: 800, PPID: 790, Comm: "postgres", Cmdline: "postgres -D /var/lib/postgresql/data", StartTime: 8000,
			ContainerID: mobyID, CgroupID: inodes["/system.slice/docker-"+mobyID+".scope"]},
		{PID: 900, PPID: 1, Comm: "weird) name", Cmdline: "./weird", StartTime: 9000, CgroupID: inodes["/"]},
	} {
		got, ok := r.Process(want.PID)
		if !ok {
			t.Errorf("Process(%d) not found", want.PID)
			continue
		}
		if got != want {
			t.Errorf("Process(%d):\n got %+v\nwant %+v", want.PID, got, want)
		}
	}
	if _, ok := r.Process(4242); ok {
		t.Error("Process(4242) found in a tree without it")
	}
}

func TestResolverContainer(t *testing.T) {
	cg, _ := fixtureCgroup2(t)
	r := NewResolver(fixtureRoot, WithCgroup2Mount(cg))
	for _, want := range []Container{
		{ID: criID, Name: "redis", Image: "docker.io/library/redis:7.2", PodID: podSystemd, PodName: "cache-0", PodNamespace: "shop"},
		{ID: runcID, Name: "sleeper", Image: "busybox:1.36", PodID: podCgroupfs, PodName: "sleeper-pod", PodNamespace: "default"},
		{ID: dockerID, Name: "web", Image: "nginx:1.25"},
		{ID: mobyID, Name: "db", Image: "postgres:16"},
	} {
		got, ok := r.Container(want.ID)
		if !ok {
			t.Errorf("Container(%s) not found", want.ID)
			continue
		}
		if got.ID != want.ID || got.Name != want.Name || got.Image != want.Image || got.PodID != want.PodID ||
			got.PodName != want.PodName || got.PodNamespace != want.PodNamespace {
			t.Errorf("Container(%s):\n got %+v\nwant %+v", want.ID, got, want)
		}
	}

	// An abbreviated id resolves through the runtime state directories.
	if got, ok := r.Container(criID[:12]); !ok || got.ID != criID || got.Name != "redis" {
		t.Errorf("Container(short) = %+v, %v", got, ok)
	}
	// A container with no runtime state is unknown until one of its
	// processes has been seen; then it is known by id and cgroup, unnamed.
	if _, ok := r.Container(ctrID); ok {
		t.Error("ctr container known before any of its processes was seen")
	}
	p, ok := r.Process(500)
	if !ok {
		t.Fatal("Process(500) not found")
	}
	got, ok := r.Container(ctrID)
	if !ok || got.Name != "" || got.Image != "" || got.CgroupID != p.CgroupID || got.CgroupID == 0 {
		t.Errorf("Container(ctr) after its process = %+v, %v", got, ok)
	}
	if got, ok := r.Container(ctrID[:12]); !ok || got.ID != ctrID {
		t.Errorf("Container(short ctr) = %+v, %v", got, ok)
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("a", 65)} {
		if _, ok := r.Container(bad); ok {
			t.Errorf("Container(%q) found", bad)
		}
	}
}

// copyTree copies a fixture tree so a test can change it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestResolverPidReuseAndExec(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	cg, _ := fixtureCgroup2(t)
	now := time.Unix(1000, 0)
	r := NewResolver(root, WithCgroup2Mount(cg), WithClock(func() time.Time { return now }))
	write := func(file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "proc/100", file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := r.Process(100); p.Cmdline != "bash -l" {
		t.Fatalf("cmdline %q", p.Cmdline)
	}

	// Same start time and comm: the cached cmdline is kept until refresh.
	write("cmdline", "bash\x00-c\x00changed\x00")
	if p, _ := r.Process(100); p.Cmdline != "bash -l" {
		t.Errorf("cached cmdline %q re-read before refresh", p.Cmdline)
	}
	now = now.Add(DefaultRefresh)
	if p, _ := r.Process(100); p.Cmdline != "bash -c changed" {
		t.Errorf("after refresh cmdline = %q", p.Cmdline)
	}

	// exec: the comm changes, everything is re-read at once.
	write("stat", "100 (redis-server) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\n")
	write("cmdline", "redis-server\x00:6379\x00")
	if p, _ := r.Process(100); p.Comm != "redis-server" || p.Cmdline != "redis-server :6379" {
		t.Errorf("after exec: %+v", p)
	}

	// pid reuse: a new start time, same comm.
	write("stat", "100 (redis-server) S 7 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5555 0 0\n")
	write("cmdline", "redis-server\x00:6380\x00")
	write("cgroup", "0::/docker/"+dockerID+"\n")
	p, _ := r.Process(100)
	if p.StartTime != 5555 || p.PPID != 7 || p.Cmdline != "redis-server :6380" || p.ContainerID != dockerID {
		t.Errorf("after pid reuse: %+v", p)
	}

	// A zombie has exited: what was known of it is answered, marked exited.
	write("stat", "100 (redis-server) Z 7 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5555 0 0\n")
	if p, ok := r.Process(100); !ok || !p.Exited || p.Cmdline != "redis-server :6380" || p.ContainerID != dockerID {
		t.Errorf("zombie: %+v %v, want the remembered process marked exited", p, ok)
	}
	// A zombie of another process (other start time) is not the remembered one.
	write("stat", "100 (other) Z 7 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 6666 0 0\n")
	if p, ok := r.Process(100); ok {
		t.Errorf("a zombie with another start time resolved as %+v", p)
	}

	// exit: remembered for the grace period, then forgotten.
	write("stat", "100 (redis-server) S 7 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5555 0 0\n")
	if p, ok := r.Process(100); !ok || p.Exited {
		t.Fatalf("live again: %+v %v", p, ok)
	}
	if err := os.RemoveAll(filepath.Join(root, "proc/100")); err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Process(100); !ok || !p.Exited || p.Comm != "redis-server" || p.StartTime != 5555 {
		t.Errorf("just exited: %+v %v", p, ok)
	}
	now = now.Add(DefaultExitGrace)
	if _, ok := r.Process(100); !ok {
		t.Error("forgotten before the grace period ended")
	}
	now = now.Add(time.Second)
	if p, ok := r.Process(100); ok {
		t.Errorf("exited process still resolved after the grace period: %+v", p)
	}
}

// TestResolverLearn: a process known only from a lifecycle event (it
// exited before /proc was read) is answered from the event, with its
// container found from the cgroup id of another process seen there; a live
// one is read from /proc at its next lookup.
func TestResolverLearn(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	cg, ids := fixtureCgroup2(t)
	r := NewResolver(root, WithCgroup2Mount(cg))
	// Process 300 of the fixture runs in the CRI container: seen once, its
	// cgroup id maps to the container.
	p300, ok := r.Process(300)
	if !ok || p300.ContainerID != criID {
		t.Fatalf("fixture process 300: %+v", p300)
	}
	r.Learn(Process{PID: 4242, PPID: 300, Comm: "curl", Cmdline: "curl -s x", StartTime: 77, CgroupID: p300.CgroupID})
	p, ok := r.Process(4242)
	want := Process{PID: 4242, PPID: 300, Comm: "curl", Cmdline: "curl -s x", StartTime: 77, CgroupID: p300.CgroupID,
		ContainerID: criID, PodID: podSystemd, Exited: true}
	if !ok || p != want {
		t.Errorf("learned and gone:\n got %+v %v\nwant %+v", p, ok, want)
	}
	// An unknown cgroup id gives no container (the fixture tree's inodes
	// are not kernfs ids: the handle lookup fails).
	r.Learn(Process{PID: 4243, Comm: "x", CgroupID: ids["/"] + 1_000_000})
	if p, _ := r.Process(4243); p.ContainerID != "" {
		t.Errorf("container from nowhere: %+v", p)
	}
	// A learned live process is read from /proc at the next lookup.
	r.Learn(Process{PID: 100, Comm: "bash", StartTime: 1000})
	if p, _ := r.Process(100); p.Cmdline != "bash -l" || p.Exited {
		t.Errorf("learned live process not re-read: %+v", p)
	}
	// Exit marks a known process exited at once.
	r.Exit(100)
	if p, ok := r.Process(100); !ok || p.Cmdline != "bash -l" {
		t.Errorf("after Exit: %+v %v", p, ok)
	}
}

func TestResolverPrivateCgroupNamespace(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	cg, _ := fixtureCgroup2(t)
	// From a private cgroup namespace the path is relative to galago's own
	// cgroup; cleaning it would land on an unrelated directory.
	rel := "0::/../../kubepods/burstable/pod" + podCgroupfs + "/" + runcID + "\n"
	if err := os.WriteFile(filepath.Join(root, "proc/400/cgroup"), []byte(rel), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ok := NewResolver(root, WithCgroup2Mount(cg)).Process(400)
	if !ok || p.ContainerID != runcID || p.PodID != podCgroupfs || p.CgroupID != 0 {
		t.Errorf("Process(400) = %+v, want container and pod ids and no cgroup id", p)
	}
}

func TestResolverCacheBound(t *testing.T) {
	cg, _ := fixtureCgroup2(t)
	r := NewResolver(fixtureRoot, WithCgroup2Mount(cg), WithCacheSize(3, 2))
	for _, pid := range []int{100, 200, 300, 400, 500, 600, 601, 700, 800, 900} {
		if _, ok := r.Process(pid); !ok {
			t.Fatalf("Process(%d) not found", pid)
		}
	}
	for _, id := range []string{criID, runcID, dockerID, mobyID} {
		r.Container(id)
	}
	if n := len(r.procs.m); n != 3 || r.procs.order.Len() != 3 {
		t.Errorf("process cache holds %d entries, want 3", n)
	}
	if n := len(r.conts.m); n != 2 {
		t.Errorf("container cache holds %d entries, want 2", n)
	}
	// The most recent ones stay.
	for _, pid := range []int{700, 800, 900} {
		if _, ok := r.procs.m[pid]; !ok {
			t.Errorf("pid %d evicted, want the 3 most recent kept", pid)
		}
	}
}

func TestHost(t *testing.T) {
	h, err := Host(fixtureRoot)
	if err != nil {
		t.Fatal(err)
	}
	if h.UUID != "e2b7c9a0-1c2d-4e5f-8a9b-0c1d2e3f4a5b" {
		t.Errorf("UUID = %q, want the DMI product uuid", h.UUID)
	}
	if h.MachineID() != h.UUID+"-"+h.IP {
		t.Errorf("MachineID = %q", h.MachineID())
	}
	if h.Hostname == "" {
		t.Error("no hostname")
	}

	// Without DMI the machine-id is used, and without both it is an error.
	root := copyTree(t, fixtureRoot)
	if err := os.Remove(filepath.Join(root, "sys/class/dmi/id/product_uuid")); err != nil {
		t.Fatal(err)
	}
	if h, err := Host(root); err != nil || h.UUID != "3d1219c7c4c5404aaa1f6d2a48adfda4" {
		t.Errorf("machine-id fallback: %+v, %v", h, err)
	}
	if err := os.Remove(filepath.Join(root, "etc/machine-id")); err != nil {
		t.Fatal(err)
	}
	if _, err := Host(root); err == nil {
		t.Error("Host without product_uuid and machine-id succeeded")
	}
}

func TestFirstIPv4(t *testing.T) {
	ifs := []net.Interface{
		{Index: 1, Name: "lo", Flags: net.FlagUp | net.FlagLoopback},
		{Index: 2, Name: "v6only", Flags: net.FlagUp},
		{Index: 3, Name: "eth0", Flags: net.FlagUp},
		{Index: 4, Name: "eth1", Flags: net.FlagUp},
	}
	addrs := map[string][]net.Addr{
		"lo":     {&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)}},
		"v6only": {&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)}},
		"eth0":   {&net.IPNet{IP: net.ParseIP("fe80::2"), Mask: net.CIDRMask(64, 128)}, &net.IPNet{IP: net.ParseIP("192.0.2.2"), Mask: net.CIDRMask(24, 32)}},
		"eth1":   {&net.IPNet{IP: net.ParseIP("198.51.100.7"), Mask: net.CIDRMask(24, 32)}},
	}
	get := func(i net.Interface) ([]net.Addr, error) { return addrs[i.Name], nil }
	if got := firstIPv4(ifs, get); got != "192.0.2.2" {
		t.Errorf("firstIPv4 = %q, want 192.0.2.2", got)
	}
	if got := firstIPv4(ifs[:2], get); got != "" {
		t.Errorf("firstIPv4 without a non-loopback IPv4 = %q", got)
	}
}
