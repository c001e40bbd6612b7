package bpfrt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/snoop"
)

// Names and values shared with bpf/include/common.h (GALAGO_FILTER).
const (
	FilterModeVar        = "galago_filter_cfg"
	FilterTGIDsMap       = "filter_tgids"
	FilterCgroupsMap     = "filter_cgroups"
	FilterPendingMap     = "filter_pending"
	FilterDecidedMap     = "filter_decided"
	FilterPendingLostMap = "filter_pending_lost"
	FilterForkProgram    = "galago_filter_fork"
	FilterExecProgram    = "galago_filter_exec"
)

// FilterMode is enum galago_filter_mode.
type FilterMode uint32

const (
	FilterOff       FilterMode = 0 // observe everything
	FilterWhitelist FilterMode = 1 // only listed tgids and cgroups
	FilterBlacklist FilterMode = 2 // everything but listed tgids and cgroups

	// filterFlagPending is GALAGO_FILTER_F_PENDING.
	filterFlagPending FilterMode = 0x100
)

// PruneInterval is how often FilterSync.Run forgets exited processes'
// pending entries and reads the pending-lost counter.
const PruneInterval = time.Second

// FilterObjects are the GALAGO_FILTER variable, maps and programs of a
// loaded object.
type FilterObjects struct {
	Mode                     *ebpf.Variable
	TGIDs, Cgroups           *ebpf.Map
	Pending, Decided, Lost   *ebpf.Map
	ForkProgram, ExecProgram *ebpf.Program
}

// FilterObjectsOf finds the filter maps and programs of a collection by
// their names.
func FilterObjectsOf(coll *ebpf.Collection) FilterObjects {
	return FilterObjects{
		Mode: coll.Variables[FilterModeVar], TGIDs: coll.Maps[FilterTGIDsMap], Cgroups: coll.Maps[FilterCgroupsMap],
		Pending: coll.Maps[FilterPendingMap], Decided: coll.Maps[FilterDecidedMap], Lost: coll.Maps[FilterPendingLostMap],
		ForkProgram: coll.Programs[FilterForkProgram], ExecProgram: coll.Programs[FilterExecProgram],
	}
}

// Decider is implemented by snoop.Targets that can say when they last
// classified a process (snoop.Set): with it, a whitelist that follows
// running processes observes a new process from its fork or exec until it
// is classified, in the kernel.
type Decider interface {
	// Dynamic reports whether new processes may join the set at exec.
	Dynamic() bool
	// DecidedAt is the CLOCK_MONOTONIC time (ns) as of which the
	// classification of pid is current: 0 when the pid was never
	// classified, math.MaxUint64 when it has exited.
	DecidedAt(pid int) uint64
}

// FilterSync keeps a BPF object's filter maps equal to a snoop.Targets and
// runs the pending classification of new processes (see common.h): it
// attaches the object's fork and exec programs, tells the kernel when each
// pending process has been classified, and forgets exited ones. Updates of
// the sets are diffs against what it last wrote, so a change of one process
// costs one map operation. A FilterSync assumes it is the only writer of
// the maps. Its methods are safe for concurrent use.
type FilterSync struct {
	o      FilterObjects
	links  []link.Link
	onLost func(uint64)
	wake   chan struct{}

	mu         sync.Mutex
	targets    snoop.Targets
	curMode    FilterMode
	modeSet    bool
	curTGIDs   map[uint32]struct{}
	curCgroups map[uint64]struct{}
	curDecided map[uint32]uint64 // what filter_decided holds
	lostSeen   uint64
}

// NewFilterSync attaches o's fork and exec programs; onLost (may be nil)
// receives the forks and execs that could not be marked pending. Close
// detaches them.
func NewFilterSync(o FilterObjects, onLost func(uint64)) (*FilterSync, error) {
	if o.Mode == nil || o.TGIDs == nil || o.Cgroups == nil || o.Pending == nil || o.Decided == nil || o.Lost == nil ||
		o.ForkProgram == nil || o.ExecProgram == nil {
		return nil, errors.New("bpfrt: filter maps or programs missing: define GALAGO_FILTER before including common.h")
	}
	f := &FilterSync{
		o: o, onLost: onLost, wake: make(chan struct{}, 1),
		curTGIDs:   map[uint32]struct{}{},
		curCgroups: map[uint64]struct{}{},
		curDecided: map[uint32]uint64{},
	}
	for _, p := range []*ebpf.Program{o.ForkProgram, o.ExecProgram} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("bpfrt: attach snooper filter program: %w", err)
		}
		f.links = append(f.links, l)
	}
	return f, nil
}

// Programs are the attached programs by name, for Stats.
func (f *FilterSync) Programs() map[string]*ebpf.Program {
	return map[string]*ebpf.Program{FilterForkProgram: f.o.ForkProgram, FilterExecProgram: f.o.ExecProgram}
}

// Close detaches the programs. Idempotent.
func (f *FilterSync) Close() error {
	var errs []error
	for _, l := range f.links {
		errs = append(errs, l.Close())
	}
	f.links = nil
	return errors.Join(errs...)
}

// Run follows the targets given to Sync until ctx is done: it syncs on
// every Changed of the current targets and prunes every PruneInterval.
func (f *FilterSync) Run(ctx context.Context) error {
	tick := time.NewTicker(PruneInterval)
	defer tick.Stop()
	var changed <-chan struct{}
	var t snoop.Targets
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake: // Sync was given (maybe new) targets: follow them
			f.mu.Lock()
			t = f.targets
			f.mu.Unlock()
			changed = nil
			if t != nil {
				changed = t.Changed()
			}
		case _, ok := <-changed:
			if !ok {
				changed = nil // the set will not change again
				continue
			}
			if err := f.sync(t, false); err != nil {
				return err
			}
		case <-tick.C:
			if err := f.prune(); err != nil {
				return err
			}
		}
	}
}

// Sync makes t the current targets and writes its sets and mode now. A nil
// t means no snoopers: everything is observed. The sets are written before
// the mode (turning a filter on never observes a moment with an empty
// whitelist), and classifications are read before the sets and written
// after them, so a process stops being pending only once its listing is
// in the kernel.
func (f *FilterSync) Sync(t snoop.Targets) error { return f.sync(t, true) }

func (f *FilterSync) sync(t snoop.Targets, follow bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if follow {
		f.targets = t
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	mode := FilterOff
	var pids []int
	var cgroups []uint64
	d, _ := t.(Decider)
	var decided map[uint32]uint64
	if t != nil {
		mode = FilterWhitelist
		if t.Mode() == snoop.Blacklist {
			mode = FilterBlacklist
		} else if d != nil && d.Dynamic() {
			mode |= filterFlagPending
			var err error
			if decided, err = f.classifiedLocked(d); err != nil {
				return err
			}
		}
		pids, cgroups = t.PIDs(), t.CgroupIDs()
	}

	wantT := make(map[uint32]struct{}, len(pids))
	for _, p := range pids {
		if p > 0 {
			wantT[uint32(p)] = struct{}{}
		}
	}
	wantC := make(map[uint64]struct{}, len(cgroups))
	for _, c := range cgroups {
		wantC[c] = struct{}{}
	}
	// An empty blacklist observes every process, as no filter does, and
	// costs the programs nothing: the filter check then returns at once
	// instead of looking the tgid and the cgroup up on every event.
	if mode == FilterBlacklist && len(wantT) == 0 && len(wantC) == 0 {
		mode = FilterOff
	}
	if err := syncSet(f.o.TGIDs, f.curTGIDs, wantT); err != nil {
		return fmt.Errorf("sync %s: %w", FilterTGIDsMap, err)
	}
	if err := syncSet(f.o.Cgroups, f.curCgroups, wantC); err != nil {
		return fmt.Errorf("sync %s: %w", FilterCgroupsMap, err)
	}
	if err := f.writeDecidedLocked(decided); err != nil {
		return err
	}
	if !f.modeSet || mode != f.curMode {
		if err := f.o.Mode.Set(uint32(mode)); err != nil {
			return fmt.Errorf("set %s: %w", FilterModeVar, err)
		}
		f.curMode, f.modeSet = mode, true
	}
	return nil
}

// pendingMaxAge is how long a pending process that no set ever classified
// (its exec event lost and the process gone before a /proc scan) is kept.
const pendingMaxAge = 5 * time.Minute

// classifiedLocked returns, for each pending process that d has classified
// since its last fork or exec, the classification time to write
// (math.MaxUint64: the process has exited, or was never classified and is
// older than pendingMaxAge: forget it).
func (f *FilterSync) classifiedLocked(d Decider) (map[uint32]uint64, error) {
	out := map[uint32]uint64{}
	var tgid uint32
	var at uint64
	now := monoNow()
	it := f.o.Pending.Iterate()
	for it.Next(&tgid, &at) {
		if prev, ok := f.curDecided[tgid]; ok && prev >= at {
			if d.DecidedAt(int(tgid)) == math.MaxUint64 {
				out[tgid] = math.MaxUint64 // classified, then exited
			}
			continue
		}
		switch when := d.DecidedAt(int(tgid)); {
		case when >= at:
			out[tgid] = when
		case when == 0 && now > at && now-at > uint64(pendingMaxAge):
			out[tgid] = math.MaxUint64
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", FilterPendingMap, err)
	}
	return out, nil
}

func (f *FilterSync) writeDecidedLocked(decided map[uint32]uint64) error {
	for tgid, when := range decided {
		if when == math.MaxUint64 {
			// Exited: no further exec can make it pending; forget both
			// entries (an exited member of a whitelist stays listed in
			// filter_tgids for as long as it matters).
			if err := f.o.Pending.Delete(tgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("delete %s: %w", FilterPendingMap, err)
			}
			if err := f.o.Decided.Delete(tgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("delete %s: %w", FilterDecidedMap, err)
			}
			delete(f.curDecided, tgid)
			continue
		}
		if err := f.o.Decided.Put(tgid, when); err != nil {
			return fmt.Errorf("write %s: %w", FilterDecidedMap, err)
		}
		f.curDecided[tgid] = when
	}
	return nil
}

// prune runs the pending classification for processes whose decision did
// not change the sets (no Changed: e.g. a new process that does not
// match), forgets exited processes and reports pending marks lost to a
// full map.
func (f *FilterSync) prune() error {
	f.mu.Lock()
	t := f.targets
	f.mu.Unlock()
	if d, ok := t.(Decider); ok && t.Mode() == snoop.Whitelist && d.Dynamic() {
		if err := f.sync(t, false); err != nil {
			return err
		}
	} else if err := f.clearPending(); err != nil {
		return err
	}
	return f.pollLost()
}

// clearPending empties the pending maps when no set needs them.
func (f *FilterSync) clearPending() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var k uint32
	var v uint64
	var keys []uint32
	it := f.o.Pending.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return err
	}
	for tgid := range f.curDecided {
		keys = append(keys, tgid)
	}
	for _, k := range keys {
		for _, m := range []*ebpf.Map{f.o.Pending, f.o.Decided} {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
		}
		delete(f.curDecided, k)
	}
	return nil
}

func (f *FilterSync) pollLost() error {
	var per []uint64
	if err := f.o.Lost.Lookup(uint32(0), &per); err != nil {
		return fmt.Errorf("read %s: %w", FilterPendingLostMap, err)
	}
	var sum uint64
	for _, n := range per {
		sum += n
	}
	f.mu.Lock()
	delta := sum - f.lostSeen
	f.lostSeen = sum
	f.mu.Unlock()
	if delta > 0 && f.onLost != nil {
		f.onLost(delta)
	}
	return nil
}

// syncSet makes the hash map m (key K, value u8 1) hold exactly want; cur
// is what it holds now and is updated as the map is.
func syncSet[K comparable](m *ebpf.Map, cur, want map[K]struct{}) error {
	for k := range cur {
		if _, ok := want[k]; ok {
			continue
		}
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		delete(cur, k)
	}
	for k := range want {
		if _, ok := cur[k]; ok {
			continue
		}
		if err := m.Put(k, uint8(1)); err != nil {
			return err
		}
		cur[k] = struct{}{}
	}
	return nil
}

// monoNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
func monoNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}
