package bpfrt

import (
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

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
