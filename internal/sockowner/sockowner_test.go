package sockowner

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

func TestAcquireNil(t *testing.T) {
	var s *Shared
	maps, release, err := s.Acquire(&ebpf.CollectionSpec{})
	if err != nil || maps != nil {
		t.Fatalf("nil Shared: maps %v err %v, want none", maps, err)
	}
	release()
}

// An object without the owner maps is refused, naming the map, and the
// Shared is left as it was (no maps created, no reference taken).
func TestAcquireMissingMap(t *testing.T) {
	s := NewShared()
	spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		OwnersMap: {Name: OwnersMap, Type: ebpf.SkStorage, KeySize: 4, ValueSize: 48, Flags: 1},
	}}
	_, _, err := s.Acquire(spec)
	if err == nil || !strings.Contains(err.Error(), ListenMap) {
		t.Fatalf("err %v, want one naming %s", err, ListenMap)
	}
	if s.maps != nil || s.refs != 0 {
		t.Fatalf("state changed: maps %v refs %d", s.maps, s.refs)
	}
}
