package snoop

import (
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/procfs"
)

// ScanInterval is how often /proc is re-read while a set has proc_name,
// container or pod selectors, so a process that starts after a PUT is
// picked up well within a second.
const ScanInterval = 250 * time.Millisecond

// maxAncestry bounds the parent walk that finds galago's descendants.
const maxAncestry = 64

// A scan reads /proc/<pid>/stat (through the identity cache) only for
// processes that are new, younger than youngFor (a fork is often followed
// by an exec that changes the comm), or not checked for recheckEvery. Other
// processes keep what the last read found, so a steady host costs a readdir
// of /proc and a few reads per scan. An old process that exec's into a
// matching program is thus seen within recheckEvery, or at once when the
// process lifecycle tracker calls Notify.
const (
	youngFor     = 2 * time.Second
	recheckEvery = 5 * time.Second
)

// Resolver turns selectors into live sets of processes and cgroups. One
// Resolver serves every probe: it keeps one view of /proc, re-read at most
// every ScanInterval while some set needs it, and recomputes each set from
// it. Process lifecycle events (Notify, NotifyExit) update the sets at once
// instead of waiting for the next scan.
//
// galago itself (pid self) and its descendants never match proc_name,
// container or pod selectors, as gala-gopher excludes its own processes;
// listed proc_ids are taken as given. Where this differs from gala-gopher:
// container_name is matched exactly against the runtime's name (gala-gopher
// asks `docker ps --filter name=`, an unanchored match, and only works with
// docker); a proc_name with an empty comm but a cmdline matches by cmdline
// alone (gala-gopher ignores it); zombies count as exited.
type Resolver struct {
	fs       procfs.FS
	ids      identity.Resolver
	self     int
	log      *slog.Logger
	interval time.Duration
	young    time.Duration // youngFor
	recheck  time.Duration // recheckEvery

	mu        sync.Mutex
	sets      map[*Set]struct{}
	procs     map[int]*proc // the live processes: the last scan of /proc plus lifecycle events
	gone      map[int]goneProc
	goneOrder []goneRef
	now       atomic.Pointer[func() time.Time] // exits and grace periods; nil: time.Now (tests set it)
	// handled says as of when every lifecycle event has been notified
	// (SetHandledThrough); nil: not known.
	handled atomic.Pointer[func() uint64]
	// exitedEvicted counts exited set members dropped before ExitGrace
	// because a set held MaxExited of them.
	exitedEvicted atomic.Uint64
	lastScan      time.Time
	running       bool // the scan loop runs
	closed        bool
	wake          chan struct{}
	stop          chan struct{}
	done          chan struct{}
}

type proc struct {
	identity.Process
	excluded  bool      // galago or one of its descendants
	firstSeen time.Time // when this process (pid and start time) was first read
	checked   time.Time // when /proc/<pid>/stat was last read
	// decided is CLOCK_MONOTONIC (ns) taken just before the identity this
	// classification used was read: it reflects every exec before it.
	decided uint64
}

// goneProc is a process the resolver saw exit.
type goneProc struct {
	decided uint64
	at      time.Time
}

// goneFor is how long an exited process's classification time is kept
// (for DecidedSince); the sets keep their own exited members longer.
const goneFor = time.Minute

// NewResolver returns a Resolver reading root's /proc. self is galago's pid
// (0 excludes nothing); log may be nil.
func NewResolver(root string, ids identity.Resolver, self int, log *slog.Logger) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Resolver{
		fs: procfs.FS{Root: root}, ids: ids, self: self, log: log,
		interval: ScanInterval, young: youngFor, recheck: recheckEvery,
		sets:  map[*Set]struct{}{},
		procs: map[int]*proc{},
		gone:  map[int]goneProc{},
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// Watch resolves sel and keeps the returned set current until it is
// closed. sel must have passed Validate; a comm that does not compile
// matches nothing.
func (r *Resolver) Watch(sel Selectors, mode Mode) *Set {
	s := &Set{r: r, mode: mode, sel: compile(sel), ch: make(chan struct{}, 1)}
	s.snap.Store(&snapshot{})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets[s] = struct{}{}
	if s.sel.dynamic() {
		if time.Since(r.lastScan) >= r.interval {
			r.scanLocked()
		}
		if !r.running && !r.closed {
			r.running = true
			go r.loop()
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	s.updateLocked(r)
	return s
}

// Learner is implemented by identity resolvers that can record what a
// process lifecycle event says of a process (identity.CachingResolver).
type Learner interface {
	Learn(p identity.Process)
	Exit(pid int)
}

// Notify tells the resolver that a process started or exec'd (from the
// process lifecycle tracepoints), so sets pick it up before the next scan.
// ev carries what the event knew (PID required; comm, cmdline, start time,
// parent and cgroup id when the event has them): a process that has
// already exited when Notify runs is classified from it, and sets that
// match it keep it as an exited member.
func (r *Resolver) Notify(ev identity.Process) {
	if l, ok := r.ids.(Learner); ok && ev.Comm != "" {
		l.Learn(ev)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dynamicLocked() {
		return
	}
	pid := ev.PID
	t0 := monoNow()
	p, ok := r.ids.Process(pid)
	if !ok {
		r.exitLocked(pid, t0)
		return
	}
	now := time.Now()
	r.procs[pid] = &proc{Process: p, excluded: r.excludedIn(r.procs, p), firstSeen: now, checked: now, decided: t0}
	delete(r.gone, pid)
	r.updateAllLocked()
	if p.Exited {
		r.exitLocked(pid, t0)
	}
}

// CgroupTracker is implemented by identity resolvers that follow
// containers' cgroups as they are made and removed
// (identity.CachingResolver).
type CgroupTracker interface {
	CgroupChanged(ev identity.CgroupEvent) (containerID string, changed bool)
	LiveContainers() []identity.LiveContainer
}

// NotifyCgroup tells the resolver that a cgroup directory was made or
// removed (from the cgroup_mkdir and cgroup_rmdir tracepoints): a
// container that container or pod selectors select is in their sets (its
// cgroup ids, so the probes' kernel filters) from its first cgroup, before
// its first process runs, and leaves them when its last cgroup goes.
func (r *Resolver) NotifyCgroup(ev identity.CgroupEvent) {
	ct, ok := r.ids.(CgroupTracker)
	if !ok {
		return
	}
	if cid, _ := ct.CgroupChanged(ev); cid == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.sets {
		if s.sel.wantsContainers() {
			s.updateLocked(r)
		}
	}
}

// NotifyExit tells the resolver that pid exited.
func (r *Resolver) NotifyExit(pid int) {
	if l, ok := r.ids.(Learner); ok {
		l.Exit(pid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dynamicLocked() {
		return
	}
	r.exitLocked(pid, monoNow())
}

// exitLocked removes pid from the live processes; sets it belonged to keep
// it as an exited member. decided is used when the pid was never live.
func (r *Resolver) exitLocked(pid int, decided uint64) {
	p, ok := r.procs[pid]
	if ok {
		decided = p.decided
		delete(r.procs, pid)
	}
	r.addGoneLocked(pid, decided, r.clock())
	if ok {
		r.updateAllLocked()
	}
}

// maxGone bounds the exited processes remembered for DecidedSince; past
// it the oldest go first (a forgotten one only delays the removal of a
// pending in-kernel entry, which FilterSync ages out anyway).
const maxGone = 16384

type goneRef struct {
	pid int
	at  time.Time
}

// pruneGoneLocked forgets exited processes older than goneFor, and the
// oldest beyond maxGone, in exit order (goneOrder is a FIFO whose stale
// entries, for pids that exited again since, are skipped).
func (r *Resolver) pruneGoneLocked(now time.Time) {
	for len(r.goneOrder) > 0 {
		ref := r.goneOrder[0]
		g, ok := r.gone[ref.pid]
		if ok && !g.at.Equal(ref.at) {
			r.goneOrder = r.goneOrder[1:] // stale: the pid exited again later
			continue
		}
		if ok && now.Sub(ref.at) <= goneFor && len(r.gone) < maxGone {
			break
		}
		delete(r.gone, ref.pid)
		r.goneOrder = r.goneOrder[1:]
	}
	if len(r.goneOrder) == 0 {
		r.goneOrder = nil // release the backing array
	}
}

func (r *Resolver) addGoneLocked(pid int, decided uint64, now time.Time) {
	r.pruneGoneLocked(now)
	r.gone[pid] = goneProc{decided: decided, at: now}
	r.goneOrder = append(r.goneOrder, goneRef{pid, now})
}

// clock is time.Now unless a test set now.
func (r *Resolver) clock() time.Time {
	if now := r.now.Load(); now != nil {
		return (*now)()
	}
	return time.Now()
}

// ExitedEvicted is how many exited set members were dropped before
// ExitGrace because a set held MaxExited of them: rows they left after
// that are no longer attributed (a whitelist drops them).
func (r *Resolver) ExitedEvicted() uint64 { return r.exitedEvicted.Load() }

// DecidedAt is the CLOCK_MONOTONIC time (ns) as of which the resolver's
// classification of pid is current (its identity was read after every exec
// before it): 0 for a pid the resolver has not seen, math.MaxUint64 for one
// that has exited.
func (r *Resolver) DecidedAt(pid int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.procs[pid]; ok {
		return p.decided
	}
	if _, gone := r.gone[pid]; gone {
		return math.MaxUint64
	}
	return 0
}

// SetHandledThrough tells the resolver where its lifecycle events come
// from: fn returns the CLOCK_MONOTONIC time (ns) as of which every fork
// and exec has been passed to Notify (proctrack.Tracker.HandledThrough).
// Without it, every set is always settled (Set.Settled).
func (r *Resolver) SetHandledThrough(fn func() uint64) { r.handled.Store(&fn) }

// settled reports whether the classifications are final for what
// processes did up to ts (CLOCK_MONOTONIC ns): every lifecycle event
// before ts has been notified. A classification made after ts is not
// enough: the identity cache answers for a process from its last fork or
// exec event seen, and a set classifies a process that has exited from
// the events notified so far, so until its exec is notified a new process
// reads as its parent. Without a lifecycle source everything is settled:
// nothing would ever make a classification more current than the /proc
// scan.
func (r *Resolver) settled(ts uint64) bool {
	fn := r.handled.Load()
	return fn == nil || (*fn)() >= ts
}

func monoNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Close stops the scan loop. Sets keep their last state.
func (r *Resolver) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	running := r.running
	close(r.stop)
	r.mu.Unlock()
	if running {
		<-r.done
	}
}

func (r *Resolver) dynamicLocked() bool {
	for s := range r.sets {
		if s.sel.dynamic() {
			return true
		}
	}
	return false
}

// loop re-scans /proc every interval while a set needs it, and sleeps on
// wake otherwise.
func (r *Resolver) loop() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.mu.Lock()
		dynamic := r.dynamicLocked()
		if dynamic && time.Since(r.lastScan) >= r.interval*9/10 {
			r.scanLocked()
			r.updateAllLocked()
		}
		r.mu.Unlock()
		if dynamic {
			select {
			case <-t.C:
			case <-r.stop:
				return
			}
			continue
		}
		select {
		case <-r.wake:
		case <-r.stop:
			return
		}
	}
}

// scanLocked lists /proc and reads the processes that need it (see
// youngFor) through the identity resolver, whose cache makes a known,
// unchanged process one read of /proc/<pid>/stat.
func (r *Resolver) scanLocked() {
	pids, err := r.fs.PIDs()
	if err != nil {
		r.log.Warn("snoop: cannot list processes", "err", err)
		return
	}
	now := time.Now()
	t0 := monoNow()
	procs := make(map[int]*proc, len(pids))
	for _, pid := range pids {
		old := r.procs[pid]
		if old != nil && now.Sub(old.firstSeen) >= r.young && now.Sub(old.checked) < r.recheck {
			procs[pid] = old
			continue
		}
		p, ok := r.ids.Process(pid)
		if !ok || p.Exited {
			continue
		}
		np := &proc{Process: p, firstSeen: now, checked: now, decided: t0}
		if old != nil && old.StartTime == p.StartTime {
			np.firstSeen = old.firstSeen
		}
		procs[pid] = np
	}
	for _, p := range procs {
		p.excluded = r.excludedIn(procs, p.Process)
	}
	for pid, p := range r.procs {
		if _, ok := procs[pid]; !ok {
			r.addGoneLocked(pid, p.decided, now)
		}
	}
	r.pruneGoneLocked(now)
	r.procs = procs
	r.lastScan = now
}

// excludedIn reports whether p is galago or descends from it, walking the
// parents recorded in procs.
func (r *Resolver) excludedIn(procs map[int]*proc, p identity.Process) bool {
	if r.self <= 0 {
		return false
	}
	pid, ppid := p.PID, p.PPID
	for i := 0; i < maxAncestry; i++ {
		if pid == r.self {
			return true
		}
		if ppid <= 1 {
			return false
		}
		parent, ok := procs[ppid]
		if !ok {
			return ppid == r.self
		}
		pid, ppid = parent.PID, parent.PPID
	}
	return false
}

func (r *Resolver) updateAllLocked() {
	for s := range r.sets {
		if s.sel.dynamic() {
			s.updateLocked(r)
		}
	}
}

// compiled is a validated, ready-to-match selector list.
type compiled struct {
	pids           []int
	names          []nameSel
	podIDs         []string
	containerIDs   []string
	containerNames []string
}

type nameSel struct {
	comm    *regexp.Regexp // nil: any comm (only cmdline given)
	cmdline string
	label   map[string]string
	// memo caches the comm regexp's answer per comm: many processes share
	// a comm, and every scan asks again for each. Guarded by Resolver.mu.
	memo map[string]bool
}

// maxMemo bounds a nameSel's memo; it is cleared when full.
const maxMemo = 4096

func (ns *nameSel) commMatches(comm string) bool {
	if ns.comm == nil {
		return true
	}
	if comm == "" {
		return false
	}
	m, ok := ns.memo[comm]
	if !ok {
		if len(ns.memo) >= maxMemo {
			clear(ns.memo)
		}
		m = ns.comm.MatchString(comm)
		ns.memo[comm] = m
	}
	return m
}

func compile(sel Selectors) compiled {
	var c compiled
	for _, pid := range sel.ProcID {
		if pid > 0 && !slices.Contains(c.pids, pid) {
			c.pids = append(c.pids, pid)
		}
	}
	for _, pn := range sel.ProcName {
		if pn.Comm == "" && pn.Cmdline == "" {
			continue
		}
		ns := nameSel{cmdline: pn.Cmdline, label: pn.Label, memo: map[string]bool{}}
		if pn.Comm != "" {
			re, err := regexp.CompilePOSIX(pn.Comm)
			if err != nil {
				continue
			}
			ns.comm = re
		}
		c.names = append(c.names, ns)
	}
	for _, id := range sel.PodID {
		if id != "" {
			c.podIDs = append(c.podIDs, strings.ToLower(id))
		}
	}
	for _, id := range sel.ContainerID {
		if id != "" {
			c.containerIDs = append(c.containerIDs, strings.ToLower(id))
		}
	}
	for _, n := range sel.ContainerName {
		if n != "" {
			c.containerNames = append(c.containerNames, n)
		}
	}
	return c
}

// dynamic reports whether the set depends on the running processes.
func (c *compiled) dynamic() bool {
	return len(c.names) > 0 || len(c.podIDs) > 0 || len(c.containerIDs) > 0 || len(c.containerNames) > 0
}

func (c *compiled) wantsContainers() bool {
	return len(c.podIDs) > 0 || len(c.containerIDs) > 0 || len(c.containerNames) > 0
}

// matchName returns the index of the first proc_name selector p matches.
func (c *compiled) matchName(p *identity.Process) int {
	for i := range c.names {
		ns := &c.names[i]
		if !ns.commMatches(p.Comm) {
			continue
		}
		if ns.cmdline != "" && !strings.Contains(p.Cmdline, ns.cmdline) {
			continue
		}
		return i
	}
	return -1
}

// matchContainer reports whether container ct, which holds a process of
// pod podID (from its cgroup path), is selected: by id or an abbreviation
// of it, by exact name, or by pod uid.
func (c *compiled) matchContainer(ct identity.Container, podID string) bool {
	for _, id := range c.containerIDs {
		if strings.HasPrefix(ct.ID, id) {
			return true
		}
	}
	for _, n := range c.containerNames {
		if ct.Name == n {
			return true
		}
	}
	if ct.PodID != "" {
		podID = ct.PodID
	}
	for _, id := range c.podIDs {
		if podID == id {
			return true
		}
	}
	return false
}
