package probe

import "github.com/prometheus/client_golang/prometheus"

var (
	descUp       = prometheus.NewDesc("galago_probe_up", "1 when the probe is running, 0 when it is wanted but not running (starting or failed).", []string{"probe"}, nil)
	descRestarts = prometheus.NewDesc("galago_probe_restarts_total", "Restarts of the probe after a failure.", []string{"probe"}, nil)
	descErrors   = prometheus.NewDesc("galago_probe_errors_total", "Errors the probe reported (failures and non-fatal errors).", []string{"probe"}, nil)
	descRecords  = prometheus.NewDesc("galago_probe_records_total", "Records the probe emitted.", []string{"probe"}, nil)
	descEvents   = prometheus.NewDesc("galago_probe_events_total", "Abnormal events the probe raised (before de-duplication).", []string{"probe"}, nil)
	descLost     = prometheus.NewDesc("galago_probe_events_lost_total", "Kernel events the probe lost (ring buffer full, queues).", []string{"probe"}, nil)
)

// Describe implements prometheus.Collector: the Manager exports every probe's
// health.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descRestarts, descErrors, descRecords, descEvents, descLost} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Only probes that are wanted or
// have run are reported, so the exposition does not list 21 idle features.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	for _, st := range m.Statuses() {
		if !st.Wanted && st.Records == 0 && st.Restarts == 0 && st.Errors == 0 {
			continue
		}
		up := 0.0
		if st.Status == StatusRunning {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(st.Restarts), st.Name)
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(st.Errors), st.Name)
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(st.Records), st.Name)
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(st.Events), st.Name)
		ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(st.Lost), st.Name)
	}
}
