package bpfrttest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
)

// Event is struct bpfrttest_event.
type Event = bpfrttestBpfrttestEvent

// Objects are the loaded maps and programs.
type Objects = bpfrttestObjects

// Spec returns the embedded collection spec.
func Spec() (*ebpf.CollectionSpec, error) { return loadBpfrttest() }

// Resident counts the loaded BPF programs whose name is one of names, and
// the links attached to them: what a start/stop cycle must leave as found.
// Kernel program names are cut to 15 bytes; pass them as the kernel shows them.
func Resident(names ...string) (progs, links int, err error) {
	ids := map[ebpf.ProgramID]bool{}
	var id ebpf.ProgramID
	for {
		id, err = ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		p, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // unloaded meanwhile
		}
		if err != nil {
			return 0, 0, err
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			return 0, 0, err
		}
		if slices.Contains(names, info.Name) {
			ids[id] = true
		}
	}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		l := it.Take()
		info, err := l.Info()
		l.Close()
		if err == nil && ids[info.Program] {
			links++
		}
	}
	return len(ids), links, it.Err()
}

// SelfCgroupID is the cgroup2 id of the calling process: the inode of its
// cgroup2 directory, which bpf_get_current_cgroup_id returns.
func SelfCgroupID() (uint64, error) {
	mnt, err := bpfrt.HaveCgroup2()
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(mnt, rest), &st); err != nil {
				return 0, err
			}
			return st.Ino, nil
		}
	}
	return 0, errors.New("no cgroup2 line in /proc/self/cgroup")
}

// WaitResident polls Resident until it reports wantProgs and wantLinks or
// timeout passes, and returns the last counts. The kernel frees a closed
// link's program after an RCU grace period, so a count can lag a Close.
func WaitResident(timeout time.Duration, wantProgs, wantLinks int, names ...string) (progs, links int, err error) {
	deadline := time.Now().Add(timeout)
	for {
		progs, links, err = Resident(names...)
		if err != nil || (progs == wantProgs && links == wantLinks) || time.Now().After(deadline) {
			return progs, links, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
