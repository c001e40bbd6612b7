package identity

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
	"syscall"

	"github.com/galago-project/galago/internal/procfs"
)

// ScanCgroups lists the cgroup directories of the containers that exist
// now, in every cgroup hierarchy mounted on the host under root (cgroup2,
// hierarchy 0, on unified and hybrid hosts; each v1 hierarchy, named ones
// too, by the id the host's init process's /proc/1/cgroup gives it), as
// the cgroup_mkdir tracepoint would have said them when they were made:
// fed to CgroupChanged at start, containers that existed before galago
// are live exactly as those made after. A v1 hierarchy whose id is not
// found is skipped (its directories would never match their rmdir
// events); a directory removed during the walk is skipped.
func ScanCgroups(root string) ([]CgroupEvent, error) {
	fs := procfs.FS{Root: root}
	ms, err := fs.Mounts()
	if err != nil {
		return nil, fmt.Errorf("identity: cgroup scan: %w", err)
	}
	ids, err := readHierarchyIDs(fs.Path("/proc/1/cgroup"))
	if err != nil {
		return nil, fmt.Errorf("identity: cgroup scan: %w", err)
	}
	var out []CgroupEvent
	var errs []error
	seen := map[uint32]bool{}
	for _, m := range ms {
		if m.Root != "/" {
			continue // a bind mount of a sub-cgroup
		}
		var hier uint32
		switch m.FSType {
		case "cgroup2":
		case "cgroup":
			id, ok := ids[hierarchyKey(m.SuperOptions)]
			if !ok {
				continue
			}
			hier = id
		default:
			continue
		}
		if seen[hier] {
			continue // mounted twice
		}
		seen[hier] = true
		if err := walkCgroups(fs.Path(m.MountPoint), "/", hier, &out); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// walkCgroups adds the container directories under dir (path in its
// hierarchy) to out.
func walkCgroups(dir, path string, hier uint32, out *[]CgroupEvent) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("identity: cgroup scan: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub, subPath := filepath.Join(dir, e.Name()), filepath.Join(path, e.Name())
		if ContainerIDFromPath(subPath) != "" {
			fi, err := e.Info()
			if err != nil {
				continue // removed since
			}
			var ino uint64
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				ino = st.Ino
			}
			*out = append(*out, CgroupEvent{Hierarchy: hier, ID: ino, Path: subPath})
		}
		if err := walkCgroups(sub, subPath, hier, out); err != nil {
			return err
		}
	}
	return nil
}

// hierarchyKey names a v1 hierarchy by its controllers and name= option,
// sorted: "cpu,cpuacct", "name=systemd".
func hierarchyKey(opts []string) string {
	var k []string
	for _, o := range opts {
		if slices.Contains(procfs.V1Controllers, o) || strings.HasPrefix(o, "name=") {
			k = append(k, o)
		}
	}
	slices.Sort(k)
	return strings.Join(k, ",")
}

// readHierarchyIDs reads a /proc/<pid>/cgroup file: v1 hierarchy ids by
// hierarchyKey.
func readHierarchyIDs(p string) (map[string]uint32, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseHierarchyIDs(f)
}

// parseHierarchyIDs parses "id:controllers:path" lines; the cgroup2 line
// (id 0, no controllers) is not a v1 hierarchy.
func parseHierarchyIDs(r io.Reader) (map[string]uint32, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out := map[string]uint32{}
	for _, line := range strings.Split(string(b), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, _, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("bad cgroup line %q", line)
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad cgroup line %q", line)
		}
		if n == 0 || ctrls == "" {
			continue
		}
		out[hierarchyKey(strings.Split(ctrls, ","))] = uint32(n)
	}
	return out, nil
}
