package snoop

import (
	"slices"
	"sort"
	"sync/atomic"

	"github.com/galago-project/galago/internal/identity"
)

// Set is the live resolution of one probe's selectors; it implements
// Targets. Reads are lock-free.
type Set struct {
	r    *Resolver
	mode Mode
	sel  compiled
	snap atomic.Pointer[snapshot]
	ch   chan struct{}

	// Guarded by r.mu.
	capLogged bool
	closed    bool
}

var _ Targets = (*Set)(nil)

// snapshot is one immutable resolution.
type snapshot struct {
	pidList []int       // sorted
	pids    map[int]int // pid -> index of its proc_name selector, -1 for none
	cgroups []uint64    // sorted
}

// Mode implements Targets.
func (s *Set) Mode() Mode { return s.mode }

// Observed implements Targets.
func (s *Set) Observed(pid int) bool {
	_, in := s.snap.Load().pids[pid]
	return in == (s.mode == Whitelist)
}

// PIDs implements Targets; the slice is the caller's.
func (s *Set) PIDs() []int { return slices.Clone(s.snap.Load().pidList) }

// CgroupIDs implements Targets; the slice is the caller's.
func (s *Set) CgroupIDs() []uint64 { return slices.Clone(s.snap.Load().cgroups) }

// Labels implements Targets. The map is shared and must not be modified.
func (s *Set) Labels(pid int) map[string]string {
	if i, ok := s.snap.Load().pids[pid]; ok && i >= 0 {
		return s.sel.names[i].label
	}
	return nil
}

// Changed implements Targets.
func (s *Set) Changed() <-chan struct{} { return s.ch }

// Close stops updating the set; it keeps its last resolution.
func (s *Set) Close() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.closed = true
	delete(s.r.sets, s)
}

// updateLocked recomputes the set from the resolver's view of /proc and
// signals Changed if it differs. Objects are capped at MaxObjects, keeping
// in order the listed pids, the selected containers, then the matched
// processes by pid.
func (s *Set) updateLocked(r *Resolver) {
	if s.closed {
		return
	}
	sel := &s.sel
	next := &snapshot{pids: map[int]int{}}
	objects := 0
	capped := false
	add := func(pid, label int) {
		if _, dup := next.pids[pid]; dup {
			return
		}
		if objects >= MaxObjects {
			capped = true
			return
		}
		objects++
		next.pids[pid] = label
	}
	for _, pid := range sel.pids {
		add(pid, -1)
	}

	type match struct{ pid, label int }
	var matched []match
	type container struct {
		selected bool
		cgroups  []uint64
	}
	containers := map[string]*container{}
	if sel.dynamic() {
		for pid, p := range r.procs {
			if p.excluded {
				continue
			}
			label := -1
			if len(sel.names) > 0 {
				label = sel.matchName(&p.Process)
			}
			inContainer := false
			if p.ContainerID != "" && sel.wantsContainers() {
				c, seen := containers[p.ContainerID]
				if !seen {
					ct, ok := r.ids.Container(p.ContainerID)
					if !ok {
						ct = identity.Container{ID: p.ContainerID}
					}
					c = &container{selected: sel.matchContainer(ct, p.PodID)}
					if c.selected && ct.CgroupID != 0 {
						c.cgroups = append(c.cgroups, ct.CgroupID)
					}
					containers[p.ContainerID] = c
				}
				if c.selected {
					inContainer = true
					// A container's processes may sit in several cgroups
					// (sub-cgroups of its own): all are observed.
					if p.CgroupID != 0 && !slices.Contains(c.cgroups, p.CgroupID) {
						c.cgroups = append(c.cgroups, p.CgroupID)
					}
				}
			}
			if label < 0 && !inContainer {
				continue
			}
			matched = append(matched, match{pid, label})
		}
	}
	cids := make([]string, 0, len(containers))
	for id, c := range containers {
		if c.selected {
			cids = append(cids, id)
		}
	}
	slices.Sort(cids)
	for _, id := range cids {
		if objects >= MaxObjects {
			capped = true
			break
		}
		objects++ // a container is one object whatever its cgroups
		next.cgroups = append(next.cgroups, containers[id].cgroups...)
	}
	slices.Sort(next.cgroups)
	next.cgroups = slices.Compact(next.cgroups)
	sort.Slice(matched, func(i, j int) bool { return matched[i].pid < matched[j].pid })
	for _, m := range matched {
		add(m.pid, m.label)
	}
	next.pidList = make([]int, 0, len(next.pids))
	for pid := range next.pids {
		next.pidList = append(next.pidList, pid)
	}
	slices.Sort(next.pidList)

	if capped && !s.capLogged {
		s.capLogged = true
		r.log.Warn("snoop: selectors resolve to more objects than allowed; the rest are not observed",
			"max", MaxObjects)
	}
	if prev := s.snap.Load(); prev.equal(next) {
		return
	}
	s.snap.Store(next)
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

func (a *snapshot) equal(b *snapshot) bool {
	if !slices.Equal(a.pidList, b.pidList) || !slices.Equal(a.cgroups, b.cgroups) {
		return false
	}
	for pid, l := range a.pids {
		if b.pids[pid] != l {
			return false
		}
	}
	return true
}
