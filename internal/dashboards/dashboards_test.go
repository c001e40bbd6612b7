package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/galago-project/galago/internal/table"
)

// TestGeneratedFilesUpToDate: deploy/grafana holds what All renders.
func TestGeneratedFilesUpToDate(t *testing.T) {
	for _, d := range All() {
		want, err := d.Render()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "deploy", "grafana", d.UID+".json")
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what internal/dashboards renders (%v): run go generate ./internal/dashboards", path, err)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// metricNames lists what galago's tables export: gala_gopher_<entity>_<field>,
// with a histogram's _bucket, _sum and _count series.
func metricNames() map[string]bool {
	names := map[string]bool{}
	for _, tb := range table.Builtin() {
		for i, f := range tb.Fields {
			if !f.Kind.IsMetric() {
				continue
			}
			n := tb.MetricName(i)
			names[n] = true
			if f.Kind == table.KindHistogram {
				names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
			}
		}
	}
	return names
}

// TestQueriesParseAndNameRealMetrics parses every query with Prometheus's
// own parser and checks every gala_gopher metric it selects is a field of
// one of galago's tables (galago's self-metrics and the process collector
// are checked against a live galago in test/e2e).
func TestQueriesParseAndNameRealMetrics(t *testing.T) {
	known := metricNames()
	uids := map[string]bool{}
	for _, d := range All() {
		if uids[d.UID] {
			t.Errorf("uid %s twice", d.UID)
		}
		uids[d.UID] = true
		for _, p := range d.Panels {
			if len(p.Targets) == 0 || p.Unit == "" {
				t.Errorf("%s / %s: no query or no unit", d.UID, p.Title)
			}
			for _, tg := range p.Targets {
				expr, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(tg.Expr))
				if err != nil {
					t.Errorf("%s / %s: %q: %v", d.UID, p.Title, tg.Expr, err)
					continue
				}
				for _, sel := range parser.ExtractSelectors(expr) {
					for _, m := range sel {
						if m.Name != "__name__" {
							continue
						}
						switch {
						case strings.HasPrefix(m.Value, "gala_gopher_") && !known[m.Value]:
							t.Errorf("%s / %s: %s is not a metric of galago's tables", d.UID, p.Title, m.Value)
						case !strings.HasPrefix(m.Value, "gala_gopher_") && !strings.HasPrefix(m.Value, "galago_") && !strings.HasPrefix(m.Value, "process_"):
							t.Errorf("%s / %s: %s is none of galago's metrics", d.UID, p.Title, m.Value)
						}
					}
				}
			}
		}
	}
}
