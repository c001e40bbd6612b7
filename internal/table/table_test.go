package table

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBuiltinMatchesReference checks every row of gala-gopher's metric list
// against the generated tables: same table, entity, field and kind, and no
// field the reference does not list.
func TestBuiltinMatchesReference(t *testing.T) {
	f, err := os.Open("testdata/gala-gopher-metrics.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	seen := map[string]int{}
	rows := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 4 {
			t.Fatalf("bad row %q", sc.Text())
		}
		rows++
		te := strings.SplitN(cols[1], "/", 2)
		tbl := Lookup(te[0])
		if tbl == nil {
			t.Errorf("table %s missing", te[0])
			continue
		}
		if tbl.Entity != te[1] {
			t.Errorf("table %s: entity %s, reference %s", tbl.Name, tbl.Entity, te[1])
		}
		field := strings.TrimPrefix(cols[2], "gala_gopher_"+tbl.Entity+"_")
		// gala-gopher's IMDB cuts names to 31 characters; galago exports
		// the full meta name (see the README's compatibility notes).
		if _, full, ok := strings.Cut(cols[4], "full meta name: "); ok {
			field, _, _ = strings.Cut(full, "]")
		}
		i := tbl.Index(field)
		if i < 0 {
			t.Errorf("table %s: field %s missing", tbl.Name, field)
			continue
		}
		if got := tbl.Fields[i].Kind.String(); got != cols[3] {
			t.Errorf("%s.%s: kind %s, reference %s", tbl.Name, field, got, cols[3])
		}
		seen[tbl.Name]++
	}
	if rows != 650 {
		t.Errorf("reference rows = %d, want 650", rows)
	}
	for _, tbl := range Builtin() {
		if seen[tbl.Name]+len(galagoFields[tbl.Name]) != len(tbl.Fields) {
			t.Errorf("table %s: %d fields, reference lists %d", tbl.Name, len(tbl.Fields), seen[tbl.Name])
		}
	}
}

// galagoFields are the fields galago adds to a reference table, each for
// a reason the README's compatibility notes give.
var galagoFields = map[string][]string{
	// gala-gopher's per-API table has no api key: its rows of one
	// session's APIs collide.
	"sermant_l7_rpc_api": {"api"},
}

func TestParseMetaErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no measurements": `version = "1";`,
		"bad kind":        `measurements:({table_name:"t",entity_name:"e",fields:({type:"key",name:"k"},{type:"bogus",name:"x"})});`,
		"dup field":       `measurements:({table_name:"t",entity_name:"e",fields:({type:"key",name:"k"},{type:"gauge",name:"k"})});`,
		"first not key":   `measurements:({table_name:"t",entity_name:"e",fields:({type:"gauge",name:"g"})});`,
		"no entity":       `measurements:({table_name:"t",fields:({type:"key",name:"k"})});`,
	} {
		if _, err := ParseMeta("x.meta", []byte(src)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram([]float64{10, 50, 100})
	for _, v := range []float64{1, 10, 11, 50, 99, 1000} {
		h.Observe(v)
	}
	want := []uint64{2, 2, 1, 1}
	for i, c := range h.Counts {
		if c != want[i] {
			t.Fatalf("counts %v, want %v", h.Counts, want)
		}
	}
	if h.Count() != 6 || h.Sum != 1171 || h.Max != 1000 {
		t.Fatalf("count %d sum %v max %v", h.Count(), h.Sum, h.Max)
	}
}

var testTable = New("t", "e", "1", Field{Name: "k", Kind: KindKey}, Field{Name: "v", Kind: KindGauge}, Field{Name: "w", Kind: KindGauge})

func rec(key string, v float64, now time.Time) *Record {
	r := testTable.NewRecord(now, 5*time.Second)
	r.SetStr(0, key)
	r.SetNum(1, v)
	return r
}

func TestStoreLimitsAndAging(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(Limits{MaxTables: 1, MaxRecords: 2, MaxMetrics: 2, Timeout: 60 * time.Second}, nil, func() time.Time { return now })
	if err := s.Put(rec("a", 1, now), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(rec("b", 2, now), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(rec("a", 3, now), nil); err != nil {
		t.Fatal("replacing a key must not count against max_records_num:", err)
	}
	if err := s.Put(rec("c", 4, now), nil); !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("third key: %v", err)
	}
	other := New("t2", "e", "1", Field{Name: "k", Kind: KindKey})
	if err := s.Put(other.NewRecord(now, time.Second), nil); !errors.Is(err, ErrTooManyTables) {
		t.Fatalf("second table: %v", err)
	}
	wide := New("t", "e", "1", Field{Name: "k", Kind: KindKey}, Field{Name: "a", Kind: KindGauge}, Field{Name: "b", Kind: KindGauge}, Field{Name: "c", Kind: KindGauge})
	if err := s.Put(wide.NewRecord(now, time.Second), nil); !errors.Is(err, ErrTooManyMetrics) {
		t.Fatalf("wide table: %v", err)
	}
	var got []string
	s.Each(func(r *Record) { got = append(got, r.Str("k")) })
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("records %v", got)
	}
	// Reads are not destructive.
	n := 0
	s.Each(func(*Record) { n++ })
	if n != 2 {
		t.Fatalf("second read saw %d records", n)
	}
	now = now.Add(61 * time.Second)
	s.Expire()
	if s.Len() != 0 {
		t.Fatalf("records left after timeout: %d", s.Len())
	}
	d := s.Dropped()
	if d[DropRecords] != 1 || d[DropTables] != 1 || d[DropMetrics] != 1 || d[DropAged] != 2 {
		t.Fatalf("dropped %v", d)
	}
}

// A record reported every 60 s must survive a 30 s record_timeout until the
// next report: the TTL is at least two periods.
func TestStoreTTLCoversPeriod(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(Limits{Timeout: 30 * time.Second}, nil, func() time.Time { return now })
	r := rec("a", 1, now)
	r.Period = 60 * time.Second
	if err := s.Put(r, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Second)
	s.Expire()
	if s.Len() != 1 {
		t.Fatal("record aged out before two periods")
	}
	now = now.Add(31 * time.Second)
	s.Expire()
	if s.Len() != 0 {
		t.Fatal("record outlived two periods")
	}
}

func TestRecordLabels(t *testing.T) {
	tbl := New("t", "e", "1", Field{Name: "k", Kind: KindKey}, Field{Name: "l", Kind: KindLabel}, Field{Name: "m", Kind: KindLabel}, Field{Name: "v", Kind: KindGauge})
	r := tbl.NewRecord(time.Unix(0, 0), time.Second)
	r.SetStr(0, "key")
	r.SetStr(2, "mm")
	r.Extra = []Label{{"machine_id", "x"}}
	got := r.Labels()
	want := []Label{{"k", "key"}, {"m", "mm"}, {"machine_id", "x"}}
	if len(got) != len(want) {
		t.Fatalf("labels %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("labels %v, want %v", got, want)
		}
	}
	if r.Key() != "t\x00key" {
		t.Fatalf("key %q", r.Key())
	}
	if got := string(r.AppendKey([]byte("junk")[:0])); got != r.Key() {
		t.Fatalf("AppendKey %q, Key %q", got, r.Key())
	}
}

// linkRow is a tcp_link-like row of a burst: one key per connection.
func linkRow(burst, conn int, end time.Time, period time.Duration) *Record {
	r := testTable.NewRecord(end, period)
	r.SetStr(0, fmt.Sprintf("b%d-c%03d", burst, conn))
	r.SetNum(1, float64(conn))
	return r
}

// TestStoreLimitKeepsCurrentPeriod replays the report of issue 6 part 2:
// three bursts of 400 rows (200 connections seen from both ends) 25 s apart,
// 5 s periods, record_timeout 60 s, max_records_num 1024. The third burst
// must be kept whole; the rows that make room for it are the oldest rows of
// the first burst, counted as evicted, and nothing of a current period is
// refused.
func TestStoreLimitKeepsCurrentPeriod(t *testing.T) {
	const period = 5 * time.Second
	start := time.Unix(1000, 0)
	now := start
	s := NewStore(Limits{MaxRecords: 1024, Timeout: 60 * time.Second}, nil, func() time.Time { return now })
	for burst := 0; burst < 3; burst++ {
		now = start.Add(time.Duration(burst) * 25 * time.Second)
		for c := 0; c < 400; c++ {
			if err := s.Put(linkRow(burst, c, now, period), nil); err != nil {
				t.Fatalf("burst %d row %d: %v", burst, c, err)
			}
		}
	}
	perBurst := map[byte]int{}
	var firstKept string
	s.Each(func(r *Record) {
		k := r.Str("k")
		perBurst[k[1]]++
		if k[1] == '0' && (firstKept == "" || k < firstKept) {
			firstKept = k
		}
	})
	if perBurst['2'] != 400 || perBurst['1'] != 400 || perBurst['0'] != 224 {
		t.Fatalf("rows per burst %v, want the third and second whole and 224 of the first", perBurst)
	}
	// The first burst's rows went in Put order: its first 176 made room.
	if firstKept != "b0-c176" {
		t.Fatalf("oldest kept row of the first burst %s, want b0-c176", firstKept)
	}
	d := s.Dropped()
	if d[DropRecords] != 0 || d[DropRecordsEvicted] != 176 || d[DropAged] != 0 {
		t.Fatalf("dropped %v, want 176 evicted and nothing else", d)
	}
}

// TestStoreLimitOnePeriodOverflows: when one period alone has more rows than
// max_records_num, the rows past the limit are refused and counted; no row
// of that period is evicted for them.
func TestStoreLimitOnePeriodOverflows(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(Limits{MaxRecords: 100, Timeout: 60 * time.Second}, nil, func() time.Time { return now })
	for c := 0; c < 130; c++ {
		err := s.Put(linkRow(0, c, now, 5*time.Second), nil)
		if want := c >= 100; (err != nil) != want || (want && !errors.Is(err, ErrTooManyRecords)) {
			t.Fatalf("row %d: %v", c, err)
		}
	}
	if d := s.Dropped(); d[DropRecords] != 30 || d[DropRecordsEvicted] != 0 || s.Len() != 100 {
		t.Fatalf("dropped %v, %d rows", d, s.Len())
	}
	// The next period replaces the oldest rows one by one.
	now = now.Add(5 * time.Second)
	for c := 0; c < 30; c++ {
		if err := s.Put(linkRow(1, c, now, 5*time.Second), nil); err != nil {
			t.Fatalf("next period row %d: %v", c, err)
		}
	}
	if d := s.Dropped(); d[DropRecords] != 30 || d[DropRecordsEvicted] != 30 || s.Len() != 100 {
		t.Fatalf("dropped %v, %d rows", d, s.Len())
	}
}

// TestStoreLimitUpdatedRowIsCurrent: a key reported again in a new period
// is a row of that period, so an older key goes first.
func TestStoreLimitUpdatedRowIsCurrent(t *testing.T) {
	t1 := time.Unix(1000, 0)
	now := t1
	s := NewStore(Limits{MaxRecords: 2, Timeout: 60 * time.Second}, nil, func() time.Time { return now })
	put := func(key string, end time.Time, period time.Duration) error {
		r := testTable.NewRecord(end, period)
		r.SetStr(0, key)
		return s.Put(r, nil)
	}
	if put("a", t1, 5*time.Second) != nil || put("b", t1, 5*time.Second) != nil {
		t.Fatal("first period refused")
	}
	now = t1.Add(5 * time.Second)
	if err := put("a", now, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := put("c", now, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var got []string
	s.Each(func(r *Record) { got = append(got, r.Str("k")) })
	if strings.Join(got, ",") != "a,c" {
		t.Fatalf("rows %v, want a,c (b was the stale one)", got)
	}
	// Rows stamped line by line (custom probes) within one period are not
	// stale to each other: d is refused, not swapped for a or c.
	if err := put("d", now.Add(time.Millisecond), 5*time.Second); !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("row of the same period: %v", err)
	}
	// A row past its timeout makes room and counts as aged.
	now = now.Add(61 * time.Second)
	if err := put("e", now, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := s.Dropped(); d[DropRecords] != 1 || d[DropRecordsEvicted] != 1 || d[DropAged] != 1 {
		t.Fatalf("dropped %v", d)
	}
}

// BenchmarkStorePut: one report of 10k rows per period, every key reported
// again each period (the usual case: heap.Fix of an existing row), within
// max_records_num.
func BenchmarkStorePut(b *testing.B) {
	now := time.Unix(1000, 0)
	s := NewStore(Limits{MaxRecords: 10000, Timeout: 60 * time.Second}, nil, func() time.Time { return now })
	recs := make([]*Record, 10000)
	for i := range recs {
		recs[i] = linkRow(0, i, now, 5*time.Second)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := recs[i%len(recs)]
		if i%len(recs) == 0 {
			now = now.Add(5 * time.Second)
		}
		r.Time = now
		if err := s.Put(r, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStorePutFullNewKeys: a full table where every row is a new key
// of a newer period, so each Put evicts the oldest row.
func BenchmarkStorePutFullNewKeys(b *testing.B) {
	now := time.Unix(1000, 0)
	s := NewStore(Limits{MaxRecords: 10000, Timeout: time.Hour}, nil, func() time.Time { return now })
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10000 == 0 {
			now = now.Add(5 * time.Second)
		}
		if err := s.Put(linkRow(i/10000, i%10000, now, 5*time.Second), nil); err != nil {
			b.Fatal(err)
		}
	}
}
