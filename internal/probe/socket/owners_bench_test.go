package socket

// BenchmarkOwnersShared measures what sharing the socket owners between
// the tcp and socket probes saves: the BPF run time per connection of
// both probes' programs (kernel bpf stats), with each probe keeping its
// own owner storage and with one sockowner.Shared, alternating the two
// set-ups round by round so that the load of a shared machine hits both
// alike. Each round opens and closes conns loopback connections from this
// process (both ends observed). Needs root:
//
//	GALAGO_PRIVILEGED_TESTS=1 go test -run '^$' -bench OwnersShared -benchtime 1x ./internal/probe/socket

import (
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/probe/tcp"
	"github.com/galago-project/galago/internal/sockowner"
)

func BenchmarkOwnersShared(b *testing.B) {
	if os.Getenv("GALAGO_PRIVILEGED_TESTS") != "1" {
		b.Skip("set GALAGO_PRIVILEGED_TESTS=1")
	}
	const rounds, conns = 6, 3000
	ln := closingServer(b, "tcp", "127.0.0.1:0")
	setups := []string{"own", "shared"}
	per := map[string]map[string][]float64{} // setup -> program -> ns per connection
	for r := 0; r < rounds*b.N; r++ {
		for _, s := range setups {
			got := ownersRound(b, ln.Addr().String(), s == "shared", conns)
			if per[s] == nil {
				per[s] = map[string][]float64{}
			}
			for prog, v := range got {
				per[s][prog] = append(per[s][prog], v)
			}
		}
	}
	// The median of each set-up, and of the paired differences (a round's
	// shared minus its own, less exposed to the load drifting between
	// rounds).
	for _, prog := range []string{"set_state", "tcp/on_set_state", "socket/tcp_state", "total"} {
		own, shared := per["own"][prog], per["shared"][prog]
		diff := make([]float64, len(own))
		for i := range own {
			diff[i] = shared[i] - own[i]
		}
		b.Logf("%s ns per connection by round: own %.0f, shared %.0f", prog, own, shared)
		b.ReportMetric(median(own), "ns/conn-"+prog+"-own")
		b.ReportMetric(median(shared), "ns/conn-"+prog+"-shared")
		b.ReportMetric(median(diff), "ns/conn-"+prog+"-diff")
	}
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

// ownersRound starts both probes, makes n connections and returns the
// BPF run time per connection of each program that ran, and their total.
func ownersRound(b *testing.B, addr string, shared bool, n int) map[string]float64 {
	var owners *sockowner.Shared
	if shared {
		owners = sockowner.NewShared()
	}
	stats := bpfrt.NewStats()
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats)
	tp := tcp.New(tcp.WithStats(stats), tcp.WithOwners(owners))
	trt := probetest.NewRuntime(b)
	// Every tcp sub-item but tcp_delay (whose sock_ops program times
	// writes), as galago-bench runs it.
	tcpItems := 0xff &^ probe.MustSubItemBit(tcp.Name, "tcp_delay")
	if err := tp.Start(trt.Context(), probe.Config{SubItems: tcpItems, Params: probe.DefaultParams()}, trt); err != nil {
		b.Fatal(err)
	}
	sp := New(WithStats(stats), WithOwners(owners))
	srt := probetest.NewRuntime(b)
	if err := sp.Start(srt.Context(), defaultCfg(), srt); err != nil {
		b.Fatal(err)
	}
	before := runTimes(b, reg)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Close()
	}
	time.Sleep(200 * time.Millisecond) // the last FINs
	after := runTimes(b, reg)
	srt.Shutdown(b, sp)
	trt.Shutdown(b, tp)
	out := map[string]float64{}
	for prog, ns := range after {
		if d := ns - before[prog]; d > 0 {
			out[prog] = d / float64(n)
			out["total"] += d / float64(n)
			if prog == "tcp/on_set_state" || prog == "socket/tcp_state" {
				out["set_state"] += d / float64(n)
			}
		}
	}
	return out
}

// runTimes reads galago_bpf_run_seconds_total as ns by "probe/program".
func runTimes(b *testing.B, reg *prometheus.Registry) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "galago_bpf_run_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var name string
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			out[name[1:]] = m.GetCounter().GetValue() * 1e9
		}
	}
	return out
}
