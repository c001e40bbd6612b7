package container

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/procfs"
)

// maxCgroupDirs bounds the sub-cgroups of one container walked per period.
const maxCgroupDirs = 4096

// cgroupDirs are one container's cgroup directories, host paths (not under
// the root): its cgroup2 directory and, per mounted v1 controller, its
// directory in that controller's hierarchy.
type cgroupDirs struct {
	v2 string
	v1 map[string]string
}

// containerDirs finds a container's cgroup directories from the
// /proc/<pid>/cgroup lines of one of its processes. A process may sit in a
// sub-cgroup of its container (a container running systemd, or an exec
// placed in a child): each path is cut after the segment that names the
// container, so every process of the container gives the same directories.
//
// A line whose path does not name the container is skipped: an exiting
// process is moved to the root cgroup, whose statistics are the host's.
func containerDirs(m procfs.CgroupMounts, lines []identity.CgroupLine, cid string) cgroupDirs {
	d := cgroupDirs{v1: map[string]string{}}
	for _, l := range lines {
		p, ok := trimToContainer(l.Path, cid)
		if !ok {
			continue
		}
		if l.Hierarchy == 0 && l.Controllers == "" {
			if m.V2 != "" {
				d.v2 = filepath.Join(m.V2, p)
			}
			continue
		}
		for _, c := range strings.Split(l.Controllers, ",") {
			if mp, ok := m.V1[c]; ok {
				d.v1[c] = filepath.Join(mp, p)
			}
		}
	}
	return d
}

// trimToContainer cuts a cgroup path after its last segment naming the
// container cid; ok is false when no segment names it.
func trimToContainer(p, cid string) (string, bool) {
	segs := strings.Split(p, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		if identity.ContainerIDFromPath(segs[i]) == cid {
			return strings.Join(segs[:i+1], "/"), true
		}
	}
	return p, false
}

// procsDir is the directory whose tree lists the container's processes:
// the cgroup2 one (every process has one, also on hybrid hosts), else the
// first v1 hierarchy.
func (d cgroupDirs) procsDir() string {
	if d.v2 != "" {
		return d.v2
	}
	for _, c := range []string{"pids", "memory", "cpu", "cpuacct", "blkio", "freezer", "devices", "cpuset"} {
		if p, ok := d.v1[c]; ok {
			return p
		}
	}
	for _, c := range slices.Sorted(maps.Keys(d.v1)) {
		return d.v1[c]
	}
	return ""
}

// sample is what one period read of one container: every field that
// could be read, by .meta field name, and for the others why not (by the
// list of fields, so that the probe logs each reason once).
type sample struct {
	id       string
	values   map[string]float64
	unread   map[string]error
	cgroups  []uint64 // inodes of its memory (v1) and cgroup2 directories and their descendants
	procs    []int
	hostNet  bool // the container shares the host's network namespace
	dirs     cgroupDirs
	rootPath string
}

func (s *sample) set(field string, v float64) { s.values[field] = v }

func (s *sample) miss(fields string, err error) {
	if _, ok := s.unread[fields]; !ok {
		s.unread[fields] = err
	}
}

// reader reads container statistics under a host root.
type reader struct {
	fs        procfs.FS
	mounts    procfs.CgroupMounts
	bootTime  uint64 // btime, seconds since the epoch
	hostNetNS string // the network namespace of the host's pid 1
}

// newReader reads what is common to every container: the cgroup mounts,
// the boot time and the host's network namespace.
func newReader(fsys procfs.FS) (*reader, error) {
	m, err := fsys.CgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	if m.V2 == "" && len(m.V1) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted")
	}
	st, err := fsys.Stat()
	if err != nil {
		return nil, err
	}
	ns, err := fsys.PIDNetNS(1)
	if err != nil {
		ns = "" // unknown: no container is taken for a host-network one
	}
	return &reader{fs: fsys, mounts: m, bootTime: st.BootTime, hostNetNS: ns}, nil
}

// read samples container cid through pid, one of its processes.
func (rd *reader) read(cid string, pid int) (*sample, error) {
	b, err := os.ReadFile(rd.fs.Path(fmt.Sprintf("/proc/%d/cgroup", pid)))
	if err != nil {
		return nil, err
	}
	s := &sample{id: cid, values: map[string]float64{}, unread: map[string]error{},
		dirs: containerDirs(rd.mounts, identity.ParseCgroup(b), cid)}
	if s.dirs.v2 == "" && len(s.dirs.v1) == 0 {
		// Exited (or exiting: moved to the root cgroup) since it was listed.
		return nil, fmt.Errorf("pid %d is in none of the container's cgroups: %w", pid, fs.ErrNotExist)
	}
	rd.readProcs(s)
	rd.readCPU(s)
	rd.readMemory(s)
	rd.readFS(s, pid)
	rd.readNetwork(s, pid)
	rd.readFiles(s)
	rd.readStart(s)
	rd.readCgroupIDs(s)
	return s, nil
}

// readProcs lists the processes of the container's cgroup tree.
func (rd *reader) readProcs(s *sample) {
	dir := s.dirs.procsDir()
	tree, err := rd.fs.CgroupTree(dir, maxCgroupDirs)
	if err != nil {
		s.miss("file_descriptors, start_time_seconds", err)
		return
	}
	for _, d := range tree {
		pids, err := rd.fs.CgroupProcs(d)
		if err != nil {
			continue // removed while we walked
		}
		s.procs = append(s.procs, pids...)
	}
	sort.Ints(s.procs)
}

func (rd *reader) flat(dir, file string) (map[string]uint64, error) {
	return rd.fs.ReadFlatKeyed(filepath.Join(dir, file))
}

func (rd *reader) uint(dir, file string) (uint64, error) {
	return rd.fs.ReadCgroupUint(filepath.Join(dir, file))
}

// readCPU reads cpuacct (v1) or cpu.stat (v2, always present there) for
// the times, and the cpu controller's cpu.stat for throttling.
func (rd *reader) readCPU(s *sample) {
	const times = "cpu_usage_seconds_total, cpu_user_seconds_total, cpu_system_seconds_total"
	if dir, ok := s.dirs.v1["cpuacct"]; ok {
		usage, err1 := rd.uint(dir, "cpuacct.usage")
		st, err2 := rd.flat(dir, "cpuacct.stat")
		if err := errors.Join(err1, err2); err != nil {
			s.miss(times, err)
		} else {
			s.set("cpu_usage_seconds_total", float64(usage)/1e9)
			s.set("cpu_user_seconds_total", float64(st["user"])/procfs.UserHZ)
			s.set("cpu_system_seconds_total", float64(st["system"])/procfs.UserHZ)
		}
	} else if s.dirs.v2 != "" {
		st, err := rd.flat(s.dirs.v2, "cpu.stat")
		if err != nil {
			s.miss(times, err)
		} else {
			s.set("cpu_usage_seconds_total", float64(st["usage_usec"])/1e6)
			s.set("cpu_user_seconds_total", float64(st["user_usec"])/1e6)
			s.set("cpu_system_seconds_total", float64(st["system_usec"])/1e6)
		}
	} else {
		s.miss(times, errors.New("neither the v1 cpuacct controller nor cgroup2 is mounted"))
	}

	const thr = "cpu_cfs_throttled_seconds_total"
	if dir, ok := s.dirs.v1["cpu"]; ok {
		st, err := rd.flat(dir, "cpu.stat")
		if v, have := st["throttled_time"]; err == nil && have {
			s.set(thr, float64(v)/1e9)
		} else {
			s.miss(thr, errors.Join(err, errors.New("no throttled_time in v1 cpu.stat")))
		}
	} else if s.dirs.v2 != "" {
		st, err := rd.flat(s.dirs.v2, "cpu.stat")
		if v, have := st["throttled_usec"]; err == nil && have {
			s.set(thr, float64(v)/1e6)
		} else {
			s.miss(thr, errors.Join(err, errors.New("no throttled_usec in cgroup2 cpu.stat: the cpu controller is not enabled for the container's cgroup")))
		}
	} else {
		s.miss(thr, errors.New("no cpu controller mounted"))
	}
}

// readMemory follows cAdvisor: usage is the memcg's charge, cache, rss and
// mapped_file the hierarchical memory.stat lines (v1 total_cache,
// total_rss, total_mapped_file; v2 file, anon, file_mapped), working set
// the usage minus inactive file pages (never below 0).
func (rd *reader) readMemory(s *sample) {
	const fields = "memory_usage_bytes, memory_cache, memory_rss, memory_mapped_file, memory_working_set_bytes"
	var usage uint64
	var st map[string]uint64
	var keys [4]string // cache, rss, mapped_file, inactive_file
	var err error
	if dir, ok := s.dirs.v1["memory"]; ok {
		usage, err = rd.uint(dir, "memory.usage_in_bytes")
		if err == nil {
			st, err = rd.flat(dir, "memory.stat")
		}
		keys = [4]string{"total_cache", "total_rss", "total_mapped_file", "total_inactive_file"}
	} else if s.dirs.v2 != "" {
		usage, err = rd.uint(s.dirs.v2, "memory.current")
		if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("no memory.current: the memory controller is not enabled for the container's cgroup")
		}
		if err == nil {
			st, err = rd.flat(s.dirs.v2, "memory.stat")
		}
		keys = [4]string{"file", "anon", "file_mapped", "inactive_file"}
	} else {
		err = errors.New("no memory controller mounted")
	}
	if err != nil {
		s.miss(fields, err)
		return
	}
	s.set("memory_usage_bytes", float64(usage))
	for i, f := range []string{"memory_cache", "memory_rss", "memory_mapped_file"} {
		if v, ok := st[keys[i]]; ok {
			s.set(f, float64(v))
		} else {
			s.miss(f, fmt.Errorf("no %s in memory.stat", keys[i]))
		}
	}
	if inactive, ok := st[keys[3]]; ok {
		ws := uint64(0)
		if usage > inactive {
			ws = usage - inactive
		}
		s.set("memory_working_set_bytes", float64(ws))
	} else {
		s.miss("memory_working_set_bytes", fmt.Errorf("no %s in memory.stat", keys[3]))
	}
}

// readFS reads the inodes of the filesystem holding the container's root
// (statfs through /proc/<pid>/root) and the block I/O bytes of its cgroup
// (v1 blkio throttle counters, which count every bio whatever the
// scheduler; v2 io.stat). The seconds spent reading and writing exist only
// in v1's blkio.io_service_time_recursive (CFQ, gone since Linux 5.0, or
// BFQ built with CONFIG_BFQ_CGROUP_DEBUG).
func (rd *reader) readFS(s *sample, pid int) {
	s.rootPath = rd.fs.Path(fmt.Sprintf("/proc/%d/root", pid))
	var st unix.Statfs_t
	if err := unix.Statfs(s.rootPath, &st); err != nil {
		s.miss("fs_inodes_free, fs_inodes_total", err)
	} else {
		s.set("fs_inodes_free", float64(st.Ffree))
		s.set("fs_inodes_total", float64(st.Files))
	}

	const bytesF = "fs_reads_bytes_total, fs_writes_bytes_total"
	const secsF = "fs_read_seconds_total, fs_write_seconds_total"
	if dir, ok := s.dirs.v1["blkio"]; ok {
		io, err := rd.fs.ReadBlkioRWStat(filepath.Join(dir, "blkio.throttle.io_service_bytes_recursive"))
		if errors.Is(err, fs.ErrNotExist) {
			io, err = rd.fs.ReadBlkioRWStat(filepath.Join(dir, "blkio.throttle.io_service_bytes"))
		}
		switch {
		case err != nil:
			s.miss(bytesF, err)
		case io.Devices == 0:
			// Since Linux 6.9 blk-throttle starts on a disk at its first
			// throttle rule, and counts nothing before: no device listed
			// means no count, not zero bytes.
			s.miss(bytesF, errors.New("blkio.throttle.io_service_bytes lists no device: since Linux 6.9 the v1 "+
				"blkio throttle counters count only on disks with a throttle rule (blkio.throttle.*_device)"))
		default:
			s.set("fs_reads_bytes_total", float64(io.Read))
			s.set("fs_writes_bytes_total", float64(io.Write))
		}
		var t procfs.IOBytes
		for _, f := range []string{"blkio.io_service_time_recursive", "blkio.bfq.io_service_time_recursive"} {
			if t, err = rd.fs.ReadBlkioRWStat(filepath.Join(dir, f)); err == nil && t.Devices > 0 {
				break
			}
		}
		if err != nil || t.Devices == 0 {
			s.miss(secsF, errors.New("no blkio.io_service_time_recursive (needs CFQ, removed in Linux 5.0, or BFQ with CONFIG_BFQ_CGROUP_DEBUG)"))
		} else {
			s.set("fs_read_seconds_total", float64(t.Read)/1e9)
			s.set("fs_write_seconds_total", float64(t.Write)/1e9)
		}
		return
	}
	if s.dirs.v2 != "" {
		io, err := rd.fs.ReadIOStat(filepath.Join(s.dirs.v2, "io.stat"))
		if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("no io.stat: the io controller is not enabled for the container's cgroup")
		}
		if err != nil {
			s.miss(bytesF, err)
		} else {
			s.set("fs_reads_bytes_total", float64(io.Read))
			s.set("fs_writes_bytes_total", float64(io.Write))
		}
	} else {
		s.miss(bytesF, errors.New("no blkio controller mounted"))
	}
	s.miss(secsF, errors.New("cgroup v2 has no per-cgroup I/O service time"))
}

// readNetwork sums the interfaces of the container's network namespace
// but loopback, from /proc/<pid>/net/dev of one of its processes (no
// setns). A container in the host's namespace has no network of its own:
// its row would repeat the host's counters, so it has none.
func (rd *reader) readNetwork(s *sample, pid int) {
	const fields = "network_* (container_network)"
	ns, err := rd.fs.PIDNetNS(pid)
	if err != nil {
		s.miss(fields, err)
		return
	}
	if rd.hostNetNS != "" && ns == rd.hostNetNS {
		s.hostNet = true
		return
	}
	devs, err := rd.fs.PIDNetDev(pid)
	if err != nil {
		s.miss(fields, err)
		return
	}
	var sum procfs.NetDevStats
	for name, d := range devs {
		if name == "lo" {
			continue
		}
		sum.RxBytes += d.RxBytes
		sum.RxErrors += d.RxErrors
		sum.RxDropped += d.RxDropped
		sum.TxBytes += d.TxBytes
		sum.TxErrors += d.TxErrors
		sum.TxDropped += d.TxDropped
	}
	s.set("network_receive_bytes_total", float64(sum.RxBytes))
	s.set("network_receive_errors_total", float64(sum.RxErrors))
	s.set("network_receive_packets_dropped_total", float64(sum.RxDropped))
	s.set("network_transmit_bytes_total", float64(sum.TxBytes))
	s.set("network_transmit_errors_total", float64(sum.TxErrors))
	s.set("network_transmit_packets_dropped_total", float64(sum.TxDropped))
}

// gone reports an error of a process that exited while it was read.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readFiles sums the open descriptors of every process of the container.
func (rd *reader) readFiles(s *sample) {
	if len(s.procs) == 0 {
		return
	}
	total, counted := 0, 0
	for _, pid := range s.procs {
		n, err := rd.fs.PIDFDCount(pid)
		if err != nil {
			if gone(err) {
				continue
			}
			s.miss("file_descriptors", err)
			return
		}
		total += n
		counted++
	}
	if counted > 0 {
		s.set("file_descriptors", float64(total))
	}
}

// readStart is the start of the container's oldest process: btime plus
// its start time in ticks, to the tick (10 ms).
func (rd *reader) readStart(s *sample) {
	var first uint64
	found := false
	for _, pid := range s.procs {
		st, err := rd.fs.PIDStat(pid)
		if err != nil {
			continue
		}
		if !found || st.StartTime < first {
			first, found = st.StartTime, true
		}
	}
	if found {
		s.set("start_time_seconds", float64(rd.bootTime)+float64(first)/procfs.UserHZ)
	}
}

// readCgroupIDs collects the inodes (kernfs ids) of the container's memory
// cgroup directories and cgroup2 directories with their descendants: the
// ids oom.bpf.c records for a victim.
func (rd *reader) readCgroupIDs(s *sample) {
	var dirs []string
	if d, ok := s.dirs.v1["memory"]; ok {
		dirs = append(dirs, d)
	}
	if s.dirs.v2 != "" {
		dirs = append(dirs, s.dirs.v2)
	}
	for _, d := range dirs {
		tree, err := rd.fs.CgroupTree(d, maxCgroupDirs)
		if err != nil {
			continue
		}
		for _, p := range tree {
			fi, err := os.Stat(rd.fs.Path(p))
			if err != nil {
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				s.cgroups = append(s.cgroups, st.Ino)
			}
		}
	}
}
