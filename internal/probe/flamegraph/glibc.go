package flamegraph

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/uprobes"
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

// glibcHooks holds mem_glibc's uprobes: one set per libc file the observed
// processes map. The uprobes fire for every process mapping the file; the
// BPF entry programs keep the observed ones.
type glibcHooks struct{ set uprobes.Set }

func newGlibcHooks(root string, progs map[string]*ebpf.Program, log *slog.Logger) *glibcHooks {
	// The return probes go first: a call whose entry was seen then always
	// has its return seen.
	var probes []uprobes.Probe
	for _, ret := range []bool{true, false} {
		for _, pr := range libcProbes {
			switch {
			case ret && pr.ret:
				probes = append(probes, uprobes.Probe{Symbol: pr.symbol, Prog: progs["alloc_return"], Ret: true, Optional: pr.optional})
			case !ret:
				probes = append(probes, uprobes.Probe{Symbol: pr.symbol, Prog: progs[pr.enter], Optional: pr.optional})
			}
		}
	}
	log = log.With("sub_item", "mem_glibc")
	return &glibcHooks{set: uprobes.Set{Root: root, Match: uprobes.IsLibc,
		Probes: func(string) ([]uprobes.Probe, error) { return probes, nil },
		Warn:   func(msg string, args ...any) { log.Warn("flamegraph: mem_glibc: "+msg, args...) },
		Info: func(_ string, args ...any) {
			log.Info("flamegraph: mem_glibc: the process maps no libc (static, or another allocator): its allocations are not seen", args...)
		}}}
}

// attachHost probes the host's libc files.
func (g *glibcHooks) attachHost() { g.set.AttachHost(hostLibcDirs, "libc.so.6") }

// scan probes the libc of every observed process not seen before.
func (g *glibcHooks) scan(observed func(int) bool) { g.set.Scan(observed) }

// close removes every uprobe, entries first (a call in flight then finds
// its return probe gone and leaves a pending entry, which close's caller
// clears).
func (g *glibcHooks) close() { g.set.Close() }

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
