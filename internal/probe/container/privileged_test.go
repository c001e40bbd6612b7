package container

// Privileged tier: real runc containers (busybox-static plus a static
// worker built from testdata/worker) in a Kubernetes-like cgroup layout,
// doing known work, compared with the cgroup files and /proc read here
// independently. Runs when GALAGO_PRIVILEGED_TESTS=1 (CI always sets it),
// as root, with `apt-get install -y runc busybox-static iproute2`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

func randHex(n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hex[rand.IntN(16)]
	}
	return string(b)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// ctr is one runc container of a test.
type ctr struct {
	id, podUID, cgPath, bundle, rootfs string
	pid                                int
}

// buildWorker compiles testdata/worker as a static binary.
func buildWorker(t *testing.T, dst string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the toolchain that built this test
	}
	cmd := exec.Command(goBin, "build", "-o", dst, "./testdata/worker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build worker: %v\n%s", err, out)
	}
}

// newCtr prepares a bundle (busybox + worker) and runs it detached with
// args, cgroupsPath /kubepods/burstable/pod<uid>/<id>; edit changes the
// OCI spec first.
func newCtr(t *testing.T, args []string, edit func(spec map[string]any)) *ctr {
	t.Helper()
	return newCtrIn(t, t.TempDir(), args, edit)
}

// wholeDisk is the disk (not partition) holding dir.
func wholeDisk(t *testing.T, dir string) (uint32, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.Stat(sys); err != nil {
		t.Fatalf("%s is not on a block device (%v): the test's O_DIRECT write needs one (set TMPDIR)", dir, err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		real, err := filepath.EvalSymlinks(sys)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "dev"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); err != nil {
			t.Fatal(err)
		}
	}
	return major, minor
}

func newCtrIn(t *testing.T, bundle string, args []string, edit func(spec map[string]any)) *ctr {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not installed (apt-get install runc):", err)
	}
	c := &ctr{id: randHex(64)}
	c.podUID = fmt.Sprintf("%s-%s-%s-%s-%s", randHex(8), randHex(4), randHex(4), randHex(4), randHex(12))
	c.cgPath = "/kubepods/burstable/pod" + c.podUID + "/" + c.id
	c.bundle = bundle
	c.rootfs = filepath.Join(c.bundle, "rootfs")
	if err := os.MkdirAll(filepath.Join(c.rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("busybox not installed (apt-get install busybox-static):", err)
	}
	if err := os.WriteFile(filepath.Join(c.rootfs, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "sleep"} {
		if err := os.Symlink("busybox", filepath.Join(c.rootfs, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	buildWorker(t, filepath.Join(c.rootfs, "bin/worker"))
	run(t, runc, "spec", "--bundle", c.bundle)
	specPath := filepath.Join(c.bundle, "config.json")
	var spec map[string]any
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = args
	spec["root"].(map[string]any)["readonly"] = false
	spec["linux"].(map[string]any)["cgroupsPath"] = c.cgPath
	spec["annotations"] = map[string]string{
		"io.kubernetes.cri.container-type":    "container",
		"io.kubernetes.cri.container-name":    "galago-ctr",
		"io.kubernetes.cri.image-name":        "docker.io/library/busybox:test",
		"io.kubernetes.cri.sandbox-name":      "galago-pod",
		"io.kubernetes.cri.sandbox-namespace": "galago-ns",
		"io.kubernetes.cri.sandbox-uid":       c.podUID,
	}
	if edit != nil {
		edit(spec)
	}
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(runc, "kill", c.id, "KILL").Run()
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", c.id).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		removeCgroupDirs(t, c.cgPath)
	})
	logPath := filepath.Join(t.TempDir(), "runc.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(runc, "run", "--detach", "--bundle", c.bundle, c.id)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Run()
	logf.Close()
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("runc run: %v\n%s", err, out)
	}
	var state struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(run(t, runc, "state", c.id)), &state); err != nil || state.Pid <= 0 {
		t.Fatalf("runc state: %v", err)
	}
	c.pid = state.Pid
	return c
}

func removeCgroupDirs(t *testing.T, cgPath string) {
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

// cgroupFile is the container's file in the v1 hierarchy of controller
// when it is mounted, else in the cgroup2 hierarchy: the layout runc used.
func cgroupFile(t *testing.T, c *ctr, controller, v1File, v2File string) (string, bool) {
	t.Helper()
	p := filepath.Join("/sys/fs/cgroup", controller, c.cgPath, v1File)
	if _, err := os.Stat(p); err == nil {
		return p, true
	}
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		p := filepath.Join(m, c.cgPath, v2File)
		if _, err := os.Stat(p); err == nil {
			return p, false
		}
	}
	t.Fatalf("no %s or %s for %s", v1File, v2File, c.cgPath)
	return "", false
}

func readUint(t *testing.T, p string) uint64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}

func readKV(t *testing.T, p string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = n
			}
		}
	}
	return out
}

// truth reads every field the probe reports for c from its own sources,
// independently of the probe's code.
func truth(t *testing.T, c *ctr, n *netSetup) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	// cpu
	usage, isV1 := cgroupFile(t, c, "cpuacct", "cpuacct.usage", "cpu.stat")
	if isV1 {
		out["cpu_usage_seconds_total"] = float64(readUint(t, usage)) / 1e9
		st := readKV(t, filepath.Join(filepath.Dir(usage), "cpuacct.stat"))
		out["cpu_user_seconds_total"] = float64(st["user"]) / 100
		out["cpu_system_seconds_total"] = float64(st["system"]) / 100
	} else {
		st := readKV(t, usage)
		out["cpu_usage_seconds_total"] = float64(st["usage_usec"]) / 1e6
		out["cpu_user_seconds_total"] = float64(st["user_usec"]) / 1e6
		out["cpu_system_seconds_total"] = float64(st["system_usec"]) / 1e6
	}
	if thr, isV1 := cgroupFile(t, c, "cpu", "cpu.stat", "cpu.stat"); isV1 {
		out["cpu_cfs_throttled_seconds_total"] = float64(readKV(t, thr)["throttled_time"]) / 1e9
	} else if v, ok := readKV(t, thr)["throttled_usec"]; ok {
		out["cpu_cfs_throttled_seconds_total"] = float64(v) / 1e6
	}
	// memory
	mu, memV1 := cgroupFile(t, c, "memory", "memory.usage_in_bytes", "memory.current")
	u := readUint(t, mu)
	st := readKV(t, filepath.Join(filepath.Dir(mu), "memory.stat"))
	out["memory_usage_bytes"] = float64(u)
	keys := []string{"file", "anon", "file_mapped", "inactive_file"}
	if memV1 {
		keys = []string{"total_cache", "total_rss", "total_mapped_file", "total_inactive_file"}
	}
	out["memory_cache"] = float64(st[keys[0]])
	out["memory_rss"] = float64(st[keys[1]])
	out["memory_mapped_file"] = float64(st[keys[2]])
	out["memory_working_set_bytes"] = float64(max(int64(u)-int64(st[keys[3]]), 0))
	// fs
	var sfs unix.Statfs_t
	if err := unix.Statfs(c.rootfs, &sfs); err != nil {
		t.Fatal(err)
	}
	out["fs_inodes_total"] = float64(sfs.Files)
	out["fs_inodes_free"] = float64(sfs.Ffree)
	if io, isV1 := cgroupFile(t, c, "blkio", "blkio.throttle.io_service_bytes_recursive", "io.stat"); isV1 {
		b, _ := os.ReadFile(io)
		var r, w uint64
		devs := 0
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) == 3 {
				n, _ := strconv.ParseUint(f[2], 10, 64)
				switch f[1] {
				case "Total":
					devs++
				case "Read":
					r += n
				case "Write":
					w += n
				}
			}
		}
		if devs > 0 {
			out["fs_reads_bytes_total"], out["fs_writes_bytes_total"] = float64(r), float64(w)
		}
	}
	// network: the host end of the veth pair counts the same frames the
	// other way round.
	// Errors and drops have no twin on the host end: the container end's
	// sysfs counters, read from inside its namespace.
	if n != nil {
		sys := func(f string) float64 {
			return float64(readUint(t, filepath.Join("/sys/class/net", n.hostDev, "statistics", f)))
		}
		out["network_receive_bytes_total"] = sys("tx_bytes")
		out["network_transmit_bytes_total"] = sys("rx_bytes")
		b := run(t, "ip", "netns", "exec", n.ns, "sh", "-c", "cd /sys/class/net/"+n.ctrDev+"/statistics && cat rx_errors rx_dropped tx_errors tx_dropped")
		f := strings.Fields(b)
		if len(f) != 4 {
			t.Fatalf("container end statistics: %q", b)
		}
		for i, name := range []string{"network_receive_errors_total", "network_receive_packets_dropped_total",
			"network_transmit_errors_total", "network_transmit_packets_dropped_total"} {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = float64(v)
		}
	}
	// file descriptors and start: /proc of every process of the container
	procs := readProcsTree(t, c)
	fds, first := 0, uint64(0)
	for i, pid := range procs {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		fds += len(ents)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		start, _ := strconv.ParseUint(f[19], 10, 64)
		if i == 0 || start < first {
			first = start
		}
	}
	out["file_descriptors"] = float64(fds)
	out["start_time_seconds"] = float64(bootTime(t)) + float64(first)/100
	return out
}

func readProcsTree(t *testing.T, c *ctr) []int {
	var pids []int
	dir := filepath.Join("/sys/fs/cgroup/unified", c.cgPath)
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Join("/sys/fs/cgroup", c.cgPath)
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				pids = append(pids, n)
			}
		}
		return nil
	})
	if len(pids) == 0 {
		t.Fatalf("no process in %s", dir)
	}
	return pids
}

func bootTime(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Fatal("no btime")
	return 0
}

// rows collects the fields of key's records of periods that ended after
// since (the latest wins).
func rows(recs []*table.Record, key string, since time.Time) map[string]float64 {
	out := map[string]float64{}
	for _, r := range recs {
		if r.Str("container_id") != key || !r.Time.After(since) {
			continue
		}
		for i, f := range r.Table.Fields {
			if f.Kind != table.KindKey && r.Values[i].Set {
				out[f.Name] = r.Values[i].Num
			}
		}
	}
	return out
}

// setupNet makes a network namespace with a veth pair (no IPv6, static
// neighbours: no packet the test did not send) and returns its name, the
// host end's name and address.
type netSetup struct{ ns, hostDev, ctrDev, hostIP, ctrIP string }

func setupNet(t *testing.T) *netSetup {
	t.Helper()
	tag := randHex(6)
	ns, hostDev, ctrDev := "galago-ct-"+tag, "gch"+tag, "gcc"+tag
	sub := 1 + rand.IntN(250)
	hostIP, ctrIP := fmt.Sprintf("10.231.%d.1", sub), fmt.Sprintf("10.231.%d.2", sub)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", hostDev, "type", "veth", "peer", "name", ctrDev)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostDev).Run() })
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+hostDev+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "link", "set", ctrDev, "netns", ns)
	run(t, "ip", "netns", "exec", ns, "sh", "-c",
		"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/"+ctrDev+"/disable_ipv6")
	run(t, "ip", "addr", "add", hostIP+"/30", "dev", hostDev)
	run(t, "ip", "-n", ns, "addr", "add", ctrIP+"/30", "dev", ctrDev)
	hostMAC := run(t, "cat", "/sys/class/net/"+hostDev+"/address")
	ctrMAC := run(t, "ip", "netns", "exec", ns, "cat", "/sys/class/net/"+ctrDev+"/address")
	run(t, "ip", "neigh", "replace", ctrIP, "lladdr", ctrMAC, "dev", hostDev, "nud", "permanent")
	run(t, "ip", "-n", ns, "neigh", "replace", hostIP, "lladdr", hostMAC, "dev", ctrDev, "nud", "permanent")
	run(t, "ip", "link", "set", hostDev, "up")
	run(t, "ip", "-n", ns, "link", "set", ctrDev, "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return &netSetup{ns, hostDev, ctrDev, hostIP, ctrIP}
}

func startProbe(t *testing.T, pids ...int) (*Probe, *probetest.Runtime) {
	t.Helper()
	p := New(procfs.FS{}, identity.NewResolver("/"), withInterval(300*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	cfg := probe.Config{Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, pids...)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	return p, rt
}

// TestPrivilegedContainerRows runs a worker that touches 64 MiB, opens 100
// descriptors, sends 20 datagrams of 1000 bytes through a veth, writes
// 1 MiB with O_DIRECT and burns 400 ms of CPU under a 20 % CPU quota, then
// compares every container row with the cgroup files, the host end of the
// veth and /proc, exactly, in a window where those sources did not move.
func TestPrivilegedContainerRows(t *testing.T) {
	probetest.RequirePrivileged(t)
	probetest.RequireTools(t, "runc", "ip")
	const (
		memMiB   = 64
		nfds     = 100
		npkts    = 20
		payload  = 1000
		direct   = 1 << 20
		cpuMS    = 400
		udpFrame = 14 + 20 + 8
	)
	nw := setupNet(t)
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(nw.hostIP)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.LocalAddr().(*net.UDPAddr).Port
	args := []string{"/bin/worker", "hold", strconv.Itoa(memMiB), strconv.Itoa(nfds), nw.hostIP, strconv.Itoa(port),
		strconv.Itoa(npkts), strconv.Itoa(payload), strconv.Itoa(direct), strconv.Itoa(cpuMS)}
	rootfsDir := t.TempDir()
	c := newCtrIn(t, rootfsDir, args, func(spec map[string]any) {
		lin := spec["linux"].(map[string]any)
		nss := lin["namespaces"].([]any)
		for _, n := range nss {
			if m := n.(map[string]any); m["type"] == "network" {
				m["path"] = "/var/run/netns/" + nw.ns
			}
		}
		res, _ := lin["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
			lin["resources"] = res
		}
		res["cpu"] = map[string]any{"quota": 20000, "period": 100000}
		// A throttle rule far above what the worker writes: on cgroup v1
		// since Linux 6.9 the blkio counters count only on such disks.
		major, minor := wholeDisk(t, rootfsDir)
		res["blockIO"] = map[string]any{"throttleWriteBpsDevice": []any{
			map[string]any{"major": major, "minor": minor, "rate": uint64(1) << 40}}}
	})
	probetest.WaitFor(t, "worker ready", func() bool {
		_, err := os.Stat(filepath.Join(c.rootfs, "ready"))
		return err == nil
	})
	got := 0
	buf := make([]byte, 2048)
	_ = l.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got < npkts {
		n, _, err := l.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("received %d of %d datagrams: %v", got, npkts, err)
		}
		if n != payload {
			t.Fatalf("datagram of %d bytes, want %d", n, payload)
		}
		got++
	}

	_, rt := startProbe(t, c.pid)
	key := identity.ShortID(c.id)
	ctrTables := 0 // the container_* tables (not proc_oom): one row each per period
	for _, tb := range New(procfs.FS{}, nil).Tables() {
		if tb != ProcOom {
			ctrTables++
		}
	}
	var want, have map[string]float64
	stable := false
	for try := 0; try < 20 && !stable; try++ {
		rt.Take()
		t0 := time.Now()
		before := truth(t, c, nw)
		// the rows of one period read after before (the ones of a period
		// are published together, under the probe's lock)
		recs := rt.WaitRecords(t, "the period's rows", func(rs []*table.Record) bool {
			n := 0
			for _, r := range rs {
				if r.Str("container_id") == key && r.Time.After(t0) {
					n++
				}
			}
			return n >= ctrTables
		})
		after := truth(t, c, nw)
		if fmt.Sprint(before) == fmt.Sprint(after) {
			stable, want, have = true, after, rows(recs, key, t0)
		}
	}
	if !stable {
		t.Fatal("the container's sources never held still for one period")
	}
	t.Logf("%d fields compared; rows: %v", len(want), have)
	for f, w := range want {
		g, ok := have[f]
		if !ok {
			t.Errorf("%s: not reported, want %v", f, w)
			continue
		}
		if g != w {
			t.Errorf("%s = %v, want %v", f, g, w)
		}
	}
	for f, g := range have {
		if _, ok := want[f]; !ok && f != "oom_events_total" && f != "cpu_load_average_10s" {
			t.Errorf("%s = %v reported, not expected here", f, g)
		}
	}
	if len(want) < 20 {
		t.Errorf("only %d fields in the ground truth", len(want))
	}
	// The known work shows in the values.
	checks := []struct {
		f   string
		min float64
	}{
		{"memory_rss", memMiB * (1 << 20)},
		{"memory_usage_bytes", memMiB * (1 << 20)},
		{"fs_writes_bytes_total", direct},
		{"cpu_usage_seconds_total", cpuMS / 1000.0},
		{"cpu_cfs_throttled_seconds_total", 0.1},
	}
	for _, ck := range checks {
		if have[ck.f] < ck.min {
			t.Errorf("%s = %v, want at least %v", ck.f, have[ck.f], ck.min)
		}
	}
	if g, w := have["network_transmit_bytes_total"], float64(npkts*(payload+udpFrame)); g != w {
		t.Errorf("network_transmit_bytes_total = %v, want %d datagrams of %d bytes in %d-byte frames = %v", g, npkts, payload, payload+udpFrame, w)
	}
	if g := have["network_receive_bytes_total"]; g != 0 {
		t.Errorf("network_receive_bytes_total = %v, want 0 (nothing was sent to the container)", g)
	}
	// stdio, the descriptors, the socket, and what the Go runtime keeps
	// open (its cgroup CPU limit files, the netpoller)
	if g, w := have["file_descriptors"], float64(3+nfds+1); g < w || g > w+8 {
		t.Errorf("file_descriptors = %v, want %v plus the Go runtime's few", g, w)
	}
	if g, ok := have["oom_events_total"]; !ok || g != 0 {
		t.Errorf("oom_events_total = %v (%v), want 0", g, ok)
	}
	// The worker sleeps: none of its threads is runnable but for a blip.
	if g, ok := have["cpu_load_average_10s"]; !ok || g > 0.5 {
		t.Errorf("cpu_load_average_10s = %v (%v), want about 0 for a sleeping worker", g, ok)
	}
}

// TestPrivilegedContainerLoad runs two busy shell loops in a container
// whose init sleeps: both are always running or runnable, so from the
// first sample on the 10 s load average is exactly 2; the test checks the
// loops' thread states itself.
func TestPrivilegedContainerLoad(t *testing.T) {
	probetest.RequireTools(t, "runc")
	c := newCtr(t, []string{"/bin/sleep", "600"}, nil)
	runc, _ := exec.LookPath("runc")
	for i := 0; i < 2; i++ {
		// stdio to /dev/null: a pipe would stay open in the detached loop
		if err := exec.Command(runc, "exec", "--detach", c.id, "/bin/sh", "-c", "while :; do :; done").Run(); err != nil {
			t.Fatal("runc exec:", err)
		}
	}
	states := func() (r, other int) {
		for _, pid := range readProcsTree(t, c) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				t.Fatal(err)
			}
			if st := b[bytes.LastIndexByte(b, ')')+2]; st == 'R' || st == 'D' {
				r++
			} else {
				other++
			}
		}
		return r, other
	}
	probetest.WaitFor(t, "two busy loops and the sleeping init", func() bool {
		r, other := states()
		return r == 2 && other == 1
	})
	_, rt := startProbe(t, c.pid)
	key := identity.ShortID(c.id)
	time.Sleep(2500 * time.Millisecond) // three samples
	rt.Take()
	recs := rt.WaitTable(t, table.ContainerCpu, 1, func(r *table.Record) bool { return r.Str("container_id") == key })
	if g := rows(recs, key, time.Time{})["cpu_load_average_10s"]; g != 2 {
		t.Errorf("cpu_load_average_10s = %v, want 2", g)
	}
	if r, other := states(); r != 2 || other != 1 {
		t.Errorf("afterwards %d R/D and %d other processes", r, other)
	}
}

// TestPrivilegedContainerOOM runs a container limited to 32 MiB whose
// init sleeps, and twice execs a worker that allocates until the OOM
// killer kills it: oom_events_total must count exactly the kills the
// memory cgroup counted itself (memory.oom_control / memory.events
// oom_kill), 2.
func TestPrivilegedContainerOOM(t *testing.T) {
	probetest.RequirePrivileged(t)
	probetest.RequireTools(t, "runc")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("mark_victim"))
	c := newCtr(t, []string{"/bin/sleep", "600"}, func(spec map[string]any) {
		lin := spec["linux"].(map[string]any)
		res, _ := lin["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
			lin["resources"] = res
		}
		res["memory"] = map[string]any{"limit": 32 << 20, "swap": 32 << 20}
	})
	_, rt := startProbe(t, c.pid)
	key := identity.ShortID(c.id)
	oomFile, _ := cgroupFile(t, c, "memory", "memory.oom_control", "memory.events")
	count := func(recs []*table.Record) (float64, bool) {
		v, ok := rows(recs, key, time.Time{})["oom_events_total"]
		return v, ok
	}
	recs := rt.WaitTable(t, table.ContainerOom, 1, func(r *table.Record) bool { return r.Str("container_id") == key })
	if v, _ := count(recs); v != 0 {
		t.Fatalf("oom_events_total = %v before any kill", v)
	}
	// proc_oom: each kill of a process of the observed container is one
	// row naming the worker (the workers are not in the snoopers' pid set).
	var procKills float64
	victims := map[string]bool{}
	take := func() {
		recs, _ := rt.Take()
		for _, r := range recs {
			if r.Table == ProcOom {
				if r.Str("comm") != "worker" || r.Str("container_id") != key {
					t.Errorf("proc_oom row %v", r.Labels())
				}
				procKills += r.Values[oomKills].Num
				victims[r.Str("tgid")] = true
			}
		}
	}
	runc, _ := exec.LookPath("runc")
	for kill := 1; kill <= 2; kill++ {
		pidFile := filepath.Join(t.TempDir(), "pid")
		cmd := exec.Command(runc, "exec", "--pid-file", pidFile, c.id, "/bin/worker", "oom")
		out, err := cmd.CombinedOutput()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		killed := ok && (ws.Signaled() && ws.Signal() == syscall.SIGKILL || ws.ExitStatus() == 137)
		if err == nil || !killed {
			t.Fatalf("worker oom: %v, want killed by SIGKILL\n%s", err, out)
		}
		if got := readKV(t, oomFile)["oom_kill"]; got != uint64(kill) {
			t.Fatalf("the cgroup counted %d OOM kills after %d", got, kill)
		}
		pid, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		rt.WaitTable(t, ProcOom, 1, func(r *table.Record) bool { return r.Str("tgid") == strings.TrimSpace(string(pid)) })
		take()
		recs = rt.WaitTable(t, table.ContainerOom, 1, func(r *table.Record) bool { return r.Str("container_id") == key })
		if v, _ := count(recs); v != float64(kill) {
			t.Fatalf("oom_events_total = %v after %d kills", v, kill)
		}
	}
	// and it stays there
	take()
	time.Sleep(700 * time.Millisecond)
	recs = rt.WaitTable(t, table.ContainerOom, 1, func(r *table.Record) bool { return r.Str("container_id") == key })
	if v, _ := count(recs); v != 2 {
		t.Fatalf("oom_events_total = %v later, want 2", v)
	}
	take()
	if procKills != 2 || len(victims) != 2 {
		t.Errorf("proc_oom: %v kills of %d processes, want 2 of 2", procKills, len(victims))
	}
}

// TestPrivilegedContainerOOMKilledInit: the container's only process is
// OOM-killed, so the container is gone at the next period; its kill is
// still reported once, as the cgroup counted it (Kubernetes' OOMKilled).
func TestPrivilegedContainerOOMKilledInit(t *testing.T) {
	probetest.RequireTools(t, "runc")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("mark_victim"))
	c := newCtr(t, []string{"/bin/sh", "-c", "while ! test -e /go; do sleep 0.1; done; exec /bin/worker oom"}, func(spec map[string]any) {
		lin := spec["linux"].(map[string]any)
		res, _ := lin["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
			lin["resources"] = res
		}
		res["memory"] = map[string]any{"limit": 32 << 20, "swap": 32 << 20}
	})
	_, rt := startProbe(t, c.pid)
	key := identity.ShortID(c.id)
	isKey := func(r *table.Record) bool { return r.Str("container_id") == key }
	recs := rt.WaitTable(t, table.ContainerOom, 1, isKey)
	if v := rows(recs, key, time.Time{})["oom_events_total"]; v != 0 {
		t.Fatalf("oom_events_total = %v before the kill", v)
	}
	oomFile, _ := cgroupFile(t, c, "memory", "memory.oom_control", "memory.events")
	if err := os.WriteFile(filepath.Join(c.rootfs, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, "the container's process killed", func() bool {
		return syscall.Kill(c.pid, 0) == syscall.ESRCH
	})
	if got := readKV(t, oomFile)["oom_kill"]; got != 1 {
		t.Fatalf("the cgroup counted %d OOM kills", got)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("probe log:\n%s", rt.Logs())
		}
	})
	// The probe may have reported the kill before the test saw it: look
	// at every record since the start.
	oomIdx := table.ContainerOom.MustIndex("oom_events_total")
	rt.WaitTable(t, table.ContainerOom, 1, func(r *table.Record) bool { return isKey(r) && r.Values[oomIdx].Num == 1 })
	// Reported once, then the container is forgotten: one more second
	// (three periods) adds no row for it.
	time.Sleep(time.Second)
	recs, _ = rt.Take()
	var after []string
	seen := false
	for _, r := range recs {
		if !isKey(r) {
			continue
		}
		if seen {
			after = append(after, r.Table.Name)
		}
		if r.Table == table.ContainerOom && r.Values[oomIdx].Num == 1 {
			if seen {
				t.Error("the kill reported twice")
			}
			seen = true
		}
	}
	if len(after) > 0 {
		t.Errorf("rows for the gone container after its last one: %v", after)
	}
}
