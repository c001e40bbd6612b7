package output

import (
	"path/filepath"

	"github.com/galago-project/galago/internal/table"
)

// File names of the metric channels in metric_dir. gala-gopher numbers its
// files (gopher_metrics_<N>); galago writes one file per channel plus its .1
// backup.
const (
	MetricLogFile  = "gopher_metrics.log"
	MetricJSONFile = "gopher_metrics.json"
)

// metricFileLimit splits metric_total_size between the live file and its
// .1 backup, so both together stay within the configured total.
func metricFileLimit(totalMB int) int64 { return int64(totalMB) * MB / 2 }

// MetricTextSink is the "logs" metric channel: every record as Prometheus
// text lines (AppendRecordText) appended to <metric_dir>/gopher_metrics.log.
type MetricTextSink struct{ w *rotatingFile }

// NewMetricTextSink opens the logs channel file; totalMB is
// logs.metric_total_size.
func NewMetricTextSink(dir string, totalMB int) (*MetricTextSink, error) {
	w, err := openRotating(filepath.Join(dir, MetricLogFile), metricFileLimit(totalMB))
	if err != nil {
		return nil, err
	}
	return &MetricTextSink{w: w}, nil
}

func (s *MetricTextSink) WriteRecord(r *table.Record) error {
	b := AppendRecordText(nil, r)
	if len(b) == 0 {
		return nil
	}
	_, err := s.w.Write(b)
	return err
}

func (s *MetricTextSink) Close() error { return s.w.Close() }

// MetricJSONSink is the "json" metric channel: one MarshalRecordJSON object
// per line in <metric_dir>/gopher_metrics.json.
type MetricJSONSink struct{ w *rotatingFile }

// NewMetricJSONSink opens the json channel file; totalMB is
// logs.metric_total_size.
func NewMetricJSONSink(dir string, totalMB int) (*MetricJSONSink, error) {
	w, err := openRotating(filepath.Join(dir, MetricJSONFile), metricFileLimit(totalMB))
	if err != nil {
		return nil, err
	}
	return &MetricJSONSink{w: w}, nil
}

func (s *MetricJSONSink) WriteRecord(r *table.Record) error {
	b, err := MarshalRecordJSON(r)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

func (s *MetricJSONSink) Close() error { return s.w.Close() }
