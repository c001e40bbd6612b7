package sockowner

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/probe/probetest"
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

func hashSpec(name string) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: name, Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 4}
}

// Two objects get the same maps; they live until the last release, and
// the next Acquire creates fresh ones. An object defining a map otherwise
// is refused and takes no reference.
func TestPrivilegedAcquireRelease(t *testing.T) {
	probetest.RequirePrivileged(t)
	spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{OwnersMap: hashSpec(OwnersMap), ListenMap: hashSpec(ListenMap)}}
	s := NewShared()
	a, releaseA, err := s.Acquire(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := s.Acquire(spec)
	if err != nil {
		t.Fatal(err)
	}
	if a[OwnersMap] != b[OwnersMap] || a[ListenMap] != b[ListenMap] {
		t.Fatal("two objects got different maps")
	}
	other := spec.Copy()
	other.Maps[ListenMap].ValueSize = 16
	if _, _, err := s.Acquire(other); err == nil || !strings.Contains(err.Error(), ListenMap) {
		t.Fatalf("differently defined %s: err %v", ListenMap, err)
	}
	releaseA()
	releaseA() // twice: still one release
	if err := a[OwnersMap].Put(uint32(1), uint64(2)); err != nil {
		t.Fatalf("map closed while still held: %v", err)
	}
	releaseB()
	if s.maps != nil || s.refs != 0 {
		t.Fatalf("after the last release: maps %v refs %d", s.maps, s.refs)
	}
	c, releaseC, err := s.Acquire(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	var v uint64
	if err := c[OwnersMap].Lookup(uint32(1), &v); err == nil {
		t.Fatal("the fresh maps hold an entry of the released ones")
	}
}
