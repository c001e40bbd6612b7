package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Log is an OpenTelemetry log record a probe reports as a |log| line
// (gala-gopher's tprofiling in Kafka mode):
//
//	|log|<Timestamp>|<SeverityText>|<SeverityNumber>|<Resource>|<Attributes>|<Body>|
//
// Each field is a JSON text, carried as written (compacted). Unlike an
// Event it has no entity and is never de-duplicated.
type Log struct {
	Timestamp      json.RawMessage // a number (ms)
	SeverityText   json.RawMessage // a string, e.g. "WARN"
	SeverityNumber json.RawMessage // a number
	Resource       json.RawMessage // an object; the outputs add host.id, host.name, host.ip
	Attributes     json.RawMessage // any JSON value (tprofiling: an object)
	Body           json.RawMessage // any JSON value (tprofiling: a string)
}

// LogFields is the number of fields of a |log| line after "log".
const LogFields = 6

// ErrBadLog marks a |log| line that is not six JSON texts of the right kinds.
var ErrBadLog = errors.New("invalid log record")

// ParseLog checks and compacts the fields of a |log| line. A Body holding
// '|' was split by the line format: fields beyond the sixth are joined back
// into it.
func ParseLog(f [][]byte) (Log, error) {
	if len(f) < LogFields {
		return Log{}, fmt.Errorf("%w: %d fields, want %d", ErrBadLog, len(f), LogFields)
	}
	body := bytes.Join(f[LogFields-1:], []byte{'|'})
	specs := []struct {
		name string
		raw  []byte
		kind byte // first byte the value must start with; 0: any, 'n': a number
	}{
		{"Timestamp", f[0], 'n'},
		{"SeverityText", f[1], '"'},
		{"SeverityNumber", f[2], 'n'},
		{"Resource", f[3], '{'},
		{"Attributes", f[4], 0},
		{"Body", body, 0},
	}
	out := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		var b bytes.Buffer
		if err := json.Compact(&b, s.raw); err != nil {
			return Log{}, fmt.Errorf("%w: %s %.40q is not JSON: %w", ErrBadLog, s.name, s.raw, err)
		}
		v := b.Bytes()
		switch c := v[0]; s.kind {
		case 'n':
			if c != '-' && (c < '0' || c > '9') {
				return Log{}, fmt.Errorf("%w: %s %.40q is not a number", ErrBadLog, s.name, v)
			}
		case '"', '{':
			if c != s.kind {
				return Log{}, fmt.Errorf("%w: %s %.40q does not start with %c", ErrBadLog, s.name, v, s.kind)
			}
		}
		out[i] = v
	}
	return Log{Timestamp: out[0], SeverityText: out[1], SeverityNumber: out[2],
		Resource: out[3], Attributes: out[4], Body: out[5]}, nil
}
