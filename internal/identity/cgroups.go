package identity

import (
	"slices"
	"strings"
	"time"
)

// Containers as their cgroups come and go (cgroup_mkdir, cgroup_rmdir).
//
// A runtime makes a container's cgroup directories before the container's
// first process runs in them, in every hierarchy (cgroup2 and, on v1 and
// hybrid hosts, each v1 controller's), and removes them after its last
// process is gone. CgroupChanged follows these: a container is live from
// its first directory to the removal of its last one, whatever the layout
// (the container id is read from the path as for processes: docker,
// containerd, CRI-O, podman, Kubernetes cgroupfs and systemd layouts).

// pendingFor is how long after its first cgroup a container that no
// runtime names yet is looked up again every pendingRetry instead of once
// per missTTL or containerTTL: runc and the runtimes write their state
// and list a container a few milliseconds after making its cgroups.
const (
	pendingFor   = 10 * time.Second
	pendingRetry = 100 * time.Millisecond
)

// CgroupEvent is a cgroup directory made or removed.
type CgroupEvent struct {
	Removed bool
	// Hierarchy is 0 for cgroup2, a v1 hierarchy's id otherwise.
	Hierarchy uint32
	// ID is the directory's kernfs id (its inode): the cgroup2 id that
	// bpf_get_current_cgroup_id returns when Hierarchy is 0.
	ID uint64
	// Path is the cgroup's path in its hierarchy, as /proc/<pid>/cgroup
	// gives it.
	Path string
}

// LiveContainer is a container whose cgroup directories exist.
type LiveContainer struct {
	ID    string
	PodID string
	// CgroupIDs are the cgroup2 ids of its directories (its own, and its
	// sub-cgroups), sorted; empty on a host without cgroup2.
	CgroupIDs []uint64
	// Since is when its first directory was made (seen by ScanCgroups,
	// for a container that existed when galago started).
	Since time.Time
}

type cgroupDir struct {
	hierarchy uint32
	path      string
}

type liveContainer struct {
	podID string
	dirs  map[cgroupDir]uint64
	since time.Time
}

// CgroupChanged records a cgroup directory made or removed. For a
// container's directory it returns the container id and whether the
// container came (its first directory) or went (its last one): a new
// container is known at once (its cgroup ids and pod, and that it exists,
// before any process runs in it), the runtimes are asked for a new
// listing, and its name is looked up again every pendingRetry for
// pendingFor until one is found; a gone container leaves the live set (its
// last answer stays cached, for the rows its processes left). At most the
// container cache's size of containers are live; the others are not
// tracked, counted in LiveDropped.
func (r *CachingResolver) CgroupChanged(ev CgroupEvent) (containerID string, changed bool) {
	cid := ContainerIDFromPath(ev.Path)
	if cid == "" {
		return "", false
	}
	d := cgroupDir{ev.Hierarchy, ev.Path}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.liveSnap = nil
	lc := r.live[cid]
	if ev.Removed {
		if lc == nil {
			return cid, false
		}
		delete(lc.dirs, d)
		if len(lc.dirs) > 0 {
			return cid, false
		}
		delete(r.live, cid)
		return cid, true
	}
	if lc == nil {
		if len(r.live) >= r.maxConts {
			r.liveDropped++
			return cid, false
		}
		lc = &liveContainer{podID: PodIDFromPath(ev.Path), dirs: map[cgroupDir]uint64{}, since: now}
		r.live[cid] = lc
		changed = true
		// Known to exist from now on: a cached "no such container" or a
		// nameless answer is read again.
		r.conts.remove(cid)
		if r.rt != nil {
			r.rt.expect(cid)
		}
	}
	lc.dirs[d] = ev.ID
	// Known to exist (even on a v1-only host, without a cgroup2 id).
	s, _ := r.seen.get(cid)
	if ev.Hierarchy == 0 && (s.cgroupID == 0 || isContainerDir(ev.Path, cid)) {
		s.cgroupID = ev.ID
	}
	if s.podID == "" {
		s.podID = lc.podID
	}
	r.seen.put(cid, s)
	if ev.Hierarchy == 0 {
		r.byCgroup.put(ev.ID, cid)
	}
	return cid, changed
}

// isContainerDir reports whether path is the container's own directory
// (its last segment names it), not a sub-cgroup of it.
func isContainerDir(path, cid string) bool {
	return ContainerIDFromPath(path[strings.LastIndexByte(path, '/')+1:]) == cid
}

// LiveContainers are the containers whose cgroups exist, as CgroupChanged
// saw them come, by id. The slice is shared until the next change (the
// snoopers ask at every process event): callers must not modify it.
func (r *CachingResolver) LiveContainers() []LiveContainer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.liveSnap != nil {
		return r.liveSnap
	}
	out := make([]LiveContainer, 0, len(r.live))
	for id, lc := range r.live {
		c := LiveContainer{ID: id, PodID: lc.podID, Since: lc.since}
		for d, cg := range lc.dirs {
			if d.hierarchy == 0 && cg != 0 {
				c.CgroupIDs = append(c.CgroupIDs, cg)
			}
		}
		slices.Sort(c.CgroupIDs)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b LiveContainer) int { return strings.Compare(a.ID, b.ID) })
	r.liveSnap = out
	return out
}

// LiveDropped is how many containers were not tracked because the live
// set was full.
func (r *CachingResolver) LiveDropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveDropped
}

// pendingLocked reports whether container id came less than pendingFor
// ago: its runtime may not have written or listed it yet.
func (r *CachingResolver) pendingLocked(id string, now time.Time) bool {
	lc := r.live[id]
	return lc != nil && now.Sub(lc.since) < pendingFor
}
