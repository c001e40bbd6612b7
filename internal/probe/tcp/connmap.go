package tcp

import "iter"

// connMap is a map keyed by connID that hashes one machine word: the id
// packed into a uint64 when it fits (Go's maps have a fast path for 64-bit
// keys; a struct key goes through the generic hash, which was the larger
// part of the aggregator's cost per close record). Socket cookies come
// from one kernel counter, so they stay far below 2^48 in practice, and a
// socket's generation counts its reuses after tcp_disconnect; an id that
// does not fit is kept, exactly, in a second map.
type connMap[V any] struct {
	packed map[uint64]V
	other  map[connID]V
}

const (
	genBits  = 16
	maxPackC = 1<<(64-genBits) - 1
	maxPackG = 1<<genBits - 1
)

func newConnMap[V any]() connMap[V] {
	return connMap[V]{packed: map[uint64]V{}, other: map[connID]V{}}
}

func pack(id connID) (uint64, bool) {
	if id.cookie > maxPackC || id.gen > maxPackG {
		return 0, false
	}
	return id.cookie<<genBits | uint64(id.gen), true
}

func unpack(k uint64) connID {
	return connID{cookie: k >> genBits, gen: uint32(k & maxPackG)}
}

func (m *connMap[V]) get(id connID) (V, bool) {
	if k, ok := pack(id); ok {
		v, found := m.packed[k]
		return v, found
	}
	v, found := m.other[id]
	return v, found
}

func (m *connMap[V]) set(id connID, v V) {
	if k, ok := pack(id); ok {
		m.packed[k] = v
		return
	}
	m.other[id] = v
}

func (m *connMap[V]) del(id connID) {
	if k, ok := pack(id); ok {
		delete(m.packed, k)
		return
	}
	delete(m.other, id)
}

func (m *connMap[V]) len() int { return len(m.packed) + len(m.other) }

// clear empties the map and keeps its buckets for reuse.
func (m *connMap[V]) clear() {
	clear(m.packed)
	clear(m.other)
}

// all yields every entry; the loop body may delete or overwrite the entry
// it is given (as in a range over a map).
func (m *connMap[V]) all() iter.Seq2[connID, V] {
	return func(yield func(connID, V) bool) {
		for k, v := range m.packed {
			if !yield(unpack(k), v) {
				return
			}
		}
		for id, v := range m.other {
			if !yield(id, v) {
				return
			}
		}
	}
}

func (m *connMap[V]) has(id connID) bool {
	_, ok := m.get(id)
	return ok
}
