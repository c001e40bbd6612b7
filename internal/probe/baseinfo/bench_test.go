package baseinfo

import (
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
)

// BenchmarkCollectHost is the cost of one report period on this host with
// every sub-item but con, system_proc covering every process (blacklist
// mode with nothing excluded).
func BenchmarkCollectHost(b *testing.B) {
	p := New(procfs.FS{})
	rt := probetest.NewRuntime(b, probetest.DiscardGo())
	cfg := baseConfig()
	cfg.SubItems = allSubItems() &^ bitCon
	cfg.Targets = probetest.NewTargets(snoop.Blacklist)
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		p.collect(now)
		rt.Take()
	}
	pids, _ := procfs.FS{}.PIDs()
	b.ReportMetric(float64(len(pids)), "processes")
}
