package flamegraph

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// libcProbes are mem_glibc's hooks in a libc: the entry program of each
// allocator (every one of them returns through alloc_return) and free.
// The optional ones are skipped where the libc lacks them. glibc may give
// two names one address (memalign, aligned_alloc): both probes then run
// on one call, which the entry's stack pointer makes count once.
var libcProbes = []struct {
	symbol, enter string
	ret, optional bool
}{
	{"malloc", "malloc_enter", true, false},
	{"calloc", "calloc_enter", true, false},
	{"realloc", "realloc_enter", true, false},
	{"free", "free_enter", false, false},
	{"memalign", "memalign_enter", true, true},
	{"aligned_alloc", "memalign_enter", true, true},
	{"valloc", "valloc_enter", true, true},
	{"pvalloc", "valloc_enter", true, true},
	{"posix_memalign", "posix_memalign_enter", true, true},
}

// hostLibcDirs are where a host's libc usually is; it is probed when
// mem_glibc starts, so an observed process that starts later is counted
// from its first allocation.
var hostLibcDirs = []string{"/lib/*-linux-gnu", "/usr/lib/*-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// libcFile is a libc file by device and inode: the same file reached by
// two paths (a container's root, a symlink) is probed once.
type libcFile struct{ dev, ino uint64 }

// glibcHooks holds mem_glibc's uprobes: one set per libc file the observed
// processes map. The uprobes fire for every process mapping the file; the
// BPF entry programs keep the observed ones.
type glibcHooks struct {
	root  string // host root: processes are read under <root>/proc
	progs map[string]*ebpf.Program
	files map[libcFile][]link.Link
	seen  map[int]bool // processes whose libc is probed (or has none)
	warn  func(msg string, args ...any)
	info  func(msg string, args ...any)
}

func newGlibcHooks(root string, progs map[string]*ebpf.Program, log *slog.Logger) *glibcHooks {
	return &glibcHooks{root: root, progs: progs, files: map[libcFile][]link.Link{}, seen: map[int]bool{}, warn: log.Warn, info: log.Info}
}

// attachHost probes the host's libc files.
func (g *glibcHooks) attachHost() {
	for _, dir := range hostLibcDirs {
		matches, _ := filepath.Glob(filepath.Join(g.root, dir, "libc.so.6"))
		for _, m := range matches {
			if err := g.attach(m); err != nil {
				g.warn("flamegraph: mem_glibc uprobes not attached", "file", m, "err", err)
			}
		}
	}
}

// scan probes the libc of every observed process not seen before.
func (g *glibcHooks) scan(observed func(int) bool) {
	ents, err := os.ReadDir(filepath.Join(g.root, "proc"))
	if err != nil {
		return
	}
	live := make(map[int]bool, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !observed(pid) {
			continue
		}
		live[pid] = true
		if g.seen[pid] {
			continue
		}
		g.seen[pid] = true
		dir := filepath.Join(g.root, "proc", e.Name())
		libs, mapped := libcMappings(dir)
		if len(libs) == 0 && mapped {
			g.info("flamegraph: mem_glibc: the process maps no libc (static, or another allocator): its allocations are not seen", "pid", pid)
		}
		for _, lib := range libs {
			// The path in the process's own mount namespace.
			if err := g.attach(filepath.Join(dir, "root", lib)); err != nil && !errors.Is(err, os.ErrNotExist) {
				g.warn("flamegraph: mem_glibc uprobes not attached", "pid", pid, "file", lib, "err", err)
			}
		}
	}
	for pid := range g.seen {
		if !live[pid] {
			delete(g.seen, pid)
		}
	}
}

// attach probes one libc file (once per file). The return probes go first:
// a call whose entry was seen then always has its return seen.
func (g *glibcHooks) attach(path string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	id := libcFile{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs by arch
	if _, done := g.files[id]; done {
		return nil
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return err
	}
	var links []link.Link
	fail := func(err error) error {
		closeLinks(links)
		g.files[id] = nil // not retried: the same file fails the same way
		return err
	}
	missing := map[string]bool{}
	for _, pr := range libcProbes {
		if pr.ret {
			l, err := ex.Uretprobe(pr.symbol, g.progs["alloc_return"], nil)
			if pr.optional && errors.Is(err, link.ErrNoSymbol) {
				missing[pr.symbol] = true
				continue
			}
			if err != nil {
				return fail(fmt.Errorf("uretprobe %s: %w", pr.symbol, err))
			}
			links = append(links, l)
		}
	}
	for _, pr := range libcProbes {
		if missing[pr.symbol] {
			continue
		}
		l, err := ex.Uprobe(pr.symbol, g.progs[pr.enter], nil)
		if err != nil {
			return fail(fmt.Errorf("uprobe %s: %w", pr.symbol, err))
		}
		links = append(links, l)
	}
	g.files[id] = links
	return nil
}

// close removes every uprobe, entries first (a call in flight then finds
// its return probe gone and leaves a pending entry, which close's caller
// clears).
func (g *glibcHooks) close() {
	for _, links := range g.files {
		closeLinks(links)
	}
	clear(g.files)
	clear(g.seen)
}

func closeLinks(links []link.Link) {
	for i := len(links) - 1; i >= 0; i-- {
		_ = links[i].Close()
	}
}

// libcMappings are the libc files a process maps (paths in its mount
// namespace): glibc's libc.so.6, or an older libc-2.x.so. mapped tells
// whether the process maps any file (a kernel thread maps none).
func libcMappings(dir string) (out []string, mapped bool) {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		mapped = mapped || i >= 0
		if i < 0 {
			continue
		}
		p := strings.TrimSuffix(line[i:], " (deleted)")
		if isLibc(filepath.Base(p)) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, mapped
}

func isLibc(base string) bool {
	return base == "libc.so.6" || (strings.HasPrefix(base, "libc-") && strings.HasSuffix(base, ".so"))
}

// blockKey groups live blocks by process and allocating stack.
type blockKey struct {
	tgid  uint32
	stack int32
}

// liveBlocks reads glibc_allocs: the live bytes and blocks per process and
// stack. It marks their stacks kept and deletes the blocks of processes
// that have exited.
func (p *Probe) liveBlocks(keep map[int32]bool) (map[blockKey]live, error) {
	m := p.coll.Maps["glibc_allocs"]
	keys, vals, err := readAllocs(m)
	out := map[blockKey]live{}
	exists := map[uint32]bool{}
	var gone []flameFlameAllocKey
	for i, k := range keys {
		ok, seen := exists[k.Tgid]
		if !seen {
			_, serr := os.Stat(filepath.Join(p.procRoot, strconv.Itoa(int(k.Tgid))))
			ok = serr == nil
			exists[k.Tgid] = ok
		}
		if !ok {
			gone = append(gone, k)
			continue
		}
		keep[vals[i].UserStack] = true
		b := blockKey{k.Tgid, vals[i].UserStack}
		l := out[b]
		l.bytes += vals[i].Size
		l.objects++
		out[b] = l
	}
	for _, k := range gone {
		_ = m.Delete(&k) // freed meanwhile: nothing to do
	}
	if err != nil {
		return out, fmt.Errorf("read glibc_allocs: %w", err)
	}
	return out, nil
}

// readAllocs reads every row of glibc_allocs, in batches.
func readAllocs(m *ebpf.Map) ([]flameFlameAllocKey, []flameFlameAlloc, error) {
	var keys []flameFlameAllocKey
	var vals []flameFlameAlloc
	kb := make([]flameFlameAllocKey, 4096)
	vb := make([]flameFlameAlloc, 4096)
	var c ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&c, kb, vb, nil)
		keys = append(keys, kb[:n]...)
		vals = append(vals, vb[:n]...)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys, vals, nil
		}
		if err != nil {
			return keys, vals, err
		}
	}
}

// setLive names the live blocks' stacks and makes them the live profile of
// each observed process, for the next flush and the Hub.
func (p *Probe) setLive(blocks map[blockKey]live, name func(flameFlameKey, bool) string) {
	procs := map[int]*procProfile{}
	for b, l := range blocks {
		pid := int(b.tgid)
		if p.cfg.Targets != nil && !p.cfg.Targets.Observed(pid) {
			continue
		}
		pp, ok := procs[pid]
		if !ok {
			pp = p.newProc(pid)
			pp.live = map[string]live{}
			procs[pid] = pp
		}
		stack := name(flameFlameKey{Tgid: b.tgid, UserStack: b.stack, KernStack: errEFAULT}, true)
		sum := pp.live[stack]
		sum.bytes += l.bytes
		sum.objects += l.objects
		pp.live[stack] = sum
	}
	p.live = procs
	p.hub.setLive(procs)
}
