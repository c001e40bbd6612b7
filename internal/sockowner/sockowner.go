// Package sockowner shares the socket owner maps of bpf/include/sockowner.h
// between the BPF objects that include it (the tcp and socket probes).
//
// Each such object declares galago_sk_owners (socket storage: who owns a
// socket) and galago_listen_owners (listeners by network namespace and
// port). Loaded alone, each object gets its own pair and each probe
// creates an owner storage element for every socket it sees. With a
// Shared, the objects loaded while another holds the maps use the same
// pair (cilium/ebpf MapReplacements): one owner element per socket however
// many probes observe it, created by whichever hook runs first, and the
// owners one probe learnt (from its hooks or its fd-table walk) serve the
// others. This is the sockets' counterpart of internal/syscap: one owner
// path for the network probes.
//
// The maps are created with the first Acquire and released with the last
// release, so owners never outlive every probe that keeps them up to date
// (a listener closed while no probe ran would otherwise stay indexed).
package sockowner

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// The shared maps, as sockowner.h names them.
const (
	OwnersMap  = "galago_sk_owners"
	ListenMap  = "galago_listen_owners"
	mapsShared = 2
)

// Shared hands out one pair of owner maps to the objects that load while it
// holds them. The zero value is not usable: use NewShared. A nil *Shared
// shares nothing (each object keeps its own maps).
type Shared struct {
	mu   sync.Mutex
	maps map[string]*ebpf.Map
	refs int
}

// NewShared returns a Shared holding no maps yet.
func NewShared() *Shared { return &Shared{} }

// Acquire returns the replacement maps for spec (to pass as
// ebpf.CollectionOptions.MapReplacements) and the function that releases
// them once the collection loaded with them is closed (or failed to load).
// The first Acquire creates the maps from spec's definitions; later ones
// check that spec defines them alike. The caller must not close the maps
// (the collection clones them). On a nil Shared it returns nil maps
// and a no-op release.
func (s *Shared) Acquire(spec *ebpf.CollectionSpec) (map[string]*ebpf.Map, func(), error) {
	if s == nil {
		return nil, func() {}, nil
	}
	specs := map[string]*ebpf.MapSpec{}
	for _, name := range []string{OwnersMap, ListenMap} {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, nil, fmt.Errorf("sockowner: the BPF object has no map %s", name)
		}
		specs[name] = ms
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maps == nil {
		maps := make(map[string]*ebpf.Map, mapsShared)
		for name, ms := range specs {
			m, err := ebpf.NewMap(ms)
			if err != nil {
				for _, m := range maps {
					_ = m.Close()
				}
				return nil, nil, fmt.Errorf("sockowner: create %s: %w", name, err)
			}
			maps[name] = m
		}
		s.maps = maps
	} else {
		for name, ms := range specs {
			if err := ms.Compatible(s.maps[name]); err != nil {
				return nil, nil, fmt.Errorf("sockowner: %s defined differently by two objects: %w", name, err)
			}
		}
	}
	s.refs++
	var once sync.Once
	return s.maps, func() { once.Do(s.release) }, nil
}

func (s *Shared) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	for _, m := range s.maps {
		_ = m.Close() // fails only for a bad fd; the collections hold clones
	}
	s.maps = nil
}
