// Package conntrack finds where the kernel's NAT really sent a TCP
// connection: given the tuple a socket sees (its own address and the
// address it connected to, such as a Kubernetes ClusterIP), it returns the
// destination the connection was DNAT'd to (the reply tuple's source in
// the conntrack entry), for the tcp and l7 probes' cluster_ip_backend
// parameter.
//
// Lookups are ctnetlink GET requests by original tuple (NETLINK_NETFILTER,
// github.com/ti-mo/conntrack), one per tuple: never a table dump and never
// a command line. Conntrack is per network namespace, so a lookup runs on a
// netlink socket opened inside the socket's namespace, entered through
// /proc/<pid>/ns/net of a process of the connection (or of one of its
// threads, for a process whose threads live in several namespaces; when
// that process is gone, through any process in the namespace). One
// socket is kept per namespace, closed after it idles (it would otherwise
// keep a dead pod's namespace alive).
//
// Answers are cached per tuple (namespace, source, destination) for TTL,
// at most MaxEntries of them (least recently used first out); a tuple
// without an entry is not NATed and keeps its address, as does every tuple
// while conntrack is absent from the kernel (checked on /sys/module, so
// that a lookup does not load the module, and re-checked every minute).
//
// Cost (BenchmarkLookupPrivileged, BENCHMARKS.md): ~0.1 ms per uncached
// lookup (~70 µs of it CPU: the netlink round trip and the decoding of the
// whole entry, 155 allocations), well under a microsecond and no
// allocation for a cached answer; opening a namespace's socket adds a
// setns on a locked thread, once per namespace.
//
// Limits: TCP over IPv4 or IPv6 only; the answer is the DNAT of the
// connection as conntrack saw it, so a connection whose entry expired or
// was never confirmed keeps its original address.
package conntrack

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultMaxEntries = 16384
	// DefaultTTL is shorter than TIME_WAIT (60 s): a client cannot reuse a
	// tuple, and so get another backend, before its answer expires.
	DefaultTTL = 30 * time.Second
	// DefaultNetnsIdle closes a namespace's netlink socket unused this long.
	DefaultNetnsIdle = 2 * time.Minute
	// maxNetns bounds the open netlink sockets, one per namespace.
	maxNetns = 256
	// absentRecheck is how often an absent conntrack is looked for again.
	absentRecheck = time.Minute
)

// Tuple is a TCP connection as its socket sees it.
type Tuple struct {
	// Netns is the inode number of the socket's network namespace.
	Netns uint32
	// PID is a process of the socket, through which Netns is entered.
	PID uint32
	// Src is the socket's local address, Dst the one it connected to.
	Src, Dst netip.AddrPort
}

// Stats count a Resolver's work since it was made.
type Stats struct {
	Lookups   uint64 // netlink GET requests
	Hits      uint64 // answers from the cache
	NATed     uint64 // lookups that found a different destination
	NoEntry   uint64 // lookups without a conntrack entry (not NATed)
	Failures  uint64 // lookups that failed (namespace gone, netlink error)
	Evictions uint64 // answers dropped from the full cache before expiry
}

// Options configure a Resolver.
type Options struct {
	Log *slog.Logger
	// ProcRoot is the /proc of the host ("/proc" when empty).
	ProcRoot string
	// OnError is called for every failed lookup (the probe's error count).
	OnError    func()
	MaxEntries int
	TTL        time.Duration
	NetnsIdle  time.Duration

	// Tests: the netlink side, the clock and the presence check.
	dial    func(nsFD int) (table, error)
	now     func() time.Time
	present func() bool
}

// table is conntrack in one network namespace.
type table interface {
	// dnat returns the reply source of the entry whose original tuple is
	// (src, dst), errNoEntry when there is none.
	dnat(src, dst netip.AddrPort) (netip.AddrPort, error)
	close() error
}

// errNoEntry: conntrack has no entry for the tuple.
var errNoEntry = errors.New("no conntrack entry")

// errAbsent: the kernel has no conntrack (or no ctnetlink).
var errAbsent = errors.New("conntrack not available in this kernel")

type cacheKey struct {
	netns    uint32
	src, dst netip.AddrPort
}

type cacheEntry struct {
	key     cacheKey
	backend netip.AddrPort
	expires time.Time
}

type nsTable struct {
	t    table
	used time.Time
}

// Resolver answers Backend. Safe for concurrent use.
type Resolver struct {
	o      Options
	selfNS uint32
	mu     sync.Mutex
	lru    *list.List // of *cacheEntry, most recent first
	byKey  map[cacheKey]*list.Element
	tables map[uint32]*nsTable
	// noHolder: namespaces no process was found in, and when.
	noHolder map[uint32]time.Time
	absent   bool
	checked  time.Time
	stats    Stats
	closed   bool
	mode     int // the cluster_ip_backend value (ForParam)
}

// New returns a Resolver. It opens nothing until the first lookup.
func New(o Options) *Resolver {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.NetnsIdle <= 0 {
		o.NetnsIdle = DefaultNetnsIdle
	}
	if o.dial == nil {
		o.dial = dialNetlink
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.present == nil {
		o.present = modulePresent
	}
	r := &Resolver{o: o, lru: list.New(), byKey: map[cacheKey]*list.Element{}, tables: map[uint32]*nsTable{}, noHolder: map[uint32]time.Time{}}
	// The agent's own namespace, for sockets without a process: /proc/self
	// is the agent's even under GOPHER_HOST_PATH.
	if ino, err := nsInode("/proc/self/ns/net"); err == nil {
		r.selfNS = ino
	}
	return r
}

// Backend returns where t's connection was DNAT'd to, or t.Dst when it
// was not (or when that cannot be known: see the package documentation).
func (r *Resolver) Backend(t Tuple) netip.AddrPort {
	src, dst := unmap(t.Src), unmap(t.Dst)
	if !src.IsValid() || !dst.IsValid() || src.Addr().Is4() != dst.Addr().Is4() {
		return t.Dst
	}
	k := cacheKey{t.Netns, src, dst}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return t.Dst
	}
	now := r.o.now()
	if el := r.byKey[k]; el != nil {
		e := el.Value.(*cacheEntry)
		if now.Before(e.expires) {
			r.stats.Hits++
			r.lru.MoveToFront(el)
			if e.backend == dst {
				return t.Dst
			}
			return e.backend
		}
		r.lru.Remove(el)
		delete(r.byKey, k)
	}
	if !r.availableLocked(now) {
		return t.Dst
	}
	r.sweepTablesLocked(now)
	backend, err := r.lookupLocked(t, src, dst, now)
	switch {
	case errors.Is(err, errNoEntry):
		r.stats.NoEntry++
		backend = dst
	case errors.Is(err, errAbsent):
		r.markAbsentLocked(now, err)
		return t.Dst
	case err != nil:
		r.stats.Failures++
		if logworthy(r.stats.Failures) {
			r.o.Log.Debug("conntrack: lookup failed: the service address is kept",
				"netns", t.Netns, "pid", t.PID, "src", src, "dst", dst, "err", err, "failures", r.stats.Failures)
		}
		if r.o.OnError != nil {
			r.o.OnError()
		}
		return t.Dst // not cached: the next connection tries again
	default:
		if backend != dst {
			r.stats.NATed++
		}
	}
	r.storeLocked(k, backend, now)
	if backend == dst {
		return t.Dst // keep the caller's form (an IPv4-mapped address)
	}
	return backend
}

// Stats returns the counts so far.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close closes the netlink sockets; Backend then returns its input.
func (r *Resolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for ns, t := range r.tables {
		errs = append(errs, t.t.close())
		delete(r.tables, ns)
	}
	r.lru.Init()
	clear(r.byKey)
	return errors.Join(errs...)
}

func (r *Resolver) availableLocked(now time.Time) bool {
	if r.absent && now.Sub(r.checked) < absentRecheck {
		return false
	}
	if r.checked.IsZero() || r.absent {
		r.checked = now
		if !r.o.present() {
			r.markAbsentLocked(now, errAbsent)
			return false
		}
		if r.absent {
			r.o.Log.Info("conntrack: now available: cluster_ip_backend replaces service addresses")
		}
		r.absent = false
	}
	return true
}

func (r *Resolver) markAbsentLocked(now time.Time, err error) {
	if !r.absent {
		r.o.Log.Warn("conntrack: not available: cluster_ip_backend keeps service addresses", "err", err)
	}
	r.absent, r.checked = true, now
}

func (r *Resolver) storeLocked(k cacheKey, backend netip.AddrPort, now time.Time) {
	for r.lru.Len() >= r.o.MaxEntries {
		last := r.lru.Back()
		e := last.Value.(*cacheEntry)
		r.lru.Remove(last)
		delete(r.byKey, e.key)
		if now.Before(e.expires) {
			r.stats.Evictions++
			if logworthy(r.stats.Evictions) {
				r.o.Log.Debug("conntrack: cache full: answer evicted", "max", r.o.MaxEntries, "evictions", r.stats.Evictions)
			}
		}
	}
	r.byKey[k] = r.lru.PushFront(&cacheEntry{key: k, backend: backend, expires: now.Add(r.o.TTL)})
}

// lookupLocked asks conntrack in t's namespace.
func (r *Resolver) lookupLocked(t Tuple, src, dst netip.AddrPort, now time.Time) (netip.AddrPort, error) {
	nt := r.tables[t.Netns]
	if nt == nil {
		tb, err := r.openLocked(t)
		if err != nil {
			return netip.AddrPort{}, err
		}
		if len(r.tables) >= maxNetns {
			r.closeOldestLocked()
		}
		nt = &nsTable{t: tb}
		r.tables[t.Netns] = nt
	}
	nt.used = now
	r.stats.Lookups++
	backend, err := nt.t.dnat(src, dst)
	if err != nil && !errors.Is(err, errNoEntry) {
		// The socket may be the broken one: the next lookup opens another.
		_ = nt.t.close()
		delete(r.tables, t.Netns)
	}
	return backend, err
}

// openLocked opens conntrack in t's namespace.
func (r *Resolver) openLocked(t Tuple) (table, error) {
	f, err := r.openNetns(t.Netns, t.PID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return r.o.dial(int(f.Fd()))
}

// openNetns opens the namespace file of inode netns: through process pid
// or one of its threads, else the agent's own, else through any process
// in it (a short-lived client may be gone by the time its connection is
// looked up; a pod's namespace keeps its pause process). The inode is
// checked so that a reused pid cannot lead to another namespace. Even the
// agent's namespace is entered through its file: the calling thread's may
// differ.
func (r *Resolver) openNetns(netns, pid uint32) (*os.File, error) {
	var paths []string
	if pid != 0 {
		base := filepath.Join(r.o.ProcRoot, strconv.FormatUint(uint64(pid), 10))
		paths = append(paths, filepath.Join(base, "ns", "net"))
		if tasks, err := os.ReadDir(filepath.Join(base, "task")); err == nil {
			for _, d := range tasks {
				paths = append(paths, filepath.Join(base, "task", d.Name(), "ns", "net"))
			}
		}
	}
	if netns == r.selfNS {
		paths = append(paths, "/proc/self/ns/net")
	}
	for _, p := range paths {
		if f := openIfNetns(p, netns); f != nil {
			return f, nil
		}
	}
	if f := r.scanNetns(netns); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("netns %d: no process in it (process %d gone or elsewhere)", netns, pid)
}

// scanNetns looks for a process in namespace netns through all of /proc.
// A namespace found empty is not scanned again for absentRecheck.
func (r *Resolver) scanNetns(netns uint32) *os.File {
	now := r.o.now()
	if at, ok := r.noHolder[netns]; ok && now.Sub(at) < absentRecheck {
		return nil
	}
	ents, err := os.ReadDir(r.o.ProcRoot)
	if err == nil {
		for _, e := range ents {
			if _, err := strconv.ParseUint(e.Name(), 10, 32); err != nil {
				continue
			}
			if f := openIfNetns(filepath.Join(r.o.ProcRoot, e.Name(), "ns", "net"), netns); f != nil {
				delete(r.noHolder, netns)
				return f
			}
		}
	}
	if len(r.noHolder) >= maxNetns {
		clear(r.noHolder)
	}
	r.noHolder[netns] = now
	return nil
}

// openIfNetns opens path if it is the namespace of inode netns.
func openIfNetns(path string, netns uint32) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil && st.Ino == uint64(netns) {
		return f
	}
	f.Close()
	return nil
}

func (r *Resolver) sweepTablesLocked(now time.Time) {
	for ns, t := range r.tables {
		if now.Sub(t.used) >= r.o.NetnsIdle {
			_ = t.t.close()
			delete(r.tables, ns)
		}
	}
}

func (r *Resolver) closeOldestLocked() {
	var oldest uint32
	var at time.Time
	first := true
	for ns, t := range r.tables {
		if first || t.used.Before(at) {
			oldest, at, first = ns, t.used, false
		}
	}
	if !first {
		_ = r.tables[oldest].t.close()
		delete(r.tables, oldest)
	}
}

// logworthy: the 1st, 2nd, 4th, 8th, ... occurrence is logged (with the
// count), so a storm cannot flood the log.
func logworthy(n uint64) bool { return n&(n-1) == 0 }

func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

func nsInode(path string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return uint32(st.Ino), nil
}

// modulePresent says whether conntrack is in the kernel: built in (its
// parameters are under /sys/module) or loaded.
func modulePresent() bool {
	_, err := os.Stat("/sys/module/nf_conntrack")
	return err == nil
}

// ForParam keeps a probe's Resolver in step with its cluster_ip_backend
// value v: nil for 0 (nothing is opened or looked up), cur or a new
// Resolver for 1 and 2. gala-gopher's 2 reads its flowtracer probe's map;
// galago has no flowtracer, and 2 asks for the same thing as 1 (the real
// endpoint behind a service address), so it is served as 1, said once in
// the log when the Resolver is made.
func ForParam(cur *Resolver, v int, o Options) *Resolver {
	if v <= 0 {
		if cur != nil {
			_ = cur.Close()
		}
		return nil
	}
	r := cur
	if r == nil {
		r = New(o)
	}
	if v == 2 && r.mode != 2 {
		r.o.Log.Info("cluster_ip_backend=2 behaves as 1 (ctnetlink lookups) on the client side; on the server side the flowtracer probe, while it runs, names the real client")
	}
	r.mode = v
	return r
}
