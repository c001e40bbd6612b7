package bpfrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/snoop"
)

// Names and values shared with bpf/include/common.h (GALAGO_FILTER).
const (
	FilterModeMap    = "filter_mode"
	FilterTGIDsMap   = "filter_tgids"
	FilterCgroupsMap = "filter_cgroups"
)

// FilterMode is enum galago_filter_mode.
type FilterMode uint32

const (
	FilterOff       FilterMode = 0 // observe everything
	FilterWhitelist FilterMode = 1 // only listed tgids and cgroups
	FilterBlacklist FilterMode = 2 // everything but listed tgids and cgroups
)

// FilterSync keeps a BPF object's filter maps equal to a snoop.Targets.
// Updates are diffs against what it last wrote, so a change of one process
// costs one map operation. A FilterSync assumes it is the only writer.
type FilterSync struct {
	mode, tgids, cgroups *ebpf.Map

	curMode    FilterMode
	modeSet    bool
	curTGIDs   map[uint32]struct{}
	curCgroups map[uint64]struct{}
}

// NewFilterSync takes the three maps from a loaded collection (or the maps
// struct bpf2go generated).
func NewFilterSync(mode, tgids, cgroups *ebpf.Map) (*FilterSync, error) {
	if mode == nil || tgids == nil || cgroups == nil {
		return nil, errors.New("bpfrt: filter maps missing: define GALAGO_FILTER before including common.h")
	}
	return &FilterSync{
		mode: mode, tgids: tgids, cgroups: cgroups,
		curTGIDs:   map[uint32]struct{}{},
		curCgroups: map[uint64]struct{}{},
	}, nil
}

// Run syncs now and on every t.Changed() until ctx is done. A nil t means
// no snoopers: everything is observed.
func (f *FilterSync) Run(ctx context.Context, t snoop.Targets) error {
	if err := f.Sync(t); err != nil {
		return err
	}
	if t == nil {
		<-ctx.Done()
		return nil
	}
	changed := t.Changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-changed:
			if !ok {
				changed = nil // the set will not change again
				continue
			}
			if err := f.Sync(t); err != nil {
				return err
			}
		}
	}
}

// Sync writes t's current sets and mode. Sets are written before the mode,
// so turning a filter on never observes a moment with an empty whitelist.
func (f *FilterSync) Sync(t snoop.Targets) error {
	mode := FilterOff
	var pids []int
	var cgroups []uint64
	if t != nil {
		mode = FilterWhitelist
		if t.Mode() == snoop.Blacklist {
			mode = FilterBlacklist
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
	if err := syncSet(f.tgids, f.curTGIDs, wantT); err != nil {
		return fmt.Errorf("sync %s: %w", FilterTGIDsMap, err)
	}
	if err := syncSet(f.cgroups, f.curCgroups, wantC); err != nil {
		return fmt.Errorf("sync %s: %w", FilterCgroupsMap, err)
	}
	if !f.modeSet || mode != f.curMode {
		if err := f.mode.Put(uint32(0), uint32(mode)); err != nil {
			return fmt.Errorf("set %s: %w", FilterModeMap, err)
		}
		f.curMode, f.modeSet = mode, true
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
