package bpfrt

import (
	"errors"
	"fmt"
	"time"

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
	keys, err := keysWhere(m, func(K, V) bool { return true })
	if err != nil {
		return err
	}
	var v V
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

// keysWhere returns the keys of the entries of m for which keep holds.
func keysWhere[K comparable, V any](m *ebpf.Map, keep func(K, V) bool) ([]K, error) {
	var (
		k    K
		v    V
		keys []K
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if keep(k, v) {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	return keys, nil
}

// LostCounter follows a per-CPU loss counter (a BPF_MAP_TYPE_PERCPU_ARRAY
// of one __u64) and reports its growth. Not safe for concurrent use.
type LostCounter struct {
	Map *ebpf.Map
	// Bios, when set, is a bio.h bio_starts table: Poll deletes its stale
	// entries (SweepBios) and reports them lost too.
	Bios   *ebpf.Map
	OnLost func(uint64) // may be nil
	seen   uint64
}

// Poll reports what the counter grew by since the last Poll, and the
// stale bios it deleted.
func (c *LostCounter) Poll() error {
	if c.Bios != nil {
		n, err := SweepBios(c.Bios)
		if err != nil {
			return err
		}
		if n > 0 && c.OnLost != nil {
			c.OnLost(uint64(n))
		}
	}
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

// DeleteIf deletes the entries of hash map m for which stale holds and
// returns how many it deleted (an entry deleted meanwhile by a BPF
// program is not counted).
func DeleteIf[K comparable, V any](m *ebpf.Map, stale func(K, V) bool) (int, error) {
	keys, err := keysWhere(m, stale)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range keys {
		if err := m.Delete(&keys[i]); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return n, fmt.Errorf("delete from map %s: %w", m, err)
		}
		n++
	}
	return n, nil
}

// BioStart is bio.h's struct galago_bio_start: a bio's submission time
// (bpf_ktime_get_ns) and owner.
type BioStart struct {
	TS    uint64
	Owner uint64
}

// BioStale is how long a bio may be in flight before its entry in a
// bio.h table is deleted as one whose completion will not be traced:
// twice the block layer's default request timeout (30 s), after which a
// request has completed or failed.
const BioStale = 60 * time.Second

// SweepBios deletes the entries of a bio.h bio_starts table submitted
// more than BioStale ago, returning how many: bios whose completion was
// not traced (merged past GALAGO_RQ_MAX_BIOS, or completed on a path
// without a tracepoint), which the probes count as lost.
func SweepBios(m *ebpf.Map) (int, error) {
	now, err := MonotonicNow()
	if err != nil || now <= uint64(BioStale) {
		return 0, err
	}
	return DeleteIf(m, func(_ uint64, v BioStart) bool { return v.TS < now-uint64(BioStale) })
}

// MonotonicNow is the clock of bpf_ktime_get_ns, now (ns).
func MonotonicNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("monotonic clock: %w", err)
	}
	return uint64(ts.Nano()), nil
}
