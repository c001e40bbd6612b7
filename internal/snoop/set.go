package snoop

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/galago-project/galago/internal/identity"
)

// How long a set keeps a member that exited (see Set): ExitGrace for
// Observed and Labels, longer than the longest report period (600 s), so
// the rows a process left in the period it exited in are kept;
// KernelExitGrace in PIDs, for the in-kernel filters, longer than a closed
// socket can linger in FIN_WAIT2 (tcp_fin_timeout, 60 s), so its last
// close is still seen. At most MaxExited are kept (the oldest go first,
// counted by Resolver.ExitedEvicted) and MaxExitedInKernel in PIDs.
const (
	ExitGrace         = identity.DefaultExitGrace
	KernelExitGrace   = 2 * time.Minute
	MaxExited         = 65536
	MaxExitedInKernel = 4096
)

// Set is the live resolution of one probe's selectors; it implements
// Targets. Reads of live members are lock-free.
//
// A member that exits stays a member for a grace period (an exited
// member): data a process leaves behind reaches its probes after it is
// gone (the close of its last connection, the rows of the period it
// exited in), and must be attributed as when it lived: observed in a
// whitelist, excluded in a blacklist.
type Set struct {
	r    *Resolver
	mode Mode
	sel  compiled
	snap atomic.Pointer[snapshot]
	ch   chan struct{}

	// Guarded by r.mu.
	capLogged bool
	closed    bool

	exMu    sync.Mutex
	exited  map[int]exitedMember
	exOrder []exitedRef // exit order (FIFO); stale refs skipped
}

type exitedMember struct {
	label int // index of its proc_name selector, -1 for none
	at    time.Time
}

type exitedRef struct {
	pid int
	at  time.Time
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

// Observed implements Targets. Exited members count for ExitGrace.
func (s *Set) Observed(pid int) bool {
	_, in := s.snap.Load().pids[pid]
	if !in {
		_, in = s.exitedMember(pid)
	}
	return in == (s.mode == Whitelist)
}

// Dynamic reports whether the set follows running processes (proc_name,
// container or pod selectors): a new process may join it at exec.
func (s *Set) Dynamic() bool { return s.sel.dynamic() }

// DecidedAt is when the set's view of pid was last made current (see
// Resolver.DecidedAt).
func (s *Set) DecidedAt(pid int) uint64 { return s.r.DecidedAt(pid) }

// Settled reports whether Observed's answers are final for what processes
// did up to ts (CLOCK_MONOTONIC ns). The kernel observes a new
// process of a dynamic set from its fork or exec until user space has
// classified it, so its data can reach a probe before its fork and exec
// events reach the set: until then Observed says no for a process that is
// about to join. A set that takes no new processes is always settled.
func (s *Set) Settled(ts uint64) bool { return !s.Dynamic() || s.r.settled(ts) }

func (s *Set) exitedMember(pid int) (exitedMember, bool) {
	s.exMu.Lock()
	defer s.exMu.Unlock()
	m, ok := s.exited[pid]
	if ok && s.r.clock().Sub(m.at) > ExitGrace {
		return exitedMember{}, false
	}
	return m, ok
}

// PIDs implements Targets; the slice is the caller's.
func (s *Set) PIDs() []int { return slices.Clone(s.snap.Load().pidList) }

// CgroupIDs implements Targets; the slice is the caller's.
func (s *Set) CgroupIDs() []uint64 { return slices.Clone(s.snap.Load().cgroups) }

// Labels implements Targets. The map is shared and must not be modified.
func (s *Set) Labels(pid int) map[string]string {
	i, ok := s.snap.Load().pids[pid]
	if !ok {
		var m exitedMember
		m, ok = s.exitedMember(pid)
		i = m.label
	}
	if ok && i >= 0 {
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
	containers := map[string]*selContainer{}
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
					c = &selContainer{selected: sel.matchContainer(ct, p.PodID)}
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
	if sel.wantsContainers() {
		s.addLiveContainers(r, containers)
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
	prev := s.snap.Load()
	now := r.clock()
	s.noteExits(r, prev, next, now)
	next.pidList = make([]int, 0, len(next.pids))
	for pid := range next.pids {
		next.pidList = append(next.pidList, pid)
	}
	next.pidList = s.appendRecentExited(next.pidList, next.pids, now)
	slices.Sort(next.pidList)

	if capped && !s.capLogged {
		s.capLogged = true
		r.log.Warn("snoop: selectors resolve to more objects than allowed; the rest are not observed",
			"max", MaxObjects)
	}
	if prev.equal(next) {
		return
	}
	s.snap.Store(next)
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// selContainer is a container of a set being computed: whether the
// selectors select it, and its cgroups.
type selContainer struct {
	selected bool
	cgroups  []uint64
}

// addLiveContainers adds to containers those whose cgroups exist (from
// the cgroup tracepoints, when the identity resolver follows them), with
// no process yet or not: a selected one's cgroups are all observed.
func (s *Set) addLiveContainers(r *Resolver, containers map[string]*selContainer) {
	ct, ok := r.ids.(CgroupTracker)
	if !ok {
		return
	}
	for _, lc := range ct.LiveContainers() {
		c, seen := containers[lc.ID]
		if !seen {
			cont, ok := r.ids.Container(lc.ID)
			if !ok {
				cont = identity.Container{ID: lc.ID}
			}
			c = &selContainer{selected: s.sel.matchContainer(cont, lc.PodID)}
			containers[lc.ID] = c
		}
		if !c.selected {
			continue
		}
		for _, id := range lc.CgroupIDs {
			if !slices.Contains(c.cgroups, id) {
				c.cgroups = append(c.cgroups, id)
			}
		}
	}
}

// equal: the same members (live ones with their labels, exited ones in
// pidList) and cgroups. The live members are compared both ways: a pid
// that is a live member again after being an exited one changes only
// pids, and must be stored (noteExits has already taken it out of the
// exited members).
func (a *snapshot) equal(b *snapshot) bool {
	if len(a.pids) != len(b.pids) || !slices.Equal(a.pidList, b.pidList) || !slices.Equal(a.cgroups, b.cgroups) {
		return false
	}
	for pid, l := range a.pids {
		if lb, ok := b.pids[pid]; !ok || lb != l {
			return false
		}
	}
	return true
}

// noteExits moves the members of prev that are gone from next because
// their process exited (not because it stopped matching) to the exited
// members, and drops exited members that are live members again (a reused
// pid) or past ExitGrace.
func (s *Set) noteExits(r *Resolver, prev, next *snapshot, now time.Time) {
	s.exMu.Lock()
	defer s.exMu.Unlock()
	for pid, label := range prev.pids {
		if _, still := next.pids[pid]; still {
			continue
		}
		if _, live := r.procs[pid]; live {
			continue // no longer matches: not a member any more
		}
		if s.exited == nil {
			s.exited = map[int]exitedMember{}
		}
		s.exited[pid] = exitedMember{label: label, at: now}
		s.exOrder = append(s.exOrder, exitedRef{pid, now})
	}
	for pid := range next.pids {
		delete(s.exited, pid)
	}
	for len(s.exOrder) > 0 {
		ref := s.exOrder[0]
		m, ok := s.exited[ref.pid]
		switch {
		case !ok || !m.at.Equal(ref.at):
			// stale: the pid left the exited members or exited again
		case now.Sub(ref.at) > ExitGrace:
			delete(s.exited, ref.pid)
		case len(s.exited) > MaxExited:
			delete(s.exited, ref.pid)
			r.exitedEvicted.Add(1)
		default:
			return
		}
		s.exOrder = s.exOrder[1:]
	}
	s.exOrder = nil
}

// appendRecentExited adds to pids the exited members younger than
// KernelExitGrace (newest first, at most MaxExitedInKernel) that are not in
// live.
func (s *Set) appendRecentExited(pids []int, live map[int]int, now time.Time) []int {
	s.exMu.Lock()
	defer s.exMu.Unlock()
	n := 0
	for i := len(s.exOrder) - 1; i >= 0 && n < MaxExitedInKernel; i-- {
		ref := s.exOrder[i]
		if now.Sub(ref.at) > KernelExitGrace {
			break
		}
		if m, ok := s.exited[ref.pid]; !ok || !m.at.Equal(ref.at) {
			continue
		}
		if _, ok := live[ref.pid]; ok {
			continue
		}
		pids = append(pids, ref.pid)
		n++
	}
	return pids
}
