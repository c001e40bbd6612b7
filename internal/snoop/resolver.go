package snoop

import (
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

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

	mu       sync.Mutex
	sets     map[*Set]struct{}
	procs    map[int]*proc // the last scan of /proc
	lastScan time.Time
	running  bool // the scan loop runs
	closed   bool
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

type proc struct {
	identity.Process
	excluded  bool      // galago or one of its descendants
	firstSeen time.Time // when this process (pid and start time) was first read
	checked   time.Time // when /proc/<pid>/stat was last read
}

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

// Notify tells the resolver that pid started or exec'd (from the process
// lifecycle tracepoints), so sets pick it up before the next scan.
func (r *Resolver) Notify(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dynamicLocked() {
		return
	}
	p, ok := r.ids.Process(pid)
	if !ok {
		r.exitLocked(pid)
		return
	}
	now := time.Now()
	r.procs[pid] = &proc{Process: p, excluded: r.excludedIn(r.procs, p), firstSeen: now, checked: now}
	r.updateAllLocked()
}

// NotifyExit tells the resolver that pid exited.
func (r *Resolver) NotifyExit(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exitLocked(pid)
}

func (r *Resolver) exitLocked(pid int) {
	if f, ok := r.ids.(interface{ Forget(int) }); ok {
		f.Forget(pid)
	}
	if _, ok := r.procs[pid]; !ok {
		return
	}
	delete(r.procs, pid)
	r.updateAllLocked()
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
	procs := make(map[int]*proc, len(pids))
	for _, pid := range pids {
		old := r.procs[pid]
		if old != nil && now.Sub(old.firstSeen) >= r.young && now.Sub(old.checked) < r.recheck {
			procs[pid] = old
			continue
		}
		p, ok := r.ids.Process(pid)
		if !ok {
			continue
		}
		np := &proc{Process: p, firstSeen: now, checked: now}
		if old != nil && old.StartTime == p.StartTime {
			np.firstSeen = old.firstSeen
		}
		procs[pid] = np
	}
	for _, p := range procs {
		p.excluded = r.excludedIn(procs, p.Process)
	}
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
