package bpfrt

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Stats exports the kernel's per-program BPF statistics (run time and run
// count, kernel 5.8+) of every registered probe:
//
//	galago_bpf_run_seconds_total{probe,program}
//	galago_bpf_run_count_total{probe,program}
//
// The kernel only accounts while statistics are enabled, which costs two
// clock reads around every run of every BPF program on the host (galago's
// and any other tool's; 1.5-3 points of the context-switch rate of a
// scheduler-bound load with sli on, ~100 ns per traced syscall:
// BENCHMARKS.md, "statistics off by default"); Stats keeps them
// enabled exactly while at least one probe is registered. Counts start
// when a probe registers. The daemon makes one only when EnvStats asks
// for it (StatsFromEnv): probes take a nil *Stats as "none wanted".
type Stats struct {
	mu     sync.Mutex
	probes map[string]map[string]*ebpf.Program
	enable io.Closer

	seconds *prometheus.Desc
	count   *prometheus.Desc
	// enableStats is ebpf.EnableStats; replaced in tests.
	enableStats func(uint32) (io.Closer, error)
}

// NewStats returns an empty collector; register it with a Prometheus registry.
func NewStats() *Stats {
	return &Stats{
		probes: map[string]map[string]*ebpf.Program{},
		seconds: prometheus.NewDesc("galago_bpf_run_seconds_total",
			"Time the kernel spent running the probe's BPF program, while galago ran it.",
			[]string{"probe", "program"}, nil),
		count: prometheus.NewDesc("galago_bpf_run_count_total",
			"Runs of the probe's BPF program, while galago ran it.",
			[]string{"probe", "program"}, nil),
		enableStats: ebpf.EnableStats,
	}
}

// EnvStats is the environment variable that turns the kernel's BPF
// run-time statistics, and with them the galago_bpf_run_* metrics, on in
// the daemon: 1, true or on; 0, false, off or unset leave them off.
const EnvStats = "GALAGO_BPF_STATS"

// StatsFromEnv returns the daemon's Stats as EnvStats asks: a new Stats
// when on, nil (none, said once on log) when off, and an error naming the
// variable and its value for anything else.
func StatsFromEnv(log *slog.Logger) (*Stats, error) {
	v := os.Getenv(EnvStats)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "on":
		return NewStats(), nil
	case "", "0", "false", "off":
		log.Info("BPF run-time statistics off: galago_bpf_run_seconds_total and galago_bpf_run_count_total are not exported; " +
			EnvStats + "=1 exports them, at the cost of two clock reads per run of every BPF program on the host")
		return nil, nil
	}
	return nil, fmt.Errorf("%s=%q: want 1, true, on, 0, false or off", EnvStats, v)
}

// Register adds (or replaces) a probe's programs, keyed by program name, and
// enables kernel statistics if they were off. The programs stay owned by the
// caller, who must Unregister before closing them.
func (s *Stats) Register(probe string, progs map[string]*ebpf.Program) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enable == nil {
		c, err := s.enableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			return fmt.Errorf("enable BPF run-time statistics: %w", err)
		}
		s.enable = c
	}
	cp := make(map[string]*ebpf.Program, len(progs))
	for name, p := range progs {
		if p != nil {
			cp[name] = p
		}
	}
	s.probes[probe] = cp
	return nil
}

// TryRegister is Register for a probe that runs on without statistics
// when they cannot be had: a failure is logged on log as "<probe>: BPF
// run-time statistics unavailable". A nil Stats (none wanted) does nothing.
func (s *Stats) TryRegister(log *slog.Logger, probe string, progs map[string]*ebpf.Program) {
	if s == nil {
		return
	}
	if err := s.Register(probe, progs); err != nil {
		log.Warn(probe+": BPF run-time statistics unavailable", "err", err)
	}
}

// Unregister drops a probe and disables kernel statistics when it was the
// last one. A nil Stats does nothing.
func (s *Stats) Unregister(probe string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.probes, probe)
	if len(s.probes) == 0 && s.enable != nil {
		_ = s.enable.Close()
		s.enable = nil
	}
}

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.seconds
	ch <- s.count
}

// Collect implements prometheus.Collector. A program whose statistics
// cannot be read is left out of the scrape.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, probe := range sortedKeys(s.probes) {
		progs := s.probes[probe]
		for _, name := range sortedKeys(progs) {
			st, err := progs[name].Stats()
			if err != nil {
				continue
			}
			ch <- prometheus.MustNewConstMetric(s.seconds, prometheus.CounterValue, st.Runtime.Seconds(), probe, name)
			ch <- prometheus.MustNewConstMetric(s.count, prometheus.CounterValue, float64(st.RunCount), probe, name)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
