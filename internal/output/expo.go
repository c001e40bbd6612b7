package output

import (
	"bytes"
	"compress/gzip"
	"hash/maphash"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/galago-project/galago/internal/table"
)

// The store's samples are written straight into text exposition format
// 0.0.4, without building client_golang metrics: a scrape of a large node
// spent most of its CPU making, checking, sorting and encoding one dto
// message per series. The writer keeps promhttp's output byte for byte
// (the differential test holds it to that): the same family and series
// order, value and label formatting, and the same samples dropped.

// gzipLevel trades ratio for CPU: BestSpeed compresses a scrape in about
// half the default level's time for ~12% more bytes (BENCHMARKS.md), and
// the scrape's CPU is what the agent pays on every node.
const gzipLevel = gzip.BestSpeed

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzipLevel)
	return w
}}

// textFormat is what Negotiate answers a text scraper (Prometheus without
// protobuf, curl): the only format the direct writer produces.
var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain).WithEscapingScheme(model.UnderscoreEscaping)

// expoSeries is one exported metric: a scalar sample or a histogram.
type expoSeries struct {
	rec   int32 // index into expoState.recs and .labs
	fam   int32
	val   float64 // the scalar, or the histogram's sum
	ts    int64   // ms; valid when hasTS
	hasTS bool
	count uint64 // histogram sample count
	hOff  int32  // histogram buckets in expoState.buckets
	hLen  int32
}

type expoBucket struct {
	bound float64
	cum   uint64
}

// labRange locates a record's labels in expoState.raw (exportLabels
// order) and .sorted (by name, as client_golang orders label pairs).
type labRange struct {
	off, n   int32
	valid    bool // every name is one client_golang accepts
	escape   bool // a name needs the underscores escaping
	replaced bool // a value had invalid UTF-8 replaced: may repeat a series
	rawHash  uint64
	hashed   bool
}

type expoFamily struct {
	name, out string // out: escaped for the text format
	help      string
	kind      table.Kind
	valid     bool
	shared    bool
	check     bool // run the registry's uniqueness check on its series
	n, off    int32
}

// expoState is the scratch of one scrape, kept for the next so that a
// steady scrape allocates per family, not per series.
type expoState struct {
	recs    []*table.Record
	labs    []labRange
	raw     []table.Label
	sorted  []table.Label
	series  []expoSeries
	order   []int32
	buckets []expoBucket
	fams    []expoFamily
	famIdx  map[string]int32
	famSort []int32
	dtos    []*dto.MetricFamily
	sent    map[uint64]int32 // shared families: series hash -> first series
	seen    map[uint64]int32 // registry check: sorted labels+ts -> series
	buf     []byte
	key     []byte // a record's Key(), for the histogram lookups
	seed    maphash.Seed
}

func newExpoState() *expoState {
	return &expoState{famIdx: map[string]int32{}, sent: map[uint64]int32{}, seen: map[uint64]int32{}, seed: maphash.MakeSeed()}
}

// checkLabelName is client_golang's test for a label name (UTF-8 scheme,
// no reserved "__" prefix): a sample with another name is invalid.
func checkLabelName(l string) bool {
	return model.UTF8Validation.IsValidLabelName(l) && !strings.HasPrefix(l, "__")
}

// textName escapes a name as the underscores escaping scheme does.
func textName(name string) string {
	if model.LegacyValidation.IsValidMetricName(name) {
		return name
	}
	return model.EscapeName(name, model.UnderscoreEscaping)
}

// appendLabels appends exportLabels(r) to dst without allocating.
func (st *expoState) appendLabels(r *table.Record) labRange {
	lr := labRange{off: int32(len(st.raw)), valid: true}
	add := func(name, value string) {
		for _, seen := range st.raw[lr.off:] {
			if seen.Name == name {
				return
			}
		}
		if !utf8.ValidString(value) {
			value = strings.ToValidUTF8(value, "\uFFFD")
			lr.replaced = true
		}
		if !checkLabelName(name) {
			lr.valid = false
		}
		if !model.LegacyValidation.IsValidMetricName(name) {
			lr.escape = true
		}
		st.raw = append(st.raw, table.Label{Name: name, Value: value})
	}
	for i, f := range r.Table.Fields {
		if (f.Kind == table.KindKey || f.Kind == table.KindLabel) && r.Values[i].Set {
			add(f.Name, r.Values[i].Str)
		}
	}
	for _, l := range r.Extra {
		add(l.Name, l.Value)
	}
	lr.n = int32(len(st.raw)) - lr.off
	st.sorted = append(st.sorted, st.raw[lr.off:]...)
	s := st.sorted[lr.off:]
	for i := 1; i < len(s); i++ { // few labels: insertion sort
		for j := i; j > 0 && s[j].Name < s[j-1].Name; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return lr
}

func (st *expoState) rawLabels(rec int32) []table.Label {
	lr := st.labs[rec]
	return st.raw[lr.off : lr.off+lr.n]
}

func (st *expoState) sortedLabels(rec int32) []table.Label {
	lr := st.labs[rec]
	return st.sorted[lr.off : lr.off+lr.n]
}

// render writes the store's families into st.buf, sorted by name and merged
// with the self-metrics in selfFams, and reports whether client_golang
// would have rejected a sample while gathering.
func (e *Exporter) render(st *expoState, selfFams []*dto.MetricFamily) (gatherErr bool) {
	st.recs = st.recs[:0]
	e.store.Each(func(r *table.Record) { st.recs = append(st.recs, r) })
	plans, fams := plan(st.recs)

	st.labs, st.raw, st.sorted = st.labs[:0], st.raw[:0], st.sorted[:0]
	st.series, st.buckets, st.fams = st.series[:0], st.buckets[:0], st.fams[:0]
	clear(st.famIdx)
	clear(st.sent)
	var skipped [len(skipReasons)]uint64
	skip := func(reason string) { skipped[slices.Index(skipReasons[:], reason)]++ }

	for ri, r := range st.recs {
		rec := int32(ri)
		p := plans[r.Table]
		st.labs = append(st.labs, st.appendLabels(r))
		keyed := false
		for i, f := range r.Table.Fields {
			name, ok := p.exported(r, i, skip)
			if !ok {
				continue
			}
			v := r.Values[i]
			fi, ok := st.famIdx[name]
			if !ok {
				fam := fams[name]
				fi = int32(len(st.fams))
				st.famIdx[name] = fi
				st.fams = append(st.fams, expoFamily{name: name, out: textName(name), help: fam.help,
					kind: fam.kind, shared: fam.shared, check: fam.shared,
					valid: model.UTF8Validation.IsValidMetricName(name)})
			}
			fam := &st.fams[fi]
			if fam.shared && st.sentBefore(fi, rec) {
				skip(SkipDuplicate)
				continue
			}
			s := expoSeries{rec: rec, fam: fi, val: v.Num}
			if !r.Time.IsZero() {
				s.ts, s.hasTS = r.Time.Unix()*1000+int64(r.Time.Nanosecond()/1e6), true
			}
			if f.Kind == table.KindHistogram {
				if !keyed {
					st.key, keyed = r.AppendKey(st.key[:0]), true
				}
				if !e.snapshotHist(st, &s, st.key, i) {
					continue // never observed: nothing to expose yet
				}
			}
			if !fam.valid || !st.labs[rec].valid {
				skip(SkipInvalid)
				continue
			}
			if st.labs[rec].replaced {
				fam.check = true
			}
			fam.n++
			st.series = append(st.series, s)
		}
	}

	// Group the series by family, in arrival order (the order the
	// registry collected them in, which its sort starts from).
	var off int32
	for i := range st.fams {
		st.fams[i].off, off = off, off+st.fams[i].n
		st.fams[i].n = 0
	}
	st.order = slices.Grow(st.order[:0], len(st.series))[:len(st.series)]
	for si, s := range st.series {
		f := &st.fams[s.fam]
		st.order[f.off+f.n] = int32(si)
		f.n++
	}
	st.famSort = st.famSort[:0]
	for fi := range st.fams {
		f := &st.fams[fi]
		if f.check && st.rejectRepeats(f) {
			gatherErr = true
		}
		sort.Sort(seriesSorter{st, st.order[f.off : f.off+f.n]})
		if f.n > 0 {
			st.famSort = append(st.famSort, int32(fi))
		}
	}
	slices.SortFunc(st.famSort, func(a, b int32) int { return strings.Compare(st.fams[a].name, st.fams[b].name) })

	// The self-metrics and the skipped gauge are few: they go through
	// client_golang's own encoder, merged by name with the store's.
	dtos := append(st.dtos[:0], selfFams...)
	skippedFam := e.skippedFamily(skipped)
	at, _ := slices.BinarySearchFunc(dtos, skippedFam.GetName(), func(mf *dto.MetricFamily, name string) int {
		return strings.Compare(mf.GetName(), name)
	})
	dtos = slices.Insert(dtos, at, skippedFam)
	st.dtos = dtos
	st.buf = st.buf[:0]
	fi, si := 0, 0
	for fi < len(st.famSort) || si < len(dtos) {
		if si < len(dtos) && (fi == len(st.famSort) || dtos[si].GetName() < st.fams[st.famSort[fi]].name) {
			st.appendDTO(dtos[si])
			si++
			continue
		}
		st.appendFamily(&st.fams[st.famSort[fi]])
		fi++
	}
	clear(st.dtos) // do not keep the gathered families alive
	return gatherErr
}

// sentBefore reports whether a shared family already has the record's
// series, by its labels in exportLabels order as Collect compares them.
func (st *expoState) sentBefore(fi, rec int32) bool {
	lr := &st.labs[rec]
	if !lr.hashed {
		var h maphash.Hash
		h.SetSeed(st.seed)
		for _, l := range st.rawLabels(rec) {
			h.WriteString(l.Name)
			h.WriteByte(0xff)
			h.WriteString(l.Value)
			h.WriteByte(0xfe)
		}
		lr.rawHash, lr.hashed = h.Sum64(), true
	}
	k := lr.rawHash ^ uint64(fi)*0x9e3779b97f4a7c15
	if prev, ok := st.sent[k]; ok && slices.Equal(st.rawLabels(prev), st.rawLabels(rec)) {
		return true
	} else if !ok {
		st.sent[k] = rec
	}
	return false
}

// rejectRepeats drops, as the registry does, a series whose sorted labels
// and timestamp repeat an earlier one of its family (possible only when
// several tables feed it, or when replacing invalid UTF-8 made two label
// values equal). It reports whether it dropped any.
func (st *expoState) rejectRepeats(f *expoFamily) bool {
	clear(st.seen)
	ids := st.order[f.off : f.off+f.n]
	kept := ids[:0]
	for _, id := range ids {
		s := &st.series[id]
		var h maphash.Hash
		h.SetSeed(st.seed)
		for _, l := range st.sortedLabels(s.rec) {
			h.WriteString(l.Name)
			h.WriteByte(0xff)
			h.WriteString(l.Value)
			h.WriteByte(0xff)
		}
		if s.hasTS {
			var b [8]byte
			h.Write(strconv.AppendInt(b[:0], s.ts, 10))
		}
		k := h.Sum64()
		if prev, ok := st.seen[k]; ok {
			p := &st.series[prev]
			if p.hasTS == s.hasTS && p.ts == s.ts && slices.Equal(st.sortedLabels(p.rec), st.sortedLabels(s.rec)) {
				continue
			}
		} else {
			st.seen[k] = id
		}
		kept = append(kept, id)
	}
	dropped := len(kept) != len(ids)
	f.n = int32(len(kept))
	return dropped
}

// snapshotHist copies a histogram's running total into the scratch as
// NewConstHistogram would expose it: cumulative counts per finite bound,
// sorted by bound, a repeated bound keeping its last count.
func (e *Exporter) snapshotHist(st *expoState, s *expoSeries, key []byte, field int) bool {
	e.histMu.RLock()
	defer e.histMu.RUnlock()
	acc := e.hists[histKey{string(key), field}] // the conversion does not allocate
	if acc == nil {
		return false
	}
	s.hOff = int32(len(st.buckets))
	var cum uint64
	for j, bound := range acc.bounds {
		cum += acc.counts[j]
		if math.IsInf(bound, 1) {
			continue
		}
		b := st.buckets[s.hOff:]
		if at := slices.IndexFunc(b, func(x expoBucket) bool { return x.bound == bound }); at >= 0 {
			b[at].cum = cum
			continue
		}
		st.buckets = append(st.buckets, expoBucket{bound, cum})
	}
	b := st.buckets[s.hOff:]
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && b[j].bound < b[j-1].bound; j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
	s.hLen = int32(len(b))
	s.count = cum + acc.counts[len(acc.counts)-1]
	s.val, s.ts = acc.sum, acc.time.Unix()*1000+int64(acc.time.Nanosecond()/1e6)
	s.hasTS = !acc.time.IsZero()
	return true
}

// seriesSorter orders a family's series as client_golang's MetricSorter
// does (label count, then values in label-name order, then timestamp with
// none last), and through sort.Sort, so that ties land where they land
// there.
type seriesSorter struct {
	st  *expoState
	ids []int32
}

func (s seriesSorter) Len() int      { return len(s.ids) }
func (s seriesSorter) Swap(i, j int) { s.ids[i], s.ids[j] = s.ids[j], s.ids[i] }
func (s seriesSorter) Less(i, j int) bool {
	a, b := &s.st.series[s.ids[i]], &s.st.series[s.ids[j]]
	la, lb := s.st.sortedLabels(a.rec), s.st.sortedLabels(b.rec)
	if len(la) != len(lb) {
		return len(la) < len(lb)
	}
	for n := range la {
		if la[n].Value != lb[n].Value {
			return la[n].Value < lb[n].Value
		}
	}
	if !a.hasTS {
		return false
	}
	if !b.hasTS {
		return true
	}
	return a.ts < b.ts
}

func (st *expoState) appendFamily(f *expoFamily) {
	b := append(st.buf, "# HELP "...)
	b = append(b, f.out...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.out...)
	switch f.kind {
	case table.KindCounter:
		b = append(b, " counter\n"...)
	case table.KindHistogram:
		b = append(b, " histogram\n"...)
	default:
		b = append(b, " gauge\n"...)
	}
	for _, id := range st.order[f.off : f.off+f.n] {
		s := &st.series[id]
		labels := st.sortedLabels(s.rec)
		esc := st.labs[s.rec].escape
		if f.kind != table.KindHistogram {
			b = appendExpoSample(b, f.out, "", labels, esc, false, 0, s.val, s)
			continue
		}
		for _, bk := range st.buckets[s.hOff : s.hOff+s.hLen] {
			b = appendExpoSample(b, f.out, "_bucket", labels, esc, true, bk.bound, float64(bk.cum), s)
		}
		b = appendExpoSample(b, f.out, "_bucket", labels, esc, true, math.Inf(1), float64(s.count), s)
		b = appendExpoSample(b, f.out, "_sum", labels, esc, false, 0, s.val, s)
		b = appendExpoSample(b, f.out, "_count", labels, esc, false, 0, float64(s.count), s)
	}
	st.buf = b
}

func appendExpoSample(b []byte, name, suffix string, labels []table.Label, esc, le bool, bound, v float64, s *expoSeries) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	sep := byte('{')
	for _, l := range labels {
		b = append(b, sep)
		if esc {
			b = appendLabelName(b, l.Name)
		} else {
			b = append(b, l.Name...)
		}
		b = append(b, `="`...)
		b = appendEscaped(b, l.Value, true)
		b = append(b, '"')
		sep = ','
	}
	if le {
		b = append(b, sep)
		b = append(b, `le="`...)
		b = appendFloat(b, bound)
		b = append(b, '"')
		sep = ','
	}
	if sep == ',' {
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	if s.hasTS {
		b = append(b, ' ')
		b = strconv.AppendInt(b, s.ts, 10)
	}
	return append(b, '\n')
}

func appendLabelName(b []byte, name string) []byte {
	if model.LegacyValidation.IsValidMetricName(name) {
		return append(b, name...)
	}
	return append(b, model.EscapeName(name, model.UnderscoreEscaping)...)
}

// appendEscaped escapes HELP text (\ and newline) or a label value (also ").
func appendEscaped(b []byte, s string, quote bool) []byte {
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		c := s[i]
		clean = c != '\\' && c != '\n' && (c != '"' || !quote)
	}
	if clean {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats a value as the text encoder does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendDTO writes a gathered family (the self-metrics) with the text
// encoder itself.
func (st *expoState) appendDTO(mf *dto.MetricFamily) {
	w := bytes.NewBuffer(st.buf)
	// The encoder only fails on a malformed family, which the registry
	// does not hand out.
	_, _ = expfmt.MetricFamilyToText(w, model.EscapeMetricFamily(mf, model.UnderscoreEscaping))
	st.buf = w.Bytes()
}

// negotiateGzip answers whether the response is gzipped, choosing between
// identity and gzip (in that order of preference at equal quality) as
// promhttp does.
func negotiateGzip(r *http.Request) bool {
	best, bestQ := "identity", -1.0
	for _, offer := range [...]string{"identity", "gzip"} {
		for _, line := range r.Header.Values("Accept-Encoding") {
			for spec := range strings.SplitSeq(line, ",") {
				value, params, _ := strings.Cut(spec, ";")
				value = strings.TrimSpace(value)
				q := 1.0
				if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
					var err error
					if q, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
						continue
					}
				}
				if q > bestQ && (value == "*" || value == offer) {
					best, bestQ = offer, q
				}
			}
		}
	}
	return best == "gzip" && bestQ != 0
}

// skippedFamily is galago_exporter_samples_skipped of this scrape.
func (e *Exporter) skippedFamily(skipped [len(skipReasons)]uint64) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: new(skippedName), Help: new(skippedHelp), Type: dto.MetricType_GAUGE.Enum()}
	for i, reason := range skipReasons {
		mf.Metric = append(mf.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: new("reason"), Value: new(reason)}},
			Gauge: &dto.Gauge{Value: new(float64(skipped[i]))},
		})
	}
	slices.SortFunc(mf.Metric, func(a, b *dto.Metric) int {
		return strings.Compare(a.Label[0].GetValue(), b.Label[0].GetValue())
	})
	return mf
}
