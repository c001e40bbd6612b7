package sqlapi

// StatementSlots is how many prepared statements a Statements remembers.
const StatementSlots = 64

// Statements remembers the API template of a connection's prepared
// statements by key (MySQL's statement id, a hash of PostgreSQL's
// statement name), so that an EXECUTE gets its statement's template. It is
// bounded: StatementSlots entries, fully associative, so any 64 statements
// fit; a new statement beyond that evicts the least recently used. The
// zero value is empty and ready; it never allocates.
type Statements struct {
	keys  [StatementSlots]uint64
	used  [StatementSlots]uint32 // 0: free
	apis  [StatementSlots]string
	clock uint32
}

func (t *Statements) find(key uint64) int {
	for i := range t.keys {
		if t.keys[i] == key && t.used[i] != 0 {
			return i
		}
	}
	return -1
}

func (t *Statements) tick() uint32 {
	t.clock++
	if t.clock == 0 {
		// Wrapped after 4 billion uses: restart the ages, keeping order
		// roughly (every live entry becomes equally old).
		for i := range t.used {
			if t.used[i] != 0 {
				t.used[i] = 1
			}
		}
		t.clock = 2
	}
	return t.clock
}

// Get returns the template stored for key.
func (t *Statements) Get(key uint64) (string, bool) {
	i := t.find(key)
	if i < 0 {
		return "", false
	}
	t.used[i] = t.tick()
	return t.apis[i], true
}

// Put stores api for key, replacing what key had.
func (t *Statements) Put(key uint64, api string) {
	i := t.find(key)
	if i < 0 {
		i = 0
		for j := range t.used {
			if t.used[j] < t.used[i] {
				i = j
			}
			if t.used[i] == 0 {
				break
			}
		}
	}
	t.keys[i], t.apis[i], t.used[i] = key, api, t.tick()
}

// Delete forgets key (a closed or deallocated statement).
func (t *Statements) Delete(key uint64) {
	if i := t.find(key); i >= 0 {
		t.keys[i], t.apis[i], t.used[i] = 0, "", 0
	}
}

// Reset forgets every statement (a connection reset).
func (t *Statements) Reset() { *t = Statements{} }

// Key is the key of a statement or portal name: FNV-1a over its bytes.
func Key(name []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range name {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
