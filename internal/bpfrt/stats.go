package bpfrt

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
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
// clock reads per program run; Stats keeps them enabled exactly while at
// least one probe is registered. Counts start when a probe registers.
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
