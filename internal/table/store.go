package table

import (
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
	DropTables  = "max_tables_num"
	DropRecords = "max_records_num"
	DropMetrics = "max_metrics_num"
	DropAged    = "record_timeout"
)

// Errors returned by Put; the record is dropped and counted.
var (
	ErrTooManyTables  = errors.New("imdb: max_tables_num reached")
	ErrTooManyRecords = errors.New("imdb: max_records_num reached for table")
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
}

type entry struct {
	rec     *Record
	expires time.Time
}

// Store keeps the latest record per (table, key) until it ages out. Reads are
// not destructive: every scrape sees the same data until a newer period or the
// record's timeout replaces it.
type Store struct {
	lim    Limits
	enrich Enricher
	now    func() time.Time

	mu      sync.RWMutex
	tables  map[string]map[string]*entry
	dropped map[string]uint64
}

// NewStore returns an empty store. enrich may be nil.
func NewStore(lim Limits, enrich Enricher, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{lim: lim, enrich: enrich, now: now,
		tables: map[string]map[string]*entry{}, dropped: map[string]uint64{}}
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
	recs, ok := s.tables[r.Table.Name]
	if !ok {
		if s.lim.MaxTables > 0 && len(s.tables) >= s.lim.MaxTables {
			s.dropped[DropTables]++
			return ErrTooManyTables
		}
		recs = map[string]*entry{}
		s.tables[r.Table.Name] = recs
	}
	if _, exists := recs[key]; !exists && s.lim.MaxRecords > 0 && len(recs) >= s.lim.MaxRecords {
		s.expireTable(recs, now)
		if len(recs) >= s.lim.MaxRecords {
			s.dropped[DropRecords]++
			return ErrTooManyRecords
		}
	}
	recs[key] = &entry{rec: r, expires: now.Add(ttl)}
	return nil
}

func (s *Store) drop(reason string) {
	s.mu.Lock()
	s.dropped[reason]++
	s.mu.Unlock()
}

func (s *Store) expireTable(recs map[string]*entry, now time.Time) {
	for k, e := range recs {
		if !now.Before(e.expires) {
			delete(recs, k)
			s.dropped[DropAged]++
		}
	}
}

// Expire removes every record whose timeout has passed.
func (s *Store) Expire() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, recs := range s.tables {
		s.expireTable(recs, now)
		if len(recs) == 0 {
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
		recs := s.tables[n]
		keys := make([]string, 0, len(recs))
		for k, e := range recs {
			if now.Before(e.expires) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, recs[k].rec)
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
	for _, recs := range s.tables {
		n += len(recs)
	}
	return n
}
