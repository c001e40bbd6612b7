package procfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// V1Controllers are the cgroup v1 controller names a "cgroup" mount's super
// options may list; the other options (rw, name=systemd, clone_children,
// ...) are not controllers.
var V1Controllers = []string{
	"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "blkio",
	"perf_event", "net_prio", "hugetlb", "pids", "rdma", "misc",
}

// CgroupMounts says where the cgroup hierarchies are mounted (host paths,
// not under the root): the cgroup2 hierarchy ("" if none) and each mounted
// v1 controller. Unified hosts have only V2, hybrid hosts both, legacy
// hosts only V1.
type CgroupMounts struct {
	V2 string
	V1 map[string]string // controller -> mount point
}

// CgroupMounts finds the cgroup mounts in the host's mount table.
func (fs FS) CgroupMounts() (CgroupMounts, error) {
	ms, err := fs.Mounts()
	if err != nil {
		return CgroupMounts{}, err
	}
	return cgroupMountsOf(ms), nil
}

// cgroupMountsOf picks the cgroup mounts of a mount table. A hierarchy
// mounted twice keeps its first mount point, and only mounts of the
// hierarchy's root count (a bind mount of a sub-cgroup is not one).
func cgroupMountsOf(ms []Mount) CgroupMounts {
	out := CgroupMounts{V1: map[string]string{}}
	for _, m := range ms {
		if m.Root != "/" {
			continue
		}
		switch m.FSType {
		case "cgroup2":
			if out.V2 == "" {
				out.V2 = m.MountPoint
			}
		case "cgroup":
			for _, o := range m.SuperOptions {
				if slices.Contains(V1Controllers, o) {
					if _, ok := out.V1[o]; !ok {
						out.V1[o] = m.MountPoint
					}
				}
			}
		}
	}
	return out
}

// ParseFlatKeyed parses a cgroup "flat keyed" file: one "key value" pair a
// line (memory.stat, cpu.stat, cpuacct.stat, memory.events,
// memory.oom_control). Lines whose value is not an unsigned integer are
// skipped.
func ParseFlatKeyed(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	s := newScanner(r)
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		out[k] = n
	}
	return out, s.Err()
}

// ReadFlatKeyed reads a flat keyed cgroup file (an absolute host path,
// read under the root).
func (fs FS) ReadFlatKeyed(p string) (map[string]uint64, error) {
	return parseFile(fs.Path(p), ParseFlatKeyed)
}

// ReadCgroupUint reads a cgroup file holding one integer (memory.current,
// memory.usage_in_bytes, cpuacct.usage).
func (fs FS) ReadCgroupUint(p string) (uint64, error) { return readUint(fs.Path(p)) }

// IOBytes are the bytes a cgroup read from and wrote to block devices, and
// how many devices the file listed.
type IOBytes struct {
	Read, Write uint64
	Devices     int
}

// ParseBlkioRWStat parses a cgroup v1 blkio "rwstat" file
// (blkio.throttle.io_service_bytes_recursive and the like): lines
// "<maj>:<min> <Read|Write|Sync|Async|Discard|Total> <n>" and a final
// "Total <n>". It sums Read and Write over the devices.
func ParseBlkioRWStat(r io.Reader) (IOBytes, error) {
	var out IOBytes
	s := newScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) != 3 {
			continue
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return IOBytes{}, fmt.Errorf("bad value in %q", s.Text())
		}
		if f[1] == "Total" {
			out.Devices++ // each device's block ends with its Total line
		}
		switch f[1] {
		case "Read":
			out.Read += n
		case "Write":
			out.Write += n
		}
	}
	return out, s.Err()
}

// ParseIOStat parses cgroup v2 io.stat: lines "<maj>:<min> rbytes=N
// wbytes=N rios=N wios=N dbytes=N dios=N". It sums rbytes and wbytes over
// the devices.
func ParseIOStat(r io.Reader) (IOBytes, error) {
	var out IOBytes
	s := newScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) > 1 {
			out.Devices++
		}
		for _, kv := range f[min(1, len(f)):] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return IOBytes{}, fmt.Errorf("bad value in %q", s.Text())
			}
			switch k {
			case "rbytes":
				out.Read += n
			case "wbytes":
				out.Write += n
			}
		}
	}
	return out, s.Err()
}

// ReadBlkioRWStat and ReadIOStat read those files (absolute host paths).
func (fs FS) ReadBlkioRWStat(p string) (IOBytes, error) {
	return parseFile(fs.Path(p), ParseBlkioRWStat)
}

// ReadIOStat reads a cgroup v2 io.stat.
func (fs FS) ReadIOStat(p string) (IOBytes, error) { return parseFile(fs.Path(p), ParseIOStat) }

// CgroupTree lists a cgroup directory (an absolute host path) and its
// descendants, depth first, the directory itself first. At most max
// directories are listed.
func (fs FS) CgroupTree(dir string, max int) ([]string, error) {
	var out []string
	errMax := errors.New("max")
	root := fs.Path(dir)
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if p != root && errors.Is(err, iofs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if len(out) >= max {
			return errMax
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.Join(dir, rel))
		return nil
	})
	if errors.Is(err, errMax) {
		err = nil
	}
	return out, err
}

// CgroupProcs reads cgroup.procs of a cgroup directory (an absolute host
// path): the pids of its processes, not of its descendants'.
func (fs FS) CgroupProcs(dir string) ([]int, error) { return fs.cgroupIDList(dir, "cgroup.procs") }

// CgroupThreads reads the thread ids of a cgroup directory's own tasks:
// cgroup.threads on cgroup2, tasks on v1.
func (fs FS) CgroupThreads(dir string, v2 bool) ([]int, error) {
	if v2 {
		return fs.cgroupIDList(dir, "cgroup.threads")
	}
	return fs.cgroupIDList(dir, "tasks")
}

func (fs FS) cgroupIDList(dir, file string) ([]int, error) {
	b, err := os.ReadFile(fs.Path(filepath.Join(dir, file)))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(l)
		if err != nil {
			return nil, fmt.Errorf("%s: bad pid %q", dir, l)
		}
		out = append(out, pid)
	}
	return out, nil
}

// PIDNetDev reads /proc/<pid>/net/dev: the interfaces of the network
// namespace pid runs in, by name.
func (fs FS) PIDNetDev(pid int) (map[string]NetDevStats, error) {
	return parseFile(fs.pid(pid, "net/dev"), ParseNetDev)
}

// ParseNetDev parses /proc/net/dev: two header lines, then
// "<iface>: rx bytes packets errs drop fifo frame compressed multicast
// tx bytes packets errs drop fifo colls carrier compressed".
func ParseNetDev(r io.Reader) (map[string]NetDevStats, error) {
	out := map[string]NetDevStats{}
	s := newScanner(r)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("too few fields in %q", s.Text())
		}
		v, err := parseUints(f[:16])
		if err != nil {
			return nil, fmt.Errorf("bad counter in %q: %w", s.Text(), err)
		}
		out[strings.TrimSpace(name)] = NetDevStats{
			RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[8], TxPackets: v[9], TxErrors: v[10], TxDropped: v[11],
		}
	}
	return out, s.Err()
}

// PIDNetNS returns the network namespace of pid as the target of
// /proc/<pid>/ns/net ("net:[4026531840]").
func (fs FS) PIDNetNS(pid int) (string, error) { return os.Readlink(fs.pid(pid, "ns/net")) }
