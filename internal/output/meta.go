package output

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/table"
)

type metaJSON struct {
	Timestamp  int64    `json:"timestamp"`
	MetaName   string   `json:"meta_name"`
	EntityName string   `json:"entity_name"`
	Version    string   `json:"version"`
	Keys       []string `json:"keys"`
	Labels     []string `json:"labels"`
	Metrics    []string `json:"metrics"`
}

// Labels the enrichment adds, as the metadata announces them.
var (
	procLabels      = []string{"comm", "container_id", "container_name", "container_image", "pod_id", "pod", "pod_namespace"}
	procEntityLabel = []string{"cmdline", "start_time"}
	containerLabels = []string{"container_name", "container_image", "pod_id", "pod", "pod_namespace"}
)

// MarshalMeta renders one table's metadata as gala-gopher does:
// keys = machine_id + key fields; labels = hostname + label fields + the
// process labels when the table has a tgid field, + cmdline,start_time for
// entity proc, + the container labels for entity container; metrics = the
// counter and gauge fields. A name already listed (say a table whose own
// comm field is a key) is not repeated.
func MarshalMeta(ts time.Time, t *table.Table) ([]byte, error) {
	m := metaJSON{
		Timestamp:  ts.UnixMilli(),
		MetaName:   t.Name,
		EntityName: t.Entity,
		Version:    t.Version,
		Keys:       []string{"machine_id"},
		Labels:     []string{"hostname"},
		Metrics:    []string{},
	}
	// listed: a table's own field may repeat a name the metadata already
	// carries (system_os has its own hostname label).
	listed := func(n string) bool { return contains(m.Keys, n) || contains(m.Labels, n) }
	hasTgid := false
	for _, f := range t.Fields {
		switch f.Kind {
		case table.KindKey:
			if !listed(f.Name) {
				m.Keys = append(m.Keys, f.Name)
			}
		case table.KindLabel:
			if !listed(f.Name) {
				m.Labels = append(m.Labels, f.Name)
			}
		case table.KindCounter, table.KindGauge:
			m.Metrics = append(m.Metrics, f.Name)
		}
		if (f.Kind == table.KindKey || f.Kind == table.KindLabel) && strings.EqualFold(f.Name, "tgid") {
			hasTgid = true
		}
	}
	add := func(names []string) {
		for _, n := range names {
			if !listed(n) {
				m.Labels = append(m.Labels, n)
			}
		}
	}
	if hasTgid {
		add(procLabels)
	}
	switch t.Entity {
	case "proc":
		add(procEntityLabel)
	case "container":
		add(containerLabels)
	}
	return marshalCompact(m)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MetaLogFile is the metadata log's name in meta_dir.
const MetaLogFile = "gopher_meta.log"

// MetaLogSink appends one JSON line per table to <meta_dir>/gopher_meta.log,
// rotated to .1 at 100 MB.
type MetaLogSink struct{ w *rotatingFile }

// NewMetaLogSink opens the metadata log in dir.
func NewMetaLogSink(dir string) (*MetaLogSink, error) {
	w, err := openRotating(filepath.Join(dir, MetaLogFile), 100*MB)
	if err != nil {
		return nil, err
	}
	return &MetaLogSink{w: w}, nil
}

// WriteMeta writes every table in one write, so a rotation never splits a
// round.
func (s *MetaLogSink) WriteMeta(ts time.Time, tables []*table.Table) error {
	var buf []byte
	for _, t := range tables {
		b, err := MarshalMeta(ts, t)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := s.w.Write(buf)
	return err
}

func (s *MetaLogSink) Close() error { return s.w.Close() }
