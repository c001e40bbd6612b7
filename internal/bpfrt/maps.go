package bpfrt

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TakeAll reads and deletes every row of a hash map that BPF programs
// aggregate into, calling fn for each. Each row is read and deleted in one
// operation (BPF_MAP_LOOKUP_AND_DELETE_ELEM), so what is counted after
// that lands in the next call; an update made through a pointer the
// program looked up just before the deletion is lost (a window of
// microseconds).
func TakeAll[K comparable, V any](m *ebpf.Map, fn func(K, V)) error {
	var (
		k    K
		v    V
		keys []K
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read map %s: %w", m, err)
	}
	for _, k := range keys {
		if err := m.LookupAndDelete(&k, &v); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return fmt.Errorf("take row of map %s: %w", m, err)
		}
		fn(k, v)
	}
	return nil
}

// LostCounter follows a per-CPU loss counter (a BPF_MAP_TYPE_PERCPU_ARRAY
// of one __u64) and reports its growth. Not safe for concurrent use.
type LostCounter struct {
	Map    *ebpf.Map
	OnLost func(uint64) // may be nil
	seen   uint64
}

// Poll reports what the counter grew by since the last Poll.
func (c *LostCounter) Poll() error {
	var per []uint64
	if err := c.Map.Lookup(uint32(0), &per); err != nil {
		return fmt.Errorf("read map %s: %w", c.Map, err)
	}
	var total uint64
	for _, n := range per {
		total += n
	}
	if total > c.seen && c.OnLost != nil {
		c.OnLost(total - c.seen)
	}
	c.seen = total
	return nil
}

// AllocOnInsert sets BPF_F_NO_PREALLOC on the named hash maps of spec
// (before load): the kernel then allocates an element when a key is
// inserted instead of preallocating max_entries at load, so a map costs
// its buckets (16 bytes per slot) plus what it holds. For maps whose
// inserts are rare (written by user space, or at fork, exec, listen):
// lookups cost the same, an insert allocates. A map missing from spec, or
// not a plain hash, is an error: the names are an ABI with the C side.
func AllocOnInsert(spec *ebpf.CollectionSpec, names ...string) error {
	for _, name := range names {
		m, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("map %q not in spec", name)
		}
		if m.Type != ebpf.Hash {
			return fmt.Errorf("map %q is a %s, not a hash: only hashes allocate on insert", name, m.Type)
		}
		m.Flags |= unix.BPF_F_NO_PREALLOC
	}
	return nil
}

// FilterMaps are the GALAGO_FILTER hash maps (common.h). User space writes
// filter_tgids, filter_cgroups and filter_decided; filter_pending is
// written at fork and exec, and only under a whitelist that follows
// processes. Preallocated, the four cost 3.7 MiB in every object that
// includes the filter, full or empty; allocated on insert, 0.8 MiB
// (their buckets) plus 72 bytes per entry held.
var FilterMaps = []string{FilterTGIDsMap, FilterCgroupsMap, FilterPendingMap, FilterDecidedMap}
