package container

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

const (
	fixtureCID = "3f1e2d4c5b6a79881726354453627180a9b8c7d6e5f40312233445566778899a"
	fixturePod = "0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9"
	fixtureCg  = "/kubepods/burstable/pod" + fixturePod + "/" + fixtureCID
)

func statfsOf(t *testing.T, dir string) (free, total float64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return float64(st.Ffree), float64(st.Files)
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func readFixture(t *testing.T, root string, pid int) *sample {
	t.Helper()
	rd, err := newReader(procfs.FS{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rd.read(fixtureCID, pid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// liveSlack: fields read from the live file system the fixtures' roots
// live on, which other processes change between the probe's read and the
// test's own statfs (a file created or removed is one inode).
var liveSlack = map[string]float64{"fs_inodes_free": 10000}

func checkValues(t *testing.T, s *sample, want map[string]float64, unset ...string) {
	t.Helper()
	for f, w := range want {
		g, ok := s.values[f]
		if live := liveSlack[f]; ok && live > 0 && math.Abs(g-w) <= live {
			continue
		}
		if !ok || g != w {
			t.Errorf("%s = %v (set %v), want %v", f, g, ok, w)
		}
	}
	for f := range s.values {
		if _, ok := want[f]; !ok {
			t.Errorf("%s = %v set, not expected", f, s.values[f])
		}
	}
	for _, f := range unset {
		found := false
		for k := range s.unread {
			if strings.Contains(k, f) {
				found = true
			}
		}
		if !found {
			t.Errorf("no reason logged for %s (unread: %v)", f, s.unread)
		}
	}
}

// TestReadV1 reads a legacy (v1 only) host: cpu and cpuacct co-mounted, a
// container with a second process in a sub-cgroup, read through the
// sub-cgroup's process so that the path must be cut at the container.
func TestReadV1(t *testing.T) {
	root := "testdata/v1"
	for _, pid := range []int{4242, 4243} {
		s := readFixture(t, root, pid)
		free, total := statfsOf(t, filepath.Join(root, "proc", "4242", "root"))
		checkValues(t, s, map[string]float64{
			"cpu_usage_seconds_total":                1.23456789,
			"cpu_user_seconds_total":                 1,
			"cpu_system_seconds_total":               0.5,
			"cpu_cfs_throttled_seconds_total":        2.5,
			"memory_usage_bytes":                     104857600,
			"memory_cache":                           10485760,
			"memory_rss":                             52428800,
			"memory_mapped_file":                     4194304,
			"memory_working_set_bytes":               104857600 - 8388608,
			"fs_inodes_free":                         free,
			"fs_inodes_total":                        total,
			"fs_reads_bytes_total":                   4196,
			"fs_writes_bytes_total":                  8392,
			"network_receive_bytes_total":            124456,
			"network_receive_errors_total":           1,
			"network_receive_packets_dropped_total":  3,
			"network_transmit_bytes_total":           67432,
			"network_transmit_errors_total":          3,
			"network_transmit_packets_dropped_total": 4,
			"file_descriptors":                       8,
			"start_time_seconds":                     1700000050,
		}, "fs_read_seconds_total")
		if want := filepath.Join("/sys/fs/cgroup/memory", fixtureCg); s.dirs.v1["memory"] != want {
			t.Errorf("pid %d: memory dir %q, want %q", pid, s.dirs.v1["memory"], want)
		}
		if s.dirs.v2 != "" {
			t.Errorf("v2 dir %q on a v1-only host", s.dirs.v2)
		}
		if !slices.Equal(s.procs, []int{4242, 4243}) {
			t.Errorf("procs %v", s.procs)
		}
		mem := filepath.Join(root, "sys/fs/cgroup/memory", fixtureCg)
		for _, d := range []string{mem, filepath.Join(mem, "sub")} {
			if ino := inodeOf(t, d); !slices.Contains(s.cgroups, ino) {
				t.Errorf("cgroup ids %v lack %s (%d)", s.cgroups, d, ino)
			}
		}
	}
}

// TestReadV2 reads a unified host: a container in the host's network
// namespace has no network values, and memory.stat's inactive_file above
// the usage gives a working set of 0, not a wrapped number.
func TestReadV2(t *testing.T) {
	root := "testdata/v2"
	s := readFixture(t, root, 77)
	free, total := statfsOf(t, filepath.Join(root, "proc", "77", "root"))
	checkValues(t, s, map[string]float64{
		"cpu_usage_seconds_total":         3,
		"cpu_user_seconds_total":          2,
		"cpu_system_seconds_total":        1,
		"cpu_cfs_throttled_seconds_total": 0.5,
		"memory_usage_bytes":              2097152,
		"memory_cache":                    524288,
		"memory_rss":                      1048576,
		"memory_mapped_file":              262144,
		"memory_working_set_bytes":        0,
		"fs_inodes_free":                  free,
		"fs_inodes_total":                 total,
		"fs_reads_bytes_total":            1010,
		"fs_writes_bytes_total":           2020,
		"file_descriptors":                4,
		"start_time_seconds":              1700000102.5,
	}, "fs_read_seconds_total")
	if !s.hostNet {
		t.Error("a container in the host's network namespace not recognised")
	}
	if want := filepath.Join("/sys/fs/cgroup", fixtureCg); s.dirs.v2 != want || len(s.dirs.v1) != 0 {
		t.Errorf("dirs %+v, want v2 %s only", s.dirs, want)
	}
}

// TestReadV2NoControllers: without the cpu, memory and io controllers
// enabled for the cgroup the fields they give are unset, with a reason.
func TestReadV2NoControllers(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/v2")); err != nil {
		t.Fatal(err)
	}
	// CopyFS copies symlinks as errors on some versions: recreate them.
	for _, l := range []string{"proc/1/ns/net", "proc/77/ns/net"} {
		_ = os.Remove(filepath.Join(root, l))
		if err := os.Symlink("net:[4026531840]", filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "sys/fs/cgroup", fixtureCg)
	for _, f := range []string{"memory.current", "memory.stat", "io.stat"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 7\nuser_usec 4\nsystem_usec 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := readFixture(t, root, 77)
	free, total := statfsOf(t, filepath.Join(root, "proc", "77", "root"))
	checkValues(t, s, map[string]float64{
		"cpu_usage_seconds_total":  7e-6,
		"cpu_user_seconds_total":   4e-6,
		"cpu_system_seconds_total": 3e-6,
		"fs_inodes_free":           free,
		"fs_inodes_total":          total,
		"file_descriptors":         4,
		"start_time_seconds":       1700000102.5,
	}, "cpu_cfs_throttled_seconds_total", "memory_usage_bytes", "fs_reads_bytes_total")
}

// TestReadV1ThrottleInactive: a v1 blkio file listing no device (Linux
// 6.9+ without a throttle rule) leaves the byte counters unset.
func TestReadV1ThrottleInactive(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"proc/1/ns/net", "proc/4242/ns/net", "proc/4243/ns/net"} {
		_ = os.Remove(filepath.Join(root, l))
		target := "net:[4026532999]"
		if l == "proc/1/ns/net" {
			target = "net:[4026531840]"
		}
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(root, "sys/fs/cgroup/blkio", fixtureCg, "blkio.throttle.io_service_bytes_recursive")
	if err := os.WriteFile(f, []byte("Total 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := readFixture(t, root, 4242)
	for _, k := range []string{"fs_reads_bytes_total", "fs_writes_bytes_total"} {
		if v, ok := s.values[k]; ok {
			t.Errorf("%s = %v, want unset", k, v)
		}
	}
	checkValues(t, s, s.values, "fs_reads_bytes_total")
}

// TestLoadAverage: the first sample seeds the mean, the next ones decay
// it with a 10 s time constant; a container no longer observed is
// forgotten.
func TestLoadAverage(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	ids := fakeIDs{4242: {PID: 4242, ContainerID: fixtureCID}}
	p := New(procfs.FS{Root: root}, ids)
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	targets := probetest.NewTargets(snoop.Whitelist, 4242)
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams(), Targets: targets}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	t0 := time.Unix(1700000000, 0)
	p.sampleLoad(t0)
	if got := p.load[fixtureCID].avg; got != 1 {
		t.Fatalf("seed %v, want 1 (one R thread)", got)
	}
	// 4243 (in the sub-cgroup) enters D: 2 tasks count.
	stat := filepath.Join(root, "proc/4243/stat")
	b, err := os.ReadFile(stat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stat, []byte(strings.Replace(string(b), ") S ", ") D ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.sampleLoad(t0.Add(10 * time.Second))
	if got, want := p.load[fixtureCID].avg, 2-math.Exp(-1); math.Abs(got-want) > 1e-12 {
		t.Errorf("after 10 s at 2: %v, want %v", got, want)
	}
	targets.Set()
	p.sampleLoad(t0.Add(11 * time.Second))
	if len(p.load) != 0 {
		t.Errorf("load kept for containers no longer observed: %v", p.load)
	}
}

func TestTrimToContainer(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{fixtureCg, fixtureCg, true},
		{fixtureCg + "/init.scope", fixtureCg, true},
		{"/system.slice/docker-" + fixtureCID + ".scope/sub", "/system.slice/docker-" + fixtureCID + ".scope", true},
		{"/other", "/other", false},
		{"/", "/", false},
	} {
		if got, ok := trimToContainer(c.in, fixtureCID); got != c.want || ok != c.ok {
			t.Errorf("trimToContainer(%q) = %q, %v, want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	// A process moved to the root cgroup on its way out is no longer read.
	rd, err := newReader(procfs.FS{Root: "testdata/v2"})
	if err != nil {
		t.Fatal(err)
	}
	if d := containerDirs(rd.mounts, identity.ParseCgroup([]byte("0::/\n")), fixtureCID); d.v2 != "" || len(d.v1) != 0 {
		t.Errorf("dirs of an exiting process: %+v", d)
	}
}

func TestOOMsOf(t *testing.T) {
	ooms := map[oomOomKey]uint64{
		{MemcgId: 10, CgroupId: 20}: 2, // both ids the container's: counted once
		{MemcgId: 11, CgroupId: 99}: 1, // v1 memory cgroup of a sub-cgroup
		{MemcgId: 0, CgroupId: 21}:  4, // no memory controller, cgroup2 id
		{MemcgId: 50, CgroupId: 60}: 8, // another container
		{MemcgId: 0, CgroupId: 0}:   16,
	}
	if got := oomsOf(ooms, []uint64{10, 11, 20, 21}); got != 7 {
		t.Errorf("oomsOf = %d, want 7", got)
	}
}

type fakeIDs map[int]identity.Process

func (f fakeIDs) Process(pid int) (identity.Process, bool) { p, ok := f[pid]; return p, ok }
func (f fakeIDs) Container(string) (identity.Container, bool) {
	return identity.Container{}, false
}

// TestCollect drives one period on the v1 fixture: every table but
// container_oom (no BPF here) gets one record keyed by the short id, with
// only the fields that were read.
func TestCollect(t *testing.T) {
	ids := fakeIDs{
		4242: {PID: 4242, ContainerID: fixtureCID, PodID: fixturePod},
		4243: {PID: 4243, ContainerID: fixtureCID, PodID: fixturePod},
		1:    {PID: 1},
	}
	p := New(procfs.FS{Root: "testdata/v1"}, ids)
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	cfg := probe.Config{Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, 1, 4243, 4242)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	p.closeOOM() // the unit tier uses no BPF: no container_oom
	p.collect(time.Unix(1700000990, 0))
	first, _ := rt.Take()
	for _, r := range first {
		if r.Table == table.ContainerCpu && r.Values[table.ContainerCpu.MustIndex("cpu_load_average_10s")].Set {
			t.Error("cpu_load_average_10s set before any load sample")
		}
	}
	p.sampleLoad(time.Unix(1700000999, 0)) // 4244 is R: seeds 1
	p.collect(time.Unix(1700001000, 0))
	recs, _ := rt.Take()
	got := map[string]*table.Record{}
	for _, r := range recs {
		if r.Str("container_id") != identity.ShortID(fixtureCID) {
			t.Errorf("%s keyed %q", r.Table.Name, r.Str("container_id"))
		}
		got[r.Table.Name] = r
	}
	for _, tb := range []*table.Table{table.ContainerCpu, table.ContainerFs, table.ContainerMemory,
		table.ContainerNetwork, table.ContainerStart, table.ContainerFile} {
		if got[tb.Name] == nil {
			t.Errorf("no %s record", tb.Name)
		}
	}
	if got["container_oom"] != nil {
		t.Error("container_oom reported without the OOM program")
	}
	if r := got["container_cpu"]; r == nil || r.Values[table.ContainerCpu.MustIndex("cpu_load_average_10s")].Num != 1 {
		t.Errorf("cpu_load_average_10s: %+v, want 1", r)
	}
	if r := got["container_file"]; r == nil || r.Values[1].Num != 8 {
		t.Errorf("container_file %+v", r)
	}
	logs := rt.Logs()
	for _, f := range []string{"fs_read_seconds_total"} {
		if strings.Count(logs, f) != 1 {
			t.Errorf("%s: logged %d times, want once:\n%s", f, strings.Count(logs, f), logs)
		}
	}
	// A second period logs nothing new.
	p.collect(time.Unix(1700001060, 0))
	if rt.Logs() != logs {
		t.Errorf("second period logged again:\n%s", strings.TrimPrefix(rt.Logs(), logs))
	}
	rt.Shutdown(t, p)
}

// TestReportGone: a container gone since its last row gets one last
// container_oom row only when kills were counted in its cgroups since.
func TestReportGone(t *testing.T) {
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	p := New(procfs.FS{}, fakeIDs{})
	p.rt = rt
	idA, idB, idC := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	p.reported = map[string]reportedContainer{
		idA: {cgroups: []uint64{10, 11}, ooms: 0}, // killed since: reported
		idB: {cgroups: []uint64{20}, ooms: 1},     // nothing new: silent
		idC: {cgroups: []uint64{30}, ooms: 0},     // still there
	}
	ooms := map[oomOomKey]uint64{{MemcgId: 11, CgroupId: 99}: 1, {MemcgId: 20}: 1}
	p.reportGone(map[string]bool{idC: true}, ooms, time.Unix(100, 0), time.Minute)
	recs, _ := rt.Take()
	if len(recs) != 1 || recs[0].Table != table.ContainerOom || recs[0].Str("container_id") != idA[:12] ||
		recs[0].Values[table.ContainerOom.MustIndex("oom_events_total")].Num != 1 {
		t.Fatalf("records %+v", recs)
	}
	if _, ok := p.reported[idC]; !ok || len(p.reported) != 1 {
		t.Errorf("reported after: %v", p.reported)
	}
	// Without the OOM program a gone container is forgotten silently.
	p.reported[idA] = reportedContainer{cgroups: []uint64{11}}
	p.reportGone(map[string]bool{idC: true}, nil, time.Unix(160, 0), time.Minute)
	if recs, _ := rt.Take(); len(recs) != 0 || len(p.reported) != 1 {
		t.Errorf("without ooms: %d records, reported %v", len(recs), p.reported)
	}
}
