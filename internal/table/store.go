package table

import (
	"container/heap"
	"errors"
	"sort"
	"sync"
	"time"
)

// Limits are gala-gopher's imdb section.
type Limits struct {
	MaxTables  int           // max_tables_num
	MaxRecords int           // max_records_num, per table
	MaxMetrics int           // max_metrics_num, metric fields per table
	Timeout    time.Duration // record_timeout
}

// Drop reasons, the label values of the store's drop counter.
const (
	DropTables = "max_tables_num"
	// DropRecords counts rows of the current period refused because
	// max_records_num rows of that same period already fill their table:
	// their data reached no channel.
	DropRecords = "max_records_num"
	// DropRecordsEvicted counts rows of an earlier period removed before
	// their record_timeout to make room for rows of the current period.
	// Their data was already handed to every channel; only their ageing in
	// /metrics was cut short.
	DropRecordsEvicted = "max_records_num_evicted"
	DropMetrics        = "max_metrics_num"
	DropAged           = "record_timeout"
)

// DropReasons lists every reason, so a self-metric can show each one from
// the start.
var DropReasons = []string{DropTables, DropRecords, DropRecordsEvicted, DropMetrics, DropAged}

// Errors returned by Put; the record is dropped and counted.
var (
	ErrTooManyTables  = errors.New("imdb: max_tables_num reached")
	ErrTooManyRecords = errors.New("imdb: max_records_num reached by rows of the current period")
	ErrTooManyMetrics = errors.New("imdb: table has more metric fields than max_metrics_num")
)

// Enricher computes a record's enrichment labels (comm, container, pod,
// snooper and custom labels, machine_id) in gala-gopher's order.
type Enricher interface {
	Enrich(r *Record, src *Source) []Label
}

// Source tells the store where a record comes from.
type Source struct {
	Probe string
	// SnooperLabels returns the proc_name snooper labels of a process (nil ok).
	SnooperLabels func(pid int) map[string]string
	// CustomLabels are the probe's custom_labels.
	CustomLabels map[string]string
	// PodLabels are the Kubernetes pod label keys (pod_labels) whose values
	// are added to the rows of pod containers.
	PodLabels []string
}

type entry struct {
	key     string
	rec     *Record
	end     int64 // rec.Time in unix ns: the heap compares it often
	expires time.Time
	seq     uint64 // Put order, the tie-break between rows of one period
	pos     int    // index in the table's age heap
}

// rows is one table's records: by key, and in a heap ordered by the period
// they describe (oldest first), so that the limit finds the stalest row in
// O(log n).
type rows struct {
	byKey map[string]*entry
	age   ageHeap
}

type ageHeap []*entry

func (h ageHeap) Len() int { return len(h) }
func (h ageHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].seq < h[j].seq
}
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *ageHeap) Push(x any) {
	e := x.(*entry)
	e.pos = len(*h)
	*h = append(*h, e)
}
func (h *ageHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func (t *rows) remove(e *entry) {
	heap.Remove(&t.age, e.pos)
	delete(t.byKey, e.key)
}

// Store keeps the latest record per (table, key) until it ages out. Reads are
// not destructive: every scrape sees the same data until a newer period or the
// record's timeout replaces it.
//
// gala-gopher's IMDB deletes rows as it renders them, so max_records_num
// bounds one period's rows. galago keeps rendered rows for record_timeout
// instead, so when a table is full the row describing the oldest period
// makes room for a row of a newer period; only when every row already
// belongs to the new row's period is the new row refused. A row of the
// current period is therefore never dropped for a stale one.
type Store struct {
	lim    Limits
	enrich Enricher
	now    func() time.Time

	mu      sync.RWMutex
	tables  map[string]*rows
	seq     uint64
	dropped map[string]uint64
}

// NewStore returns an empty store. enrich may be nil.
func NewStore(lim Limits, enrich Enricher, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{lim: lim, enrich: enrich, now: now,
		tables: map[string]*rows{}, dropped: map[string]uint64{}}
}

func (s *Store) metricCount(t *Table) int {
	n := 0
	for _, f := range t.Fields {
		if f.Kind.IsMetric() {
			n++
		}
	}
	return n
}

// Put enriches r and stores it as the latest record of its key. A record is
// kept for record_timeout or two report periods, whichever is longer, so a
// probe reporting every 60 s never flickers out between reports.
func (s *Store) Put(r *Record, src *Source) error {
	if s.lim.MaxMetrics > 0 && s.metricCount(r.Table) > s.lim.MaxMetrics {
		s.drop(DropMetrics)
		return ErrTooManyMetrics
	}
	if s.enrich != nil {
		r.Extra = s.enrich.Enrich(r, src)
	}
	key := r.Key()
	ttl := s.lim.Timeout
	if 2*r.Period > ttl {
		ttl = 2 * r.Period
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[r.Table.Name]
	if !ok {
		if s.lim.MaxTables > 0 && len(s.tables) >= s.lim.MaxTables {
			s.dropped[DropTables]++
			return ErrTooManyTables
		}
		t = &rows{byKey: map[string]*entry{}}
		s.tables[r.Table.Name] = t
	}
	s.seq++
	if e, exists := t.byKey[key]; exists {
		e.rec, e.end, e.expires, e.seq = r, r.Time.UnixNano(), now.Add(ttl), s.seq
		heap.Fix(&t.age, e.pos)
		return nil
	}
	if s.lim.MaxRecords > 0 && len(t.byKey) >= s.lim.MaxRecords {
		// Only the row of the oldest period is looked at: if it is not
		// stale, no row is, and the table is full of the current period.
		// A row past its timeout is at least two periods old, so (one
		// probe, one period per table) it is the oldest too; it is
		// counted as aged rather than evicted.
		oldest := t.age[0]
		switch {
		case !now.Before(oldest.expires):
			s.dropped[DropAged]++
		case stale(oldest.rec, r):
			s.dropped[DropRecordsEvicted]++
		default:
			s.dropped[DropRecords]++
			return ErrTooManyRecords
		}
		t.remove(oldest)
	}
	e := &entry{key: key, rec: r, end: r.Time.UnixNano(), expires: now.Add(ttl), seq: s.seq}
	t.byKey[key] = e
	heap.Push(&t.age, e)
	return nil
}

// stale reports whether old describes a period that ended before the period
// of r began. Rows written by one report of a probe share their end time;
// rows of a probe stamped line by line (custom probes) fall within one
// period of each other, so they are not stale to one another either.
func stale(old, r *Record) bool {
	if r.Period <= 0 {
		return old.Time.Before(r.Time)
	}
	return !old.Time.After(r.Time.Add(-r.Period))
}

func (s *Store) drop(reason string) {
	s.mu.Lock()
	s.dropped[reason]++
	s.mu.Unlock()
}

func (s *Store) expireTable(t *rows, now time.Time) {
	for _, e := range t.byKey {
		if !now.Before(e.expires) {
			t.remove(e)
			s.dropped[DropAged]++
		}
	}
}

// Expire removes every record whose timeout has passed.
func (s *Store) Expire() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.tables {
		s.expireTable(t, now)
		if len(t.byKey) == 0 {
			delete(s.tables, name)
		}
	}
}

// Each calls fn for every live record, ordered by table name then key, so
// that output is stable. Records must not be modified.
func (s *Store) Each(fn func(r *Record)) {
	now := s.now()
	s.mu.RLock()
	names := make([]string, 0, len(s.tables))
	for n := range s.tables {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*Record
	for _, n := range names {
		t := s.tables[n]
		keys := make([]string, 0, len(t.byKey))
		for k, e := range t.byKey {
			if now.Before(e.expires) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, t.byKey[k].rec)
		}
	}
	s.mu.RUnlock()
	for _, r := range out {
		fn(r)
	}
}

// Dropped returns the drop counters by reason.
func (s *Store) Dropped() map[string]uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]uint64, len(s.dropped))
	for k, v := range s.dropped {
		out[k] = v
	}
	return out
}

// Len is the number of stored records.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, t := range s.tables {
		n += len(t.byKey)
	}
	return n
}
