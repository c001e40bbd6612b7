package flamegraph

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/symtab"
)

const (
	maxStackDepth = 127 // PERF_MAX_STACK_DEPTH, the stacks map's value
	errEFAULT     = -14 // bpf_get_stackid: empty stack
)

// Frames standing for a stack the kernel could not record.
const (
	lostUserStack   = "[lost user stack]"
	lostKernelStack = "[lost kernel stack]_[k]"
)

// window accumulates one svg_period of profiles.
type window struct {
	start time.Time
	procs map[int]*procProfile
}

func newWindow(now time.Time) *window { return &window{start: now, procs: map[int]*procProfile{}} }

// run drains the kernel maps every drain interval, pushes to Pyroscope
// every 20 s and writes the outputs every svg_period; on stop it drains,
// writes and pushes what it has.
func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	svg := p.svgEvery(p.cfg)
	p.mu.Unlock()
	drain := time.NewTicker(p.drain)
	defer drain.Stop()
	push := time.NewTicker(p.pushEvery)
	defer push.Stop()
	out := time.NewTicker(svg)
	defer out.Stop()
	for {
		select {
		case <-ctx.Done():
			p.collectAndReport()
			now := p.now()
			p.flush(now)
			p.push(context.WithoutCancel(ctx), now)
			return nil
		case <-push.C:
			p.collectAndReport()
			p.push(ctx, p.now())
		case <-p.kick:
			p.mu.Lock()
			if d := p.svgEvery(p.cfg); d != svg {
				svg = d
				out.Reset(d)
			}
			p.mu.Unlock()
		case <-drain.C:
			p.collectAndReport()
		case <-out.C:
			p.collectAndReport()
			p.flush(p.now())
		}
	}
}

func (p *Probe) svgEvery(cfg probe.Config) time.Duration {
	if p.svgPeriod > 0 {
		return p.svgPeriod
	}
	s := cfg.Params.SvgPeriod
	if s <= 0 {
		s = probe.DefaultParams().SvgPeriod
	}
	return time.Duration(s) * time.Second
}

func (p *Probe) collectAndReport() {
	if err := p.collect(); err != nil {
		probe.LogError(p.rt, "flamegraph: drain failed", err)
	}
}

// countsMaps hold each kind's counts in the kernel.
var countsMaps = [nKinds]string{"oncpu_counts", "offcpu_counts", "mem_counts", "glibc_counts"}

// entry is one drained counts-map row: samples, ns or bytes, and for the
// memory kinds the faults or allocations.
type entry struct {
	key       flameFlameKey
	val, objs uint64
}

// stackReader reads stacks from the stack map once per collect.
type stackReader struct {
	m     *ebpf.Map
	cache map[int32][]uint64
	used  map[int32]bool
}

func (r *stackReader) read(id int32) ([]uint64, bool) {
	if s, ok := r.cache[id]; ok {
		return s, s != nil
	}
	r.used[id] = true
	var raw [maxStackDepth]uint64
	if err := r.m.Lookup(&id, &raw); err != nil {
		r.cache[id] = nil
		return nil, false
	}
	n := 0
	for n < len(raw) && raw[n] != 0 {
		n++
	}
	s := raw[:n:n]
	r.cache[id] = s
	return s, true
}

// collect drains the counts maps into the current windows, names their
// stacks, reads mem_glibc's live blocks and deletes the stacks nothing
// refers to any more.
func (p *Probe) collect() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return nil
	}
	if p.glibc != nil {
		p.glibc.scan(observer(p.cfg.Targets)) // processes new to the snoopers
	}
	var errs []error
	var drained [nKinds][]entry
	for k, name := range countsMaps {
		var es []entry
		var err error
		if kind(k).isMem() {
			es, err = drainMap(p.coll.Maps[name], func(v flameFlameMem) (uint64, uint64) { return v.Bytes, v.Objects })
		} else {
			es, err = drainMap(p.coll.Maps[name], func(v uint64) (uint64, uint64) { return v, 0 })
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", name, err))
		}
		drained[k] = es
	}
	keep, err := p.pendingStacks()
	if err != nil {
		errs = append(errs, err)
	}
	// After the drain: every block whose allocation was drained is in
	// glibc_allocs already (the kernel writes it first), so its stack
	// is kept.
	blocks, err := p.liveBlocks(keep)
	if err != nil {
		errs = append(errs, err)
	}

	sr := &stackReader{m: p.coll.Maps["stacks"], cache: map[int32][]uint64{}, used: map[int32]bool{}}
	var lost uint64
	refreshed := map[int]bool{}
	// mem_glibc's stacks are taken at the allocator's return: their
	// leaf is a return address too.
	name := func(key flameFlameKey, retLeaf bool) string {
		pid := int(key.Tgid)
		if !refreshed[pid] {
			refreshed[pid] = true
			_ = p.syms.Refresh(pid) // gone: its last mappings serve
		}
		frames, n := p.frames(pid, key, sr, retLeaf)
		lost += n
		return strings.Join(frames, ";")
	}
	// The kernel counts a new process from its fork or exec until user
	// space has classified it: its samples wait for the next collect
	// while the snoopers have not settled about it (snoop.Holdback), and
	// go if it turned out not observed.
	g := p.hold.Begin(p.cfg.Targets)
	held := p.held
	p.held = nil
	for _, s := range held {
		lost += p.offer(g, s)
	}
	for k := range drained {
		for _, e := range drained[k] {
			pid := int(e.key.Tgid)
			v := e.val
			if kind(k) == offCPU {
				v /= 1000 // ns -> µs
			}
			switch g.Verdict(e.key.Tgid) {
			case snoop.Report:
				p.addSample(kind(k), pid, name(e.key, kind(k) == memGlibc), v, e.objs)
			case snoop.Hold:
				p.held = append(p.held, heldSample{k: kind(k), pid: pid, stack: name(e.key, kind(k) == memGlibc), v: v, objs: e.objs})
			case snoop.Expire:
				lost++
			}
		}
	}
	p.hold.End()
	p.setLive(blocks, name)
	// Samples counted since the drain may name the same stacks: keep
	// theirs. What remains racy is a sample between this scan and the
	// delete (microseconds), which then shows as a lost stack.
	for i, name := range countsMaps {
		var k flameFlameKey
		var v any = new(uint64)
		if kind(i).isMem() {
			v = new(flameFlameMem)
		}
		it := p.coll.Maps[name].Iterate()
		for it.Next(&k, v) {
			keep[k.UserStack], keep[k.KernStack] = true, true
		}
		if err := it.Err(); err != nil {
			errs = append(errs, fmt.Errorf("scan %s: %w", name, err))
		}
	}
	for id := range sr.used {
		if !keep[id] {
			_ = sr.m.Delete(&id) // already gone: nothing to do
		}
	}
	dl, err := p.readDrops()
	if err != nil {
		errs = append(errs, err)
	}
	if lost+dl > 0 {
		p.rt.Lost(lost + dl)
	}
	return errors.Join(errs...)
}

// heldSample is a named sample of a process the snoopers had not settled
// about when it was collected.
type heldSample struct {
	k       kind
	pid     int
	stack   string
	v, objs uint64
}

// offer adds a held sample as the collect's verdict on its process says:
// it returns 1 when the sample is dropped as lost (held too long).
func (p *Probe) offer(g snoop.Gate, s heldSample) uint64 {
	switch g.Verdict(uint32(s.pid)) {
	case snoop.Report:
		p.addSample(s.k, s.pid, s.stack, s.v, s.objs)
	case snoop.Hold:
		p.held = append(p.held, s)
	case snoop.Expire:
		return 1
	}
	return 0
}

// frames names a key's stacks: the user frames root to leaf, then the
// kernel frames suffixed "_[k]". n counts the stacks no longer in the map.
// retLeaf: the user stack's leaf is a return address (named by the call
// before it), not a sampled pc. For a JVM with native_stack 0 (the
// default, as gala-gopher) only its Java frames are kept: those of its
// perf map (compiled methods, the interpreter, stubs) and unnamed code in
// anonymous memory; frames of ELF files (libjvm, libc, the launcher) and
// the kernel's are left out, so time spent wholly in native code is the
// process's own.
func (p *Probe) frames(pid int, key flameFlameKey, sr *stackReader, retLeaf bool) (frames []string, n uint64) {
	javaOnly := p.cfg.Params.NativeStack == 0 && p.jit.isJava(pid)
	if id := key.UserStack; id >= 0 {
		if pcs, ok := sr.read(id); ok {
			for i := len(pcs) - 1; i >= 0; i-- {
				pc := pcs[i]
				if i > 0 || retLeaf {
					pc-- // a return address: name the call
				}
				name, native := p.userName(pid, pc)
				if javaOnly && native {
					continue
				}
				frames = append(frames, frameName(name))
			}
		} else {
			frames = append(frames, lostUserStack)
			n++
		}
	} else if id != errEFAULT {
		frames = append(frames, lostUserStack)
	}
	if javaOnly {
		return frames, n
	}
	if id := key.KernStack; id >= 0 {
		if pcs, ok := sr.read(id); ok {
			// The walk starts inside the BPF program: drop the
			// tracing machinery's frames at the leaf.
			first := 0
			for first < len(pcs)-1 && isTracingFrame(p.syms.Kernel(pcs[first])) {
				first++
			}
			for i := len(pcs) - 1; i >= first; i-- {
				pc := pcs[i]
				if i > first {
					pc--
				}
				frames = append(frames, frameName(p.syms.Kernel(pc))+"_[k]")
			}
		} else {
			frames = append(frames, lostKernelStack)
			n++
		}
	} else if id != errEFAULT {
		frames = append(frames, lostKernelStack)
	}
	return frames, n
}

// userName names a user address: from the mapped ELF file (native),
// else (JIT code, in anonymous memory) from the process's perf map when it
// is a JVM.
func (p *Probe) userName(pid int, pc uint64) (name string, native bool) {
	name = p.syms.User(pid, pc)
	if name != symtab.Unknown {
		return name, true
	}
	if jn, ok := p.jit.lookup(pid, pc); ok {
		return jn, false
	}
	return name, false
}

// isTracingFrame tells the kernel functions that run a BPF program from a
// tracepoint (and the program itself) from the traced code.
func isTracingFrame(name string) bool {
	for _, prefix := range []string{"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_get_stack"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func (p *Probe) addSample(k kind, pid int, stack string, v, objs uint64) {
	pp := p.windows[k].proc(pid, p.newProc)
	pp.add(stack, v, objs)
	if _, ok := pyroscopeAddr(p.cfg.Params.PyroscopeServer); ok {
		p.pushWin[k].proc(pid, func(int) *procProfile { return pp.empty() }).add(stack, v, objs)
	}
	p.hub.publish(k, pp, stack, v, objs)
}

// proc is the window's profile of pid, made by mk if new.
func (w *window) proc(pid int, mk func(int) *procProfile) *procProfile {
	pp, ok := w.procs[pid]
	if !ok {
		pp = mk(pid)
		w.procs[pid] = pp
	}
	return pp
}

// newProc starts a process's profile: its comm, and its container and pod
// names when the identity resolver knows them.
func (p *Probe) newProc(pid int) *procProfile {
	pp := &procProfile{pid: pid, comm: readComm(p.procRoot, pid), stacks: map[string]uint64{}}
	if p.ids == nil {
		return pp
	}
	proc, ok := p.ids.Process(pid)
	if !ok || proc.ContainerID == "" {
		return pp
	}
	pp.con = proc.ContainerID[:min(12, len(proc.ContainerID))]
	if c, ok := p.ids.Container(proc.ContainerID); ok {
		if c.Name != "" {
			pp.con = c.Name
		}
		pp.pod = c.PodName
	}
	return pp
}

func readComm(procRoot string, pid int) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	if err != nil {
		return "[exited]"
	}
	return frameName(strings.TrimSpace(string(b)))
}

// drainMap reads and deletes every row of a counts map whose values are
// V, made into an entry by val. Each row is read and deleted atomically
// (BPF_MAP_LOOKUP_AND_DELETE_ELEM), so a sample counted meanwhile lands in
// the next drain.
func drainMap[V any](m *ebpf.Map, val func(V) (uint64, uint64)) ([]entry, error) {
	keys, err := mapKeys[flameFlameKey, V](m)
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(keys))
	var v V
	for _, k := range keys {
		if err := m.LookupAndDelete(&k, &v); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return out, err
		}
		b, n := val(v)
		out = append(out, entry{k, b, n})
	}
	return out, nil
}

// pendingStacks are the stack ids blocked threads left in offcpu_start:
// their off-CPU time is counted when they wake, so their stacks must stay.
// Entries of threads that no longer exist are deleted, in offcpu_start and
// glibc_pending.
func (p *Probe) pendingStacks() (map[int32]bool, error) {
	keep := map[int32]bool{}
	m := p.coll.Maps["offcpu_start"]
	var tid uint32
	var st flameFlameStart
	var gone []uint32
	it := m.Iterate()
	for it.Next(&tid, &st) {
		if _, err := os.Stat(filepath.Join(p.procRoot, strconv.Itoa(int(st.Tgid)), "task", strconv.Itoa(int(tid)))); err != nil {
			gone = append(gone, tid)
			continue
		}
		keep[st.UserStack] = true
		keep[st.KernStack] = true
	}
	for _, t := range gone {
		_ = m.Delete(&t)
	}
	if err := it.Err(); err != nil {
		return keep, err
	}
	// Allocation calls of threads that exited inside them.
	pend := p.coll.Maps["glibc_pending"]
	var id uint64
	var pe flameFlamePending
	var stale []uint64
	it = pend.Iterate()
	for it.Next(&id, &pe) {
		if _, err := os.Stat(filepath.Join(p.procRoot, strconv.Itoa(int(id>>32)), "task", strconv.Itoa(int(uint32(id))))); err != nil {
			stale = append(stale, id)
		}
	}
	for _, id := range stale {
		_ = pend.Delete(&id)
	}
	return keep, it.Err()
}

// readDrops returns the growth of the kernel's drop counters.
func (p *Probe) readDrops() (uint64, error) {
	m := p.coll.Maps["drops"]
	var n uint64
	for i := range p.drops {
		var per []uint64
		key := uint32(i)
		if err := m.Lookup(&key, &per); err != nil {
			return n, fmt.Errorf("read drops: %w", err)
		}
		var sum uint64
		for _, c := range per {
			sum += c
		}
		if sum > p.drops[i] {
			n += sum - p.drops[i]
			p.drops[i] = sum
		}
	}
	return n, nil
}

// flush writes the windows' outputs and starts new windows.
func (p *Probe) flush(now time.Time) {
	p.mu.Lock()
	cfg := p.cfg
	var ws [nKinds]*window
	for k := range p.windows {
		ws[k] = p.windows[k]
		p.windows[k] = newWindow(now)
	}
	// mem_glibc's live blocks at the window's end, also of processes
	// that allocated nothing during it.
	for pid, l := range p.live {
		ws[memGlibc].proc(pid, func(int) *procProfile { return l.empty() }).live = l.live
	}
	period := time.Duration(samplePeriod(cfg))
	p.mu.Unlock()

	outDir := cfg.Params.OutputDir
	if outDir == "" {
		outDir = DefaultOutputDir
	}
	flameDir := cfg.Params.FlameDir
	if flameDir == "" {
		flameDir = probe.DefaultParams().FlameDir
	}
	for k, w := range ws {
		for pid, pp := range w.procs {
			if err := writeOutputs(kind(k), pp, outDir, flameDir, period, w.start, now); err != nil {
				probe.LogError(p.rt, "flamegraph: write outputs", err, "type", kind(k).String(), "pid", pid)
			}
		}
		if err := prune(filepath.Join(outDir, kind(k).String()), now.Add(-retention)); err != nil {
			p.log.Debug("flamegraph: retention", "err", err)
		}
	}
	for _, w := range ws {
		for pid := range w.procs {
			if _, err := os.Stat(filepath.Join(p.procRoot, strconv.Itoa(pid))); err != nil {
				p.syms.Forget(pid)
				p.jit.forget(pid)
			}
		}
	}
}

// outputPaths are gala-gopher's: the folded stacks at
// <flame_dir>/<type>/tmp_<pid>, the SVG (and galago's pprof next to it) at
// <output_dir>/<type>/<YYYY-MM-DD>/<YYYY-MM-DD-HH-MM-SS>-<pid>.svg.
func outputPaths(k kind, pid int, outDir, flameDir string, at time.Time) (folded, svg, pprof string) {
	day := at.Format("2006-01-02")
	base := filepath.Join(outDir, k.String(), day, fmt.Sprintf("%s-%d", at.Format("2006-01-02-15-04-05"), pid))
	return filepath.Join(flameDir, k.String(), fmt.Sprintf("tmp_%d", pid)), base + ".svg", base + ".pb.gz"
}

func writeOutputs(k kind, pp *procProfile, outDir, flameDir string, period time.Duration, start, now time.Time) error {
	folded, svg, pprofPath := outputPaths(k, pp.pid, outDir, flameDir, now)
	title := fmt.Sprintf("%s [%d]%s", k.title(), pp.pid, pp.comm)
	if len(pp.stacks) > 0 {
		if err := writeGraph(k, title, pp.lines(), folded, svg); err != nil {
			return err
		}
	}
	if len(pp.live) > 0 {
		// The live bytes (gala-gopher's memory-leak view) beside them.
		if err := writeGraph(k, title+" (in use)", pp.liveLines(), folded+liveSuffix, strings.TrimSuffix(svg, ".svg")+liveSuffix+".svg"); err != nil {
			return err
		}
	}
	prof := toPprof(k, []*procProfile{pp}, period, start, now.Sub(start))
	return writeFile(pprofPath, func(f *os.File) error {
		zw := gzip.NewWriter(f)
		if err := prof.WriteUncompressed(zw); err != nil {
			return err
		}
		return zw.Close()
	})
}

// liveSuffix marks mem_glibc's live-bytes files: tmp_<pid>.inuse and
// <time>-<pid>.inuse.svg.
const liveSuffix = ".inuse"

// writeGraph writes folded lines and their SVG.
func writeGraph(k kind, title string, lines []foldedLine, folded, svg string) error {
	if err := writeFile(folded, func(f *os.File) error { return writeFolded(f, lines) }); err != nil {
		return err
	}
	return writeFile(svg, func(f *os.File) error { return writeSVG(f, k, title, lines) })
}

// writeFile writes name through a temporary file and a rename, so readers
// never see a partial file.
func writeFile(name string, fill func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), name)
}

// prune removes the date directories under dir older than cutoff.
func prune(dir string, cutoff time.Time) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing written yet
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		day, err := time.ParseInLocation("2006-01-02", e.Name(), cutoff.Location())
		if err != nil || !e.IsDir() {
			continue
		}
		if day.Add(24 * time.Hour).Before(cutoff) {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
