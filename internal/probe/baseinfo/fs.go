package baseinfo

import (
	"fmt"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var dfF = struct {
	mountOn, status, fsname, fstype, inodes, iused, ifree, iusePer int
	blocks, used, free, usePer                                     int
}{
	mountOn: table.SystemDf.MustIndex("MountOn"), status: table.SystemDf.MustIndex("MountStatus"),
	fsname: table.SystemDf.MustIndex("Fsname"), fstype: table.SystemDf.MustIndex("Fstype"),
	inodes: table.SystemDf.MustIndex("Inodes"), iused: table.SystemDf.MustIndex("IUsed"),
	ifree: table.SystemDf.MustIndex("IFree"), iusePer: table.SystemDf.MustIndex("IUsePer"),
	blocks: table.SystemDf.MustIndex("Blocks"), used: table.SystemDf.MustIndex("Used"),
	free: table.SystemDf.MustIndex("Free"), usePer: table.SystemDf.MustIndex("UsePer"),
}

// dummyFSTypes are the pseudo filesystems GNU df leaves out of its default
// listing (coreutils' ME_DUMMY list); df also drops anything with zero
// blocks, which covers cgroup, bpf, tracefs and the like.
var dummyFSTypes = map[string]bool{
	"autofs": true, "proc": true, "subfs": true, "debugfs": true, "devpts": true, "fusectl": true,
	"fuse.portal": true, "mqueue": true, "rpc_pipefs": true, "sysfs": true, "devfs": true,
	"kernfs": true, "ignore": true, "none": true, "binfmt_misc": true, "nsfs": true, "rootfs": true,
}

// statfsTimeout bounds the statfs calls of one period: a hung network
// filesystem must not stall the probe.
const statfsTimeout = 5 * time.Second

// fsCollector fills system_df as `df -T` and `df -T -i` would list the
// mounts: one record per real mounted filesystem, from the mount table and
// statfs(2). Values are levels at the end of the period.
type fsCollector struct {
	statfs  func(fs procfs.FS, mountPoint string) (procfs.FSUsage, error)
	timeout time.Duration

	mu   sync.Mutex
	hung map[string]bool // mount points whose statfs is in flight
}

func newFSCollector() *fsCollector {
	return &fsCollector{
		statfs:  func(fs procfs.FS, mp string) (procfs.FSUsage, error) { return fs.Statfs(mp) },
		timeout: statfsTimeout,
		hung:    map[string]bool{},
	}
}

func (*fsCollector) forget() {}

// dfMounts picks the mounts df shows by default: no pseudo filesystems, for
// a mount point mounted over several times only the topmost, and for a
// filesystem mounted in several places only the shortest mount point.
func dfMounts(all []procfs.Mount) []procfs.Mount {
	top := map[string]int{} // mount point -> index of the last (topmost) mount
	for i, m := range all {
		if !dummyFSTypes[m.FSType] {
			top[m.MountPoint] = i
		}
	}
	type devKey struct{ major, minor uint32 }
	best := map[devKey]int{}
	for i, m := range all {
		if dummyFSTypes[m.FSType] || top[m.MountPoint] != i {
			continue
		}
		k := devKey{m.Major, m.Minor}
		if j, ok := best[k]; !ok || len(m.MountPoint) < len(all[j].MountPoint) {
			best[k] = i
		}
	}
	var out []procfs.Mount
	for i, m := range all {
		if j, ok := best[devKey{m.Major, m.Minor}]; ok && j == i {
			out = append(out, m)
		}
	}
	return out
}

// statAll runs statfs on every mount point at once, waiting at most
// fc.timeout in all. A mount point whose call from an earlier period has
// not returned yet is skipped rather than asked again.
func (fc *fsCollector) statAll(fs procfs.FS, mps []string) []statResult {
	type indexed struct {
		i int
		r statResult
	}
	out := make([]statResult, len(mps))
	got := make([]bool, len(mps))
	ch := make(chan indexed, len(mps))
	pending := 0
	for i, mp := range mps {
		fc.mu.Lock()
		busy := fc.hung[mp]
		fc.hung[mp] = true
		fc.mu.Unlock()
		if busy {
			out[i], got[i] = statResult{err: fmt.Errorf("statfs %s still blocked since an earlier period", mp)}, true
			continue
		}
		pending++
		go func() {
			u, err := fc.statfs(fs, mp)
			// no longer in flight before the result is handed over: a
			// period that got every result finds no mount still marked
			fc.mu.Lock()
			delete(fc.hung, mp)
			fc.mu.Unlock()
			ch <- indexed{i, statResult{u, err}}
		}()
	}
	timeout := time.NewTimer(fc.timeout)
	defer timeout.Stop()
	for pending > 0 {
		select {
		case r := <-ch:
			out[r.i], got[r.i] = r.r, true
			pending--
		case <-timeout.C:
			for i, mp := range mps {
				if !got[i] {
					out[i] = statResult{err: fmt.Errorf("statfs %s blocked for more than %v", mp, fc.timeout)}
				}
			}
			pending = 0
		}
	}
	return out
}

type statResult struct {
	u   procfs.FSUsage
	err error
}

// dfPercent is df's Use%: used/(used+avail) rounded up; ok is false where
// df prints "-".
func dfPercent(used, avail uint64) (float64, bool) {
	total := used + avail
	if total == 0 {
		return 0, false
	}
	pct := used * 100 / total
	if used*100%total != 0 {
		pct++
	}
	return float64(pct), true
}

// toKB converts n blocks of size bytes into 1K-blocks, rounding up as df does.
func toKB(n, size uint64) uint64 { return (n*size + 1023) / 1024 }

func (fc *fsCollector) sample(c *cycle) {
	mounts, err := c.fs.Mounts()
	if err != nil {
		c.failed("fs.mounts", "system_df", err)
		return
	}
	if !c.emit {
		return // levels only: nothing to take a baseline of
	}
	mounts = dfMounts(mounts)
	mps := make([]string, len(mounts))
	for i, m := range mounts {
		mps[i] = m.MountPoint
	}
	for i, r := range fc.statAll(c.fs, mps) {
		if r.err != nil {
			c.rt.Error()
			c.warnOnce("fs.statfs."+mps[i], "baseinfo: system_df skips a mount", "mount", mps[i], "err", r.err)
			continue
		}
		if r.u.Blocks == 0 {
			continue // df hides filesystems without blocks
		}
		reportDF(c, mounts[i], r.u)
	}
}

func reportDF(c *cycle, m procfs.Mount, u procfs.FSUsage) {
	r := table.SystemDf.NewRecord(c.now, c.period)
	r.SetStr(dfF.mountOn, m.MountPoint)
	status := "RW"
	if m.ReadOnly() {
		status = "RO"
	}
	r.SetStr(dfF.status, status)
	r.SetStr(dfF.fsname, m.Source)
	r.SetStr(dfF.fstype, m.FSType)
	r.SetStr(dfF.inodes, fmt.Sprint(u.Files))
	iused := delta(u.Files, u.FilesFree)
	r.SetNum(dfF.iused, float64(iused))
	r.SetNum(dfF.ifree, float64(u.FilesFree))
	iusePer, iOK := dfPercent(iused, u.FilesFree)
	if iOK {
		r.SetNum(dfF.iusePer, iusePer)
	}
	bs := u.FragmentSize
	usedBlocks := delta(u.Blocks, u.BlocksFree)
	r.SetStr(dfF.blocks, fmt.Sprint(toKB(u.Blocks, bs)))
	r.SetNum(dfF.used, float64(toKB(usedBlocks, bs)))
	r.SetNum(dfF.free, float64(toKB(u.BlocksAvail, bs)))
	usePer, bOK := dfPercent(usedBlocks, u.BlocksAvail)
	if bOK {
		r.SetNum(dfF.usePer, usePer)
	}
	c.rt.Record(r)

	if thr, on := c.upperThr(); on {
		if iOK && iusePer > thr {
			c.event(event.FSIUsePer, m.MountPoint, "", int(iusePer))
		}
		if bOK && usePer > thr {
			c.event(event.FSUsePer, m.MountPoint, "", int(usePer))
		}
	}
}
