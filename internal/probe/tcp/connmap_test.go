package tcp

import "testing"

// TestConnMap: ids that pack and ids that do not (cookie or generation too
// wide) are kept apart exactly, including ids whose packed forms would
// collide if the wide parts were truncated.
func TestConnMap(t *testing.T) {
	m := newConnMap[int]()
	ids := []connID{
		{1, 0}, {1, 1}, {2, 0},
		{maxPackC, maxPackG}, // the widest that packs
		{maxPackC + 1, 0},    // cookie too wide: would truncate to {0, 0}
		{0, 0},
		{1, maxPackG + 1}, // generation too wide: would read as {1, 0}
		{1<<63 | 1, 1},
		{^uint64(0), ^uint32(0)},
		{maxPackC + 1 + 1, maxPackG},
		{1 << 47, 1 << 15},
		{12345678901, 3},
		{maxPackC, maxPackG + 1 + 1},
		{maxPackC + 2, maxPackG + 77},
	}
	for i, id := range ids {
		m.set(id, i)
	}
	if m.len() != len(ids) {
		t.Fatalf("len %d, want %d", m.len(), len(ids))
	}
	for i, id := range ids {
		if v, ok := m.get(id); !ok || v != i {
			t.Errorf("get(%v) = %d, %v; want %d", id, v, ok, i)
		}
	}
	seen := map[connID]int{}
	for id, v := range m.all() {
		seen[id] = v
		if v%2 == 0 {
			m.del(id) // deleting the entry being visited is allowed
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("all() visited %d entries, want %d", len(seen), len(ids))
	}
	for i, id := range ids {
		if seen[id] != i {
			t.Errorf("all() gave %v -> %d, want %d", id, seen[id], i)
		}
		if _, ok := m.get(id); ok != (i%2 == 1) {
			t.Errorf("after deleting the even ones: %v present %v", id, ok)
		}
	}
	m.clear()
	if m.len() != 0 || m.has(ids[1]) {
		t.Errorf("after clear: len %d", m.len())
	}
}

func TestPackRoundTrip(t *testing.T) {
	for _, id := range []connID{{0, 0}, {1, 2}, {maxPackC, maxPackG}, {1 << 40, 7}} {
		k, ok := pack(id)
		if !ok || unpack(k) != id {
			t.Errorf("%v: pack %x %v, unpack %v", id, k, ok, unpack(k))
		}
	}
	for _, id := range []connID{{maxPackC + 1, 0}, {0, maxPackG + 1}} {
		if _, ok := pack(id); ok {
			t.Errorf("%v packed", id)
		}
	}
}
