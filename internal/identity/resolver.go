package identity

import (
	"container/list"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of a CachingResolver.
const (
	DefaultMaxProcesses  = 8192
	DefaultMaxContainers = 1024
	// DefaultRefresh is how long a process's cmdline and cgroup are trusted
	// before they are read again (an exec that keeps the comm, or a move to
	// another cgroup, is seen within this time).
	DefaultRefresh = 10 * time.Second
	// DefaultMissTTL is how long "no runtime knows this container" is
	// remembered, so a container whose state appears late is found soon.
	DefaultMissTTL = 5 * time.Second
	// DefaultContainerTTL is how long a found container is trusted.
	DefaultContainerTTL = time.Minute
	// DefaultExitGrace is how long an exited process is remembered: longer
	// than the longest report period (600 s), so that the rows a process
	// left in the period it exited in are labelled like its earlier ones.
	DefaultExitGrace = 11 * time.Minute
)

// CachingResolver implements Resolver over a host root, with bounded LRU
// caches. A cached process is checked against /proc/<pid>/stat on every
// lookup: a different start time (the pid was reused) or comm (the process
// exec'd) reloads it.
type CachingResolver struct {
	root         string
	cgroup2      string
	cr           containerReader
	maxProcs     int
	maxConts     int
	refresh      time.Duration
	missTTL      time.Duration
	containerTTL time.Duration
	exitGrace    time.Duration
	now          func() time.Time

	mu    sync.Mutex
	procs lru[int, procEntry]
	conts lru[string, contEntry]
	// seen remembers, per container id seen in a process's cgroup, the
	// cgroup2 id and pod uid of that process, for containers whose runtime
	// state does not say (or cannot be read); byCgroup is the reverse.
	seen     lru[string, seenContainer]
	byCgroup lru[uint64, string]

	// live are the containers whose cgroups exist (CgroupChanged).
	live        map[string]*liveContainer
	liveSnap    []LiveContainer // LiveContainers' answer until live changes; nil: none
	liveDropped uint64

	// rt is what the runtimes' APIs say, nil until EnableRuntimes.
	rt *runtimeAPI
}

type procEntry struct {
	p      Process
	loaded time.Time
	// partial: learned from a lifecycle event, not read from /proc (no
	// container or pod from the cgroup path yet): a live process is read
	// again at the next lookup.
	partial bool
	// exited is when the process was found gone (zero while it lives).
	exited time.Time
}

type contEntry struct {
	c      Container
	ok     bool
	loaded time.Time
}

type seenContainer struct {
	cgroupID uint64
	podID    string
}

// Option configures a CachingResolver.
type Option func(*CachingResolver)

// WithCgroup2Mount sets where the cgroup2 hierarchy is (default: found under
// root by FindCgroup2Mount). Tests point it at a fixture directory.
func WithCgroup2Mount(dir string) Option { return func(r *CachingResolver) { r.cgroup2 = dir } }

// WithStateDirs replaces the runc state roots searched for <id>/state.json
// (paths relative to root, "*" allowed). The default covers runc and CRI-O
// (/run/runc), containerd (/run/containerd/runc/<namespace>) and dockerd
// (/run/docker/runtime-runc/moby); docker's config.v2.json is always read.
func WithStateDirs(dirs ...string) Option {
	return func(r *CachingResolver) { r.cr.stateDirs = dirs }
}

// WithCacheSize bounds the process and container caches.
func WithCacheSize(processes, containers int) Option {
	return func(r *CachingResolver) { r.maxProcs, r.maxConts = processes, containers }
}

// WithRefresh sets how long a process's cmdline and cgroup are trusted.
func WithRefresh(d time.Duration) Option { return func(r *CachingResolver) { r.refresh = d } }

// WithExitGrace sets how long an exited process is remembered.
func WithExitGrace(d time.Duration) Option { return func(r *CachingResolver) { r.exitGrace = d } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(r *CachingResolver) { r.now = now } }

// NewResolver returns a resolver reading through root ("/" on the host, the
// GOPHER_HOST_PATH mount in a container).
func NewResolver(root string, opts ...Option) *CachingResolver {
	r := &CachingResolver{
		root:         root,
		cr:           containerReader{root: root, stateDirs: defaultStateDirs},
		maxProcs:     DefaultMaxProcesses,
		maxConts:     DefaultMaxContainers,
		refresh:      DefaultRefresh,
		missTTL:      DefaultMissTTL,
		containerTTL: DefaultContainerTTL,
		exitGrace:    DefaultExitGrace,
		now:          time.Now,
	}
	for _, o := range opts {
		o(r)
	}
	if r.cgroup2 == "" {
		r.cgroup2, _ = FindCgroup2Mount(root)
	}
	r.procs.init(r.maxProcs)
	r.conts.init(r.maxConts)
	r.seen.init(r.maxConts)
	r.byCgroup.init(r.maxConts)
	r.live = map[string]*liveContainer{}
	return r
}

// Process returns what is known of pid; false when nothing is. A process
// that has exited (or waits to be reaped as a zombie) is returned, marked
// Exited, for the exit grace period after it was found gone, with what was
// known of it while it lived (read from /proc or learned from a lifecycle
// event); a pid that was never known is false.
func (r *CachingResolver) Process(pid int) (Process, bool) {
	if pid <= 0 {
		return Process{}, false
	}
	st, err := ReadStat(r.root, pid)
	now := r.now()
	if err != nil || st.State == 'Z' || st.State == 'X' {
		return r.gone(pid, now, st, err == nil)
	}
	r.mu.Lock()
	if e, ok := r.procs.get(pid); ok && e.exited.IsZero() && !e.partial && e.p.StartTime == st.StartTime &&
		e.p.Comm == st.Comm && now.Sub(e.loaded) < r.refresh {
		e.p.PPID = st.PPID
		r.procs.put(pid, e)
		r.mu.Unlock()
		return e.p, true
	}
	r.mu.Unlock()

	p, ok := r.load(pid, st)
	if !ok {
		return r.gone(pid, now, st, false)
	}
	r.mu.Lock()
	r.procs.put(pid, procEntry{p: p, loaded: now})
	r.noteContainerLocked(p)
	r.mu.Unlock()
	return p, true
}

// gone answers for a pid whose /proc entry is missing or a zombie's: the
// remembered process, marked exited, within the grace period. A zombie
// whose start time differs from the remembered one is another process.
func (r *CachingResolver) gone(pid int, now time.Time, st Stat, zombie bool) (Process, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.procs.get(pid)
	if !ok || (zombie && e.p.StartTime != st.StartTime) {
		if ok {
			r.procs.remove(pid)
		}
		return Process{}, false
	}
	if e.exited.IsZero() {
		e.exited = now
		e.p.Exited = true
		r.procs.put(pid, e)
	} else if now.Sub(e.exited) > r.exitGrace {
		r.procs.remove(pid)
		return Process{}, false
	}
	return e.p, true
}

// Learn records what a process lifecycle event says of a process (comm,
// cmdline, start time, parent, cgroup): a process that exits before its
// /proc entry is read is still known, and labelled. The container and pod
// are found from the cgroup id when another process of that cgroup was
// seen, or from the cgroup's path. A live process is still read from /proc
// at its next lookup.
func (r *CachingResolver) Learn(p Process) {
	if p.PID <= 0 {
		return
	}
	if p.ContainerID == "" && p.CgroupID != 0 {
		p.ContainerID, p.PodID = r.containerOfCgroup(p.CgroupID)
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.procs.get(p.PID); ok && e.exited.IsZero() && !e.partial && e.p.StartTime == p.StartTime &&
		e.p.Comm == p.Comm && e.p.Cmdline == p.Cmdline {
		return // already read from /proc: keep the fuller entry
	}
	p.Exited = false
	r.procs.put(p.PID, procEntry{p: p, loaded: now, partial: true})
}

// Exit records that pid exited (from a lifecycle event), so that it is
// answered as exited from now on, for the grace period.
func (r *CachingResolver) Exit(pid int) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.procs.get(pid); ok && e.exited.IsZero() {
		e.exited = now
		e.p.Exited = true
		r.procs.put(pid, e)
	}
}

// ContainerOfCgroup returns the container and pod of a cgroup2 id ("" when
// it is not a container's): from a process seen in it, else from the
// cgroup's path (looked up by its id).
func (r *CachingResolver) ContainerOfCgroup(id uint64) (containerID, podID string) {
	return r.containerOfCgroup(id)
}

// containerOfCgroup returns the container and pod of a cgroup2 id: from a
// process seen in it, else from the cgroup's path (looked up by its id).
func (r *CachingResolver) containerOfCgroup(id uint64) (containerID, podID string) {
	r.mu.Lock()
	cid, ok := r.byCgroup.get(id)
	if ok {
		s, _ := r.seen.get(cid)
		r.mu.Unlock()
		return cid, s.podID
	}
	r.mu.Unlock()
	if r.cgroup2 == "" {
		return "", ""
	}
	p, err := cgroupPathByID(r.cgroup2, id)
	if err != nil {
		return "", ""
	}
	return ContainerIDFromPath(p), PodIDFromPath(p)
}

func (r *CachingResolver) noteContainerLocked(p Process) {
	if p.ContainerID == "" {
		return
	}
	if s, ok := r.seen.get(p.ContainerID); !ok || s.cgroupID == 0 && p.CgroupID != 0 || s.podID == "" && p.PodID != "" {
		r.seen.put(p.ContainerID, seenContainer{cgroupID: p.CgroupID, podID: p.PodID})
		if e, ok := r.conts.get(p.ContainerID); ok && !e.ok {
			r.conts.remove(p.ContainerID) // now known to exist
		}
	}
	if p.CgroupID != 0 {
		r.byCgroup.put(p.CgroupID, p.ContainerID)
	}
}

// load reads a process's cmdline and cgroup.
func (r *CachingResolver) load(pid int, st Stat) (Process, bool) {
	p := Process{PID: pid, PPID: st.PPID, Comm: st.Comm, StartTime: st.StartTime}
	b, err := readCapped(procPath(r.root, pid, "cmdline"), maxCmdline)
	if err != nil {
		return Process{}, false
	}
	var args []string
	p.Cmdline, args = ParseCmdline(b)
	if st.Comm == "java" {
		p.MainClass = JavaMainClass(args)
	}
	b, err = os.ReadFile(procPath(r.root, pid, "cgroup"))
	if err != nil {
		return Process{}, false
	}
	lines := ParseCgroup(b)
	p.ContainerID, p.PodID = ContainerFromCgroup(lines)
	// A path with ".." is relative to galago's cgroup namespace, not to
	// the mount: its directory cannot be found.
	if u := unifiedPath(lines); u != "" && r.cgroup2 != "" && !strings.Contains(u, "/..") {
		p.CgroupID = inode(filepath.Join(r.cgroup2, u))
	}
	return p, true
}

// EnableRuntimes makes the resolver ask the container runtimes' APIs
// (CRI, containerd, Docker) for what their files do not say: names and
// images of plain containerd and Docker containers, pod labels. Call it
// before any lookup, then run RunRuntimes. It fails for an endpoint that is
// not a unix socket path, naming it.
func (r *CachingResolver) EnableRuntimes(cfg Runtimes, log *slog.Logger) error {
	a, err := newRuntimeAPI(r.root, cfg, r.maxConts, r.missTTL, r.exitGrace, log, r.now)
	if err != nil {
		return err
	}
	r.rt = a
	return nil
}

// RunRuntimes lists the runtimes in the background until ctx ends: at
// once, when a container nobody knows is looked up, and every period.
// Lookups never wait for it.
func (r *CachingResolver) RunRuntimes(ctx context.Context) {
	if r.rt != nil {
		r.rt.run(ctx)
	}
}

// RuntimeCollector exports the runtime APIs' health and the containers
// the cache bound dropped; nil before EnableRuntimes.
func (r *CachingResolver) RuntimeCollector() prometheus.Collector {
	if r.rt == nil {
		return nil
	}
	return r.rt
}

// Container returns what the runtimes say of a container; id may be the
// full id or an abbreviation of it. The runtimes' APIs (when enabled) win
// over their files. False when no runtime knows it and no process was
// seen in it.
func (r *CachingResolver) Container(id string) (Container, bool) {
	id = strings.ToLower(id)
	if !IsContainerID(id) {
		return Container{}, false
	}
	c, ok := r.containerFromFiles(id)
	if r.rt == nil {
		return c, ok
	}
	full := c.ID
	if len(full) != 64 {
		full = r.rt.expand(id)
	}
	r.mu.Lock()
	pending := r.pendingLocked(full, r.now())
	r.mu.Unlock()
	if pending && c.Name == "" {
		r.rt.expect(full) // a miss asks for a listing again
	}
	rc, found := r.rt.lookup(full)
	if !found {
		return c, ok
	}
	mergeContainer(&rc, c)
	return rc, true
}

// containerFromFiles answers from the runtimes' state files and the
// processes seen, cached.
func (r *CachingResolver) containerFromFiles(id string) (Container, bool) {
	now := r.now()
	r.mu.Lock()
	if e, ok := r.conts.get(id); ok {
		ttl := r.containerTTL
		switch {
		case e.c.Name == "" && r.pendingLocked(id, now):
			ttl = pendingRetry // just made: its state may come any moment
		case !e.ok:
			ttl = r.missTTL
		}
		if now.Sub(e.loaded) < ttl {
			r.mu.Unlock()
			return e.c, e.ok
		}
	}
	full := id
	if len(id) < 64 {
		full = r.expandLocked(id)
	}
	r.mu.Unlock()

	if len(full) < 64 {
		full = r.cr.fullID(id)
	}
	var c Container
	ok := false
	if full != "" {
		c, ok = r.cr.read(full)
		r.mu.Lock()
		seen, haveSeen := r.seen.get(full)
		r.mu.Unlock()
		if haveSeen {
			// A process was seen in this container's cgroup: it exists
			// even if no runtime state could be read.
			ok = true
			if c.CgroupID == 0 {
				c.CgroupID = seen.cgroupID
			}
			if c.PodID == "" {
				c.PodID = seen.podID
			}
		}
	}
	e := contEntry{c: c, ok: ok, loaded: now}
	r.mu.Lock()
	r.conts.put(id, e)
	if full != id && full != "" {
		r.conts.put(full, e)
	}
	r.mu.Unlock()
	return c, ok
}

// expandLocked maps an abbreviated id to the one full id seen in a process
// cgroup that starts with it; it returns prefix unchanged if none or
// several.
func (r *CachingResolver) expandLocked(prefix string) string { return uniquePrefix(r.seen.m, prefix) }

// uniquePrefix returns the one key of m that starts with prefix; prefix
// itself if none or several do.
func uniquePrefix[V any](m map[string]V, prefix string) string {
	found := ""
	for id := range m {
		if strings.HasPrefix(id, prefix) {
			if found != "" {
				return prefix
			}
			found = id
		}
	}
	if found == "" {
		return prefix
	}
	return found
}

// lru is a map bounded by least-recent use. Not safe for concurrent use.
type lru[K comparable, V any] struct {
	max   int
	m     map[K]*list.Element
	order list.List // front = most recent
}

type lruItem[K comparable, V any] struct {
	k K
	v V
}

func (c *lru[K, V]) init(max int) {
	c.max = max
	c.m = map[K]*list.Element{}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.m[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruItem[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.m[k]; ok {
		e.Value.(*lruItem[K, V]).v = v
		c.order.MoveToFront(e)
		return
	}
	c.m[k] = c.order.PushFront(&lruItem[K, V]{k, v})
	for c.max > 0 && len(c.m) > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.m, last.Value.(*lruItem[K, V]).k)
	}
}

func (c *lru[K, V]) remove(k K) {
	if e, ok := c.m[k]; ok {
		c.order.Remove(e)
		delete(c.m, k)
	}
}
