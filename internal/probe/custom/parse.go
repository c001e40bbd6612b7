package custom

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// maxLineLen is gala-gopher's limit on one probe output line, newline
// excluded.
const maxLineLen = 8191

// lineKind is what a line of probe output is.
type lineKind uint8

const (
	lineEmpty lineKind = iota
	lineText           // anything not starting with '|': the debug log
	lineTable          // |<table>|v1|...|vN|
	lineEvent          // |event|...|
	lineLog            // |log|...| (tprofiling's Kafka mode)
)

func (k lineKind) String() string {
	return [...]string{"empty", "text", "table", "event", "log"}[k]
}

// parseLine classifies one line (without its newline) and splits it. For a
// table line the fields are the table name then the values; for event and
// log lines, the fields after the tag; for text, the line itself. The
// fields alias line. The trailing '|' is optional, as is a '\r' before the
// newline.
func parseLine(line []byte) (lineKind, [][]byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) == 0 {
		return lineEmpty, nil
	}
	if line[0] != '|' {
		return lineText, [][]byte{line}
	}
	body := bytes.TrimSuffix(line[1:], []byte{'|'})
	fields := bytes.Split(body, []byte{'|'})
	switch string(fields[0]) {
	case "event":
		return lineEvent, fields[1:]
	case "log":
		return lineLog, fields[1:]
	}
	return lineTable, fields
}

// Reasons a line is dropped.
var (
	errTooLong      = fmt.Errorf("line longer than %d bytes", maxLineLen)
	errUnterminated = errors.New("last line has no newline")
	errUnknownTable = errors.New("unknown table")
	errFieldCount   = errors.New("wrong number of fields")
	errEmptyKey     = errors.New("empty first key")
	errBadValue     = errors.New("invalid value")
	errBadEvent     = errors.New("invalid event")
	errNoLogs       = errors.New("this runtime takes no |log| records")
)

// isNull reports whether a value stands for "not measured": empty, or the
// "(null)" that printf("%s", NULL) gives.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "(null)" }

// buildRecord makes a record of t from a table line's values (the fields
// after the table name), positional per the table's fields.
func buildRecord(t *table.Table, vals [][]byte, now time.Time, period time.Duration) (*table.Record, error) {
	if len(vals) != len(t.Fields) {
		return nil, fmt.Errorf("%w: table %s has %d, the line %d", errFieldCount, t.Name, len(t.Fields), len(vals))
	}
	if isNull(vals[0]) {
		return nil, fmt.Errorf("%w (%s)", errEmptyKey, t.Fields[0].Name)
	}
	r := t.NewRecord(now, period)
	for i, f := range t.Fields {
		v := vals[i]
		if isNull(v) {
			continue
		}
		switch f.Kind {
		case table.KindKey, table.KindLabel:
			r.SetStr(i, string(v))
		case table.KindHistogram:
			h, err := parseHistogram(string(v))
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", errBadValue, f.Name, err)
			}
			r.SetHist(i, h)
		default:
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %q is not a number", errBadValue, f.Name, v)
			}
			r.SetNum(i, n)
		}
	}
	return r, nil
}

// maxBuckets bounds a histogram (a line of 8191 bytes holds fewer anyway).
const maxBuckets = 4096

// parseHistogram decodes gala-gopher's histogram encoding
// "<N> <le1> <cum1> ... <leN> <cumN> <sum> <max>" (cumulative counts) into
// per-bucket counts. A last bound of +Inf becomes the overflow bucket.
func parseHistogram(s string) (*table.Histogram, error) {
	tok := strings.Fields(s)
	if len(tok) == 0 {
		return nil, errors.New("empty histogram")
	}
	n, err := strconv.Atoi(tok[0])
	if err != nil || n <= 0 || n > maxBuckets {
		return nil, fmt.Errorf("bucket count %q must be in [1, %d]", tok[0], maxBuckets)
	}
	if len(tok) != 2*n+3 {
		return nil, fmt.Errorf("%d buckets need %d numbers, got %d", n, 2*n+3, len(tok))
	}
	bounds := make([]float64, 0, n)
	counts := make([]uint64, n+1)
	var prev uint64
	for i := range n {
		le, err := strconv.ParseFloat(tok[1+2*i], 64)
		if err != nil || math.IsNaN(le) {
			return nil, fmt.Errorf("bound %q is not a number", tok[1+2*i])
		}
		cum, err := strconv.ParseUint(tok[2+2*i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("count %q is not a non-negative integer", tok[2+2*i])
		}
		if i > 0 && le <= bounds[i-1] {
			return nil, fmt.Errorf("bounds are not increasing (%s after %s)", tok[1+2*i], tok[2*i-1])
		}
		if cum < prev {
			return nil, fmt.Errorf("cumulative counts decrease (%d after %d)", cum, prev)
		}
		bounds = append(bounds, le)
		counts[i] = cum - prev
		prev = cum
	}
	if math.IsInf(bounds[0], -1) {
		return nil, errors.New("a bound is -Inf")
	}
	if math.IsInf(bounds[n-1], 1) {
		// Its count is the overflow bucket's.
		bounds, counts = bounds[:n-1], counts[:n]
	}
	sum, err := strconv.ParseFloat(tok[2*n+1], 64)
	if err != nil {
		return nil, fmt.Errorf("sum %q is not a number", tok[2*n+1])
	}
	maxv, err := strconv.ParseFloat(tok[2*n+2], 64)
	if err != nil {
		return nil, fmt.Errorf("max %q is not a number", tok[2*n+2])
	}
	return &table.Histogram{Bounds: bounds, Counts: counts, Sum: sum, Max: maxv}, nil
}

// eventFields is the number of fields of an event line after "event".
const eventFields = 12

var severities = map[string]event.Severity{
	"INFO":  event.SeverityInfo,
	"WARN":  event.SeverityWarn,
	"ERROR": event.SeverityError,
	"FATAL": event.SeverityFatal,
}

// parseEvent decodes the fields of an |event| line:
// entity_name, entity_id, metric, pid, comm, ip, container_id, pod_id, dev,
// severity text, severity number, body. A body containing '|' is kept whole.
func parseEvent(f [][]byte, now time.Time) (event.Event, error) {
	if len(f) < eventFields {
		return event.Event{}, fmt.Errorf("%w: %d fields, want %d", errBadEvent, len(f), eventFields)
	}
	e := event.Event{
		Time:        now,
		Entity:      string(f[0]),
		EntityID:    string(f[1]),
		Metric:      string(f[2]),
		Comm:        string(f[4]),
		IP:          string(f[5]),
		ContainerID: string(f[6]),
		PodID:       string(f[7]),
		Device:      string(f[8]),
		Message:     string(bytes.Join(f[11:], []byte{'|'})),
	}
	if e.Entity == "" || e.EntityID == "" || e.Metric == "" {
		return event.Event{}, fmt.Errorf("%w: entity_name, entity_id and metric must be set", errBadEvent)
	}
	if len(f[3]) > 0 {
		pid, err := strconv.Atoi(string(f[3]))
		if err != nil || pid < 0 {
			return event.Event{}, fmt.Errorf("%w: pid %q", errBadEvent, f[3])
		}
		e.PID = pid
	}
	// The text decides when it is one of gala-gopher's four; otherwise the
	// number, which is what the output carries.
	if sev, ok := severities[string(f[9])]; ok {
		e.Severity = sev
	} else if n, err := strconv.Atoi(string(f[10])); err == nil && n >= 1 && n <= 24 {
		e.Severity = event.Severity(n)
	} else {
		return event.Event{}, fmt.Errorf("%w: severity %q/%q", errBadEvent, f[9], f[10])
	}
	return e, nil
}

// textLevel maps a debug-log line to its level by gala-gopher's prefixes
// ([INFO], [WARN], [ERROR]; anything else is DEBUG) and strips the prefix.
func textLevel(line []byte) (slog.Level, string) {
	for _, p := range []struct {
		prefix string
		level  slog.Level
	}{{"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERROR]", slog.LevelError}} {
		if rest, ok := bytes.CutPrefix(line, []byte(p.prefix)); ok {
			return p.level, string(bytes.TrimSpace(rest))
		}
	}
	return slog.LevelDebug, string(bytes.TrimRight(line, " \t\r"))
}
