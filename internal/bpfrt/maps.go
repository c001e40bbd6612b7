package bpfrt

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
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
