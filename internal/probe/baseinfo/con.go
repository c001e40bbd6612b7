package baseinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/table"
)

var conF = struct{ id, dir, writeRate int }{
	id: table.SystemConIo.MustIndex("container_id"), dir: table.SystemConIo.MustIndex("dir"),
	writeRate: table.SystemConIo.MustIndex("write_rate"),
}

// maxDirEntries bounds the walk of one container directory per period.
const maxDirEntries = 200000

type conKey struct{ id, dir string }

// conCollector fills system_con_io. Like gala-gopher (`du -sb
// <container root>/<elf_path>` each period) it measures how fast the
// apparent size of the directory elf_path inside each observed container
// grows, in bytes per second. That is net growth, not bytes written:
// overwrites in place and writes to files deleted within the period are
// not seen, and a shrinking directory reports 0.
type conCollector struct {
	resolver identity.Resolver
	// dirSize measures a directory inside a process's root (tests replace it).
	dirSize func(procRoot, dir string) (uint64, error)
	prev    map[conKey]uint64
	prevT   time.Time
}

func (cc *conCollector) forget() { cc.prev = nil }

func (cc *conCollector) sample(c *cycle) {
	if cc.resolver == nil {
		c.unmeasured("con.resolver", "system_con_io", errors.New("no container identity resolver is wired into the probe"))
		return
	}
	dir := c.cfg.Params.ElfPath
	if dir == "" {
		c.unmeasured("con.dir", "system_con_io", errors.New("elf_path, the directory to watch inside the containers, is empty"))
		cc.prev = nil
		return
	}
	pids, err := observedPIDs(c)
	if err != nil {
		c.failed("con.list", "system_con_io", err)
		cc.prev = nil
		return
	}
	// One process per container is enough to reach its root: the lowest pid.
	roots := map[string]int{}
	for _, pid := range pids {
		p, ok := cc.resolver.Process(pid)
		if !ok || p.ContainerID == "" {
			continue
		}
		if cur, seen := roots[p.ContainerID]; !seen || pid < cur {
			roots[p.ContainerID] = pid
		}
	}
	size := cc.dirSize
	if size == nil {
		size = containerDirSize
	}
	cur := map[conKey]uint64{}
	for id, pid := range roots {
		n, err := size(c.fs.Path("/proc/"+strconv.Itoa(pid)+"/root"), dir)
		if err != nil {
			c.warnOnce("con.size."+id, "baseinfo: system_con_io skips a container", "container_id", id, "dir", dir, "err", err)
			continue
		}
		cur[conKey{id, dir}] = n
	}
	if c.emit && cc.prev != nil {
		elapsed := c.now.Sub(cc.prevT)
		for k, n := range cur {
			p, ok := cc.prev[k]
			if !ok || elapsed <= 0 {
				continue
			}
			r := table.SystemConIo.NewRecord(c.now, elapsed)
			r.SetStr(conF.id, k.id)
			r.SetStr(conF.dir, k.dir)
			r.SetNum(conF.writeRate, float64(delta(n, p))/elapsed.Seconds())
			c.rt.Record(r)
		}
	}
	cc.prev, cc.prevT = cur, c.now
}

var errTooManyEntries = fmt.Errorf("more than %d entries", maxDirEntries)

// containerDirSize is `du -sb` of dir resolved inside the root procRoot
// (/proc/<pid>/root): symlinks in dir resolve within the container
// (openat2 RESOLVE_IN_ROOT), entries are counted by apparent size,
// directories included, hard links once, symlinks not followed.
func containerDirSize(procRoot, dir string) (uint64, error) {
	rootFD, err := unix.Open(procRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", procRoot, err)
	}
	defer unix.Close(rootFD)
	fd, err := unix.Openat2(rootFD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return 0, fmt.Errorf("open %s in %s: %w", dir, procRoot, err)
	}
	defer unix.Close(fd)
	// Walk through our own descriptor; the trailing slash makes the walk
	// start at the directory the magic link points to.
	return dirSize("/proc/self/fd/" + strconv.Itoa(fd) + "/")
}

// dirSize sums the apparent sizes under root like `du -sb`.
func dirSize(root string) (uint64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total uint64
	entries := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > maxDirEntries {
			return errTooManyEntries
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !info.IsDir() {
			k := inode{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += uint64(info.Size())
		return nil
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}
