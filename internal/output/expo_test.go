package output

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/galago-project/galago/internal/table"
)

// Tables that only the differential test uses: names client_golang
// rejects or escapes, a histogram with its own le label, and two tables
// feeding one family with their labels declared in opposite orders.
var (
	oddTable = table.New("odd_names", "odd", "1.0.0",
		table.Field{Name: "id", Kind: table.KindKey, Description: "Key"},
		table.Field{Name: "bad-name", Kind: table.KindLabel, Description: "legacy-invalid label, escaped"},
		table.Field{Name: "dotted.name", Kind: table.KindLabel, Description: "escaped by underscores"},
		table.Field{Name: "value", Kind: table.KindGauge, Description: "help with \\ and \n and \"quotes\""},
		table.Field{Name: "we.ird", Kind: table.KindCounter, Description: ""},
	)
	reservedTable = table.New("reserved_label", "resv", "1.0.0",
		table.Field{Name: "__reserved", Kind: table.KindLabel, Description: "client_golang rejects it"},
		table.Field{Name: "id", Kind: table.KindKey, Description: "Key"},
		table.Field{Name: "value", Kind: table.KindGauge, Description: "invalid when __reserved is set"},
		table.Field{Name: "lat", Kind: table.KindHistogram, Description: "invalid too"},
	)
	leTable = table.New("le_hist", "lehist", "1.0.0",
		table.Field{Name: "le", Kind: table.KindKey, Description: "a label named le"},
		table.Field{Name: "lat", Kind: table.KindHistogram, Description: "Latency"},
		table.Field{Name: "n", Kind: table.KindCounter, Description: "Count"},
	)
	orderA = table.New("order_a", "order", "1.0.0",
		table.Field{Name: "a", Kind: table.KindKey, Description: "A"},
		table.Field{Name: "b", Kind: table.KindKey, Description: "B"},
		table.Field{Name: "v", Kind: table.KindGauge, Description: "first table's help"},
	)
	orderB = table.New("order_b", "order", "1.0.0",
		table.Field{Name: "b", Kind: table.KindKey, Description: "B"},
		table.Field{Name: "a", Kind: table.KindKey, Description: "A"},
		table.Field{Name: "v", Kind: table.KindGauge, Description: "second table's help"},
		table.Field{Name: "w", Kind: table.KindCounter, Description: "W"},
	)
)

// genStore fills a pipeline's store from seed: every builtin table and the
// test tables, random keys from a small pool (so series collide), values
// that need escaping or are not UTF-8, special floats, histograms over one
// to three periods, unset fields, duplicate label names, no timestamps.
func genStore(t testing.TB, seed uint64) (*Exporter, int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	p, exp, clock := newTestPipeline(t, table.Limits{})
	tables := append(table.Builtin()[:len(table.Builtin()):len(table.Builtin())],
		linkTable, linkExtraTable, oddTable, reservedTable, leTable, orderA, orderB)
	strs := []string{"", "1", "2", "nginx", "we\"ird\\na\nme", "\xff", "\xfe", "\uFFFD", "a\xffb", "10.0.0.1", "日本", "x y"}
	nums := []float64{0, 1, -1, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 0.1, 1e21, -3.5e-7, 12345678901234567, 42}
	boundSets := [][]float64{{10, 50, 100}, {1}, {}, {0.5, 0.5, 2}, {math.Inf(-1), 0, math.Inf(1)}, {3, 1, 2}}
	num := func() float64 {
		if rng.IntN(3) == 0 {
			return nums[rng.IntN(len(nums))]
		}
		return float64(rng.IntN(1_000_000)) / float64(1+rng.IntN(1000))
	}
	nTables := rng.IntN(len(tables) + 1)
	if seed%7 == 0 {
		nTables = 0 // the empty store
	}
	periods := 1 + rng.IntN(3)
	for period := range periods {
		clock.t = t0.Add(time.Duration(period) * 5 * time.Second)
		for _, ti := range rng.Perm(len(tables))[:nTables] {
			tb := tables[ti]
			bounds := boundSets[rng.IntN(len(boundSets))]
			for range 1 + rng.IntN(6) {
				end := clock.t
				if rng.IntN(8) == 0 {
					end = time.Time{}
				}
				r := tb.NewRecord(end, 5*time.Second)
				for i, f := range tb.Fields {
					if rng.IntN(10) == 0 {
						continue // unset
					}
					switch f.Kind {
					case table.KindKey, table.KindLabel:
						r.SetStr(i, strs[rng.IntN(4)+rng.IntN(2)*rng.IntN(len(strs)-4)])
					case table.KindHistogram:
						h := table.NewHistogram(bounds)
						for range rng.IntN(5) {
							h.Observe(num())
						}
						if math.IsNaN(h.Sum) {
							h.Sum = 0
						}
						r.SetHist(i, h)
					default:
						r.SetNum(i, num())
					}
				}
				switch rng.IntN(4) {
				case 0:
					r.Extra = []table.Label{machine}
				case 1: // repeats a key's name: exportLabels keeps the first
					r.Extra = []table.Label{{Name: tb.Fields[0].Name, Value: "dup"}, {Name: "container_id", Value: strs[rng.IntN(len(strs))]}}
				}
				p.Record(r, nil)
			}
		}
	}
	return exp, nTables
}

// errorsLine is promhttp's own error counter: each path counts its own
// scrape, so the two outputs may differ there by design.
var errorsLine = regexp.MustCompile(`(?m)^promhttp_metric_handler_errors_total\{cause="gathering"\} (\d+)\n`)

func gatherErrors(t testing.TB, body []byte) int {
	m := errorsLine.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no gathering error counter in\n%s", body)
	}
	var n int
	fmt.Sscan(string(m[1]), &n)
	return n
}

// checkSameAsPromhttp scrapes the direct writer, promhttp over the same
// registries, and the writer again, and wants identical text, and the
// same gathering errors counted by both.
func checkSameAsPromhttp(t testing.TB, exp *Exporter, accept string) {
	t.Helper()
	do := func(h http.Handler) []byte {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != string(textFormat) {
			t.Fatalf("Content-Type %q", ct)
		}
		return rec.Body.Bytes()
	}
	a := do(exp.Handler())
	b := do(exp.prom)
	c := do(exp.Handler())
	ea, eb, ec := gatherErrors(t, a), gatherErrors(t, b), gatherErrors(t, c)
	if eb-ea != ec-eb || eb-ea > 1 {
		t.Errorf("gathering errors: writer %d -> %d, promhttp %d -> %d", ea, eb, eb, ec)
	}
	a = errorsLine.ReplaceAll(a, nil)
	b = errorsLine.ReplaceAll(b, nil)
	if !bytes.Equal(a, b) {
		al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
		for i := range min(len(al), len(bl)) {
			if al[i] != bl[i] {
				t.Fatalf("line %d differs:\nwriter:   %q\npromhttp: %q", i+1, al[i], bl[i])
			}
		}
		t.Fatalf("lengths differ: writer %d lines, promhttp %d", len(al), len(bl))
	}
}

func TestExpoSameAsPromhttp(t *testing.T) {
	n := 200
	if testing.Short() || raceBuild {
		n = 40
	}
	stores := map[bool]int{}
	for seed := range uint64(n) {
		exp, tables := genStore(t, seed)
		stores[tables == 0]++
		accept := ""
		if seed%2 == 1 {
			accept = "text/plain"
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSameAsPromhttp(t, exp, accept) })
	}
	if stores[true] == 0 || stores[false] == 0 {
		t.Fatalf("stores generated: %v, want empty and filled ones", stores)
	}
}

// TestExpoEdgeCases pins the cases the random stores may miss: the skip
// reasons each counted, and the registry's own rejection of a series that
// repeats another (label order differs between two tables of a family).
func TestExpoEdgeCases(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	a := orderA.NewRecord(t0, period)
	a.SetStr(0, "x")
	a.SetStr(1, "y")
	a.SetNum(2, 1)
	b := orderB.NewRecord(t0, period)
	b.SetStr(0, "y")
	b.SetStr(1, "x")
	b.SetNum(2, 2)
	p.Record(a, nil)
	p.Record(b, nil)
	for _, v := range []string{"\xff", "\xfe"} { // both become U+FFFD
		r := leTable.NewRecord(t0, period)
		r.SetStr(0, v)
		r.SetNum(2, 3)
		p.Record(r, nil)
	}
	p.Record(linkRecord(t0, "1", "client", "c", 1, 2, 5), nil)
	p.Record(linkExtraRecord(t0, "1"), nil)
	r := reservedTable.NewRecord(t0, period)
	r.SetStr(0, "r")
	r.SetStr(1, "k")
	r.SetNum(2, 1)
	p.Record(r, nil)
	checkSameAsPromhttp(t, exp, "")

	body := scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil).Body.String()
	for _, want := range []string{
		`galago_exporter_samples_skipped{reason="duplicate_series"} 0`,
		`galago_exporter_samples_skipped{reason="histogram_suffix"} 1`,
		`galago_exporter_samples_skipped{reason="invalid"} 1`,
		`galago_exporter_samples_skipped{reason="type_conflict"} 1`,
		// One of the two orderings is rejected by the registry's check.
		"gala_gopher_order_v{a=\"x\",b=\"y\"} 1 1793610307000\n# HELP",
		"gala_gopher_lehist_n{le=\"\uFFFD\"} 3 1793610307000\n# HELP",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
	if n := gatherErrors(t, []byte(body)); n < 2 {
		t.Errorf("gathering errors %d, want one per scrape", n)
	}
}

func FuzzExpoSameAsPromhttp(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		exp, _ := genStore(t, seed)
		checkSameAsPromhttp(t, exp, "")
	})
}

// TestExpoHTTP: negotiation of gzip and of the protobuf format (which
// promhttp still serves), HEAD, and the paths and methods refused.
func TestExpoHTTP(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	p.Record(linkRecord(t0, "1", "client", "c", 1, 2, 5), nil)
	h := exp.Handler()
	plain := scrape(t, h, http.MethodGet, "/metrics", nil)
	if plain.Header().Get("Content-Encoding") != "" {
		t.Fatal("compressed without Accept-Encoding")
	}
	for _, tc := range []struct {
		enc  string
		gzip bool
	}{
		{"gzip", true},
		{"deflate, gzip, br, zstd", true},
		{"gzip;q=0.5, identity", false},
		{"identity;q=0.1, gzip;q=0.9", true},
		{"gzip;q=0", false},
		{"*", false},
		{"br", false},
	} {
		rec := scrape(t, h, http.MethodGet, "/metrics", map[string]string{"Accept-Encoding": tc.enc})
		ref := scrape(t, exp.prom, http.MethodGet, "/metrics", map[string]string{"Accept-Encoding": tc.enc})
		if got, want := rec.Header().Get("Content-Encoding"), ref.Header().Get("Content-Encoding"); got != want {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, promhttp %q", tc.enc, got, want)
		}
		body := rec.Body.Bytes()
		if tc.gzip {
			if rec.Header().Get("Content-Encoding") != "gzip" {
				t.Fatalf("Accept-Encoding %q: not gzipped", tc.enc)
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(errorsLine.ReplaceAll(body, nil), errorsLine.ReplaceAll(plain.Body.Bytes(), nil)) {
			t.Errorf("Accept-Encoding %q: body differs from the plain scrape", tc.enc)
		}
		if got := rec.Header().Values("Vary"); strings.Join(got, ",") != "Accept,Accept-Encoding" {
			t.Errorf("Vary %q", got)
		}
	}

	// Protobuf: promhttp's path, parsed back.
	proto := scrape(t, h, http.MethodGet, "/metrics", map[string]string{
		"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"})
	if ct := proto.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") {
		t.Fatalf("protobuf Content-Type %q", ct)
	}
	dec := expfmt.NewDecoder(bytes.NewReader(proto.Body.Bytes()), expfmt.Format(proto.Header().Get("Content-Type")))
	found := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if mf.GetName() == "gala_gopher_link_rtt" {
			found = mf.Metric[0].GetGauge().GetValue() == 2
		}
	}
	if !found {
		t.Error("protobuf scrape lacks gala_gopher_link_rtt 2")
	}

	head := scrape(t, h, http.MethodHead, "/metrics", nil)
	if head.Code != http.StatusOK || head.Header().Get("Content-Type") != string(textFormat) {
		t.Errorf("HEAD: %d %q", head.Code, head.Header().Get("Content-Type"))
	}
	if rec := scrape(t, h, http.MethodGet, "/other", nil); rec.Code != http.StatusNotFound {
		t.Errorf("GET /other: %d", rec.Code)
	}
	if rec := scrape(t, h, http.MethodPost, "/metrics", nil); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	// name[] filters stay promhttp's.
	filtered := scrape(t, h, http.MethodGet, "/metrics?name[]=gala_gopher_link_rtt", nil).Body.String()
	if !strings.Contains(filtered, "gala_gopher_link_rtt{") || strings.Contains(filtered, "galago_") {
		t.Errorf("name[] filter not applied:\n%s", filtered)
	}
}

// TestExpoInFlightLimit: a ninth concurrent scrape is refused with 503.
func TestExpoInFlightLimit(t *testing.T) {
	_, exp, _ := newTestPipeline(t, table.Limits{})
	for range maxRequestsInFlight {
		exp.inFlight <- struct{}{}
	}
	rec := scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
	<-exp.inFlight
	if rec := scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil); rec.Code != http.StatusOK {
		t.Errorf("status %d after a slot freed", rec.Code)
	}
}

// TestExpoConcurrentScrapes: scrapes in parallel with records arriving
// (run under -race); each scrape is a valid exposition whose histogram
// counts never go backwards.
func TestExpoConcurrentScrapes(t *testing.T) {
	p, exp, _ := newTestPipeline(t, table.Limits{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			p.Record(linkRecord(t0, fmt.Sprint(i%20), "client", "c", float64(i), 2, 5, 60), nil)
		}
	}()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			last := -1.0
			for range 20 {
				rec := httptest.NewRecorder()
				exp.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				parser := expfmt.NewTextParser(model.UTF8Validation)
				fams, err := parser.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
				if err != nil {
					errs <- err
					return
				}
				var total float64
				if f := fams["gala_gopher_link_latency"]; f != nil {
					for _, m := range f.Metric {
						total += float64(m.GetHistogram().GetSampleCount())
					}
				}
				if total < last {
					errs <- fmt.Errorf("histogram count went from %v to %v", last, total)
					return
				}
				last = total
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	<-done
	fams := parseExposition(t, scrape(t, exp.Handler(), http.MethodGet, "/metrics", nil).Body.Bytes())
	var total uint64
	for _, m := range fams["gala_gopher_link_latency"].Metric {
		total += m.GetHistogram().GetSampleCount()
	}
	if total != 400 { // 200 records of two observations
		t.Errorf("histogram count %d, want 400", total)
	}
}
