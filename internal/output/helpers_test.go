package output

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/<name>, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// Two test tables of one entity, "link": they share the rtt gauge (one
// family), disagree on rx_bytes (counter vs gauge) and the second has a
// scalar named like the first's histogram _sum.
var (
	linkTable = table.New("link_metric", "link", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey, Description: "Process ID"},
		table.Field{Name: "role", Kind: table.KindKey, Description: "client or server"},
		table.Field{Name: "comm", Kind: table.KindLabel, Description: "Process name"},
		table.Field{Name: "rx_bytes", Kind: table.KindCounter, Description: "Bytes received"},
		table.Field{Name: "rtt", Kind: table.KindGauge, Description: "Smoothed RTT (us)"},
		table.Field{Name: "zero_win", Kind: table.KindSummary, Description: "Zero windows"},
		table.Field{Name: "latency", Kind: table.KindHistogram, Description: "Request latency (ms)"},
		table.Field{Name: "unset", Kind: table.KindGauge, Description: "Never measured"},
	)
	linkExtraTable = table.New("link_tx", "link", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey, Description: "Process ID"},
		table.Field{Name: "rtt", Kind: table.KindGauge, Description: "RTT as the tx side sees it"},
		table.Field{Name: "rx_bytes", Kind: table.KindGauge, Description: "conflicting kind"},
		table.Field{Name: "latency_sum", Kind: table.KindGauge, Description: "collides with latency_sum"},
		table.Field{Name: "tx_bytes", Kind: table.KindCounter, Description: "Bytes sent"},
	)
)

var (
	t0      = time.Date(2026, time.November, 2, 9, 5, 7, 0, time.UTC)
	period  = 5 * time.Second
	bounds  = []float64{10, 50, 100}
	machine = table.Label{Name: "machine_id", Value: "uuid-1-10.0.0.1"}
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// linkRecord is one period of linkTable; lat are latency observations.
func linkRecord(end time.Time, tgid, role, comm string, rx, rtt float64, lat ...float64) *table.Record {
	r := linkTable.NewRecord(end, period)
	r.SetStr(0, tgid)
	r.SetStr(1, role)
	r.SetStr(2, comm)
	r.SetNum(3, rx)
	r.SetNum(4, rtt)
	r.SetNum(5, 0.25)
	h := table.NewHistogram(bounds)
	for _, v := range lat {
		h.Observe(v)
	}
	r.SetHist(6, h)
	r.Extra = []table.Label{machine}
	return r
}

func linkExtraRecord(end time.Time, tgid string) *table.Record {
	r := linkExtraTable.NewRecord(end, period)
	r.SetStr(0, tgid)
	r.SetNum(1, 7)
	r.SetNum(2, 9)
	r.SetNum(3, 11)
	r.SetNum(4, 4096)
	r.Extra = []table.Label{machine}
	return r
}

// newTestPipeline is a store with a fake clock, an exporter and a pipeline
// registered in it.
func newTestPipeline(t testing.TB, lim table.Limits) (*Pipeline, *Exporter, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: t0}
	if lim.Timeout == 0 {
		lim.Timeout = 60 * time.Second
	}
	store := table.NewStore(lim, nil, clock.now)
	exp, err := NewExporter(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPipeline(PipelineConfig{Store: store, Exporter: exp, EventTimeout: time.Minute, Now: clock.now})
	if err := exp.Register(p); err != nil {
		t.Fatal(err)
	}
	return p, exp, clock
}
