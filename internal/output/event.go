package output

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/event"
)

// asctimeLayout is C asctime(3) without its trailing newline.
const asctimeLayout = "Mon Jan _2 15:04:05 2006"

type eventJSON struct {
	Timestamp      int64          `json:"Timestamp"`
	EventID        string         `json:"event_id"`
	Attributes     eventAttrs     `json:"Attributes"`
	Resource       eventResource  `json:"Resource"`
	SeverityText   string         `json:"SeverityText"`
	SeverityNumber event.Severity `json:"SeverityNumber"`
	Body           string         `json:"Body"`
}

type eventAttrs struct {
	EntityID  string `json:"entity_id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
}

type eventResource struct {
	Metric string      `json:"metric"`
	Labels eventLabels `json:"labels"`
}

type eventLabels struct {
	Host        string `json:"Host"`
	PID         string `json:"PID"`
	COMM        string `json:"COMM"`
	IP          string `json:"IP"`
	ContainerID string `json:"ContainerID"`
	POD         string `json:"POD"`
	Device      string `json:"Device"`
}

// MarshalEvent renders e as gala-gopher's event JSON (one compact object).
// Body's asctime is e.Time in loc (gala-gopher uses local time). A zero
// Severity is reported as WARN, the severity of every gala-gopher event.
func MarshalEvent(e event.Event, host Host, loc *time.Location) ([]byte, error) {
	sev := e.Severity
	if sev == 0 {
		sev = event.SeverityWarn
	}
	ms := e.Time.UnixMilli()
	entityID := host.MachineID() + "_" + e.Entity + "_" + strings.ReplaceAll(e.EntityID, "/", ":")
	eventID := strconv.FormatInt(ms, 10) + "_" + entityID
	pid := ""
	if e.PID != 0 {
		pid = strconv.Itoa(e.PID)
	}
	return marshalCompact(eventJSON{
		Timestamp:  ms,
		EventID:    eventID,
		Attributes: eventAttrs{EntityID: entityID, EventID: eventID, EventType: "sys"},
		Resource: eventResource{
			Metric: "gala_gopher_" + e.Entity + "_" + e.Metric,
			Labels: eventLabels{
				Host:        host.MachineID(),
				PID:         pid,
				COMM:        e.Comm,
				IP:          e.IP,
				ContainerID: e.ContainerID,
				POD:         e.PodID,
				Device:      e.Device,
			},
		},
		SeverityText:   sev.String(),
		SeverityNumber: sev,
		Body:           e.Time.In(loc).Format(asctimeLayout) + " " + sev.String() + " Entity(" + e.EntityID + ") " + e.Message,
	})
}

// MarshalLog renders a probe's log record as gala-gopher does on the event
// topic: its six fields in this order, the Resource object extended with
// host.id (the uuid), host.name and host.ip.
func MarshalLog(l event.Log, host Host) []byte {
	b := make([]byte, 0, 128+len(l.Timestamp)+len(l.SeverityText)+len(l.SeverityNumber)+len(l.Resource)+len(l.Attributes)+len(l.Body))
	b = append(append(b, `{"Timestamp":`...), l.Timestamp...)
	b = append(append(b, `,"SeverityText":`...), l.SeverityText...)
	b = append(append(b, `,"SeverityNumber":`...), l.SeverityNumber...)
	b = append(b, `,"Resource":`...)
	// Resource is a compact object: drop its '}' and append the host.
	b = append(b, l.Resource[:len(l.Resource)-1]...)
	if len(l.Resource) > 2 {
		b = append(b, ',')
	}
	b = appendJSONString(append(b, `"host.id":`...), host.UUID)
	b = appendJSONString(append(b, `,"host.name":`...), host.Hostname)
	b = appendJSONString(append(b, `,"host.ip":`...), host.IP)
	b = append(append(b, `},"Attributes":`...), l.Attributes...)
	b = append(append(b, `,"Body":`...), l.Body...)
	return append(b, '}')
}

// EventLogFile is the event log's name in event_dir.
const EventLogFile = "gopher_event.log"

// EventLogSink appends one JSON line per event to <event_dir>/gopher_event.log,
// rotated to .1 at 100 MB like gala-gopher's event log.
type EventLogSink struct {
	host Host
	loc  *time.Location
	w    *rotatingFile
}

// NewEventLogSink opens the event log in dir. loc is the zone of the Body
// timestamp (nil: local time).
func NewEventLogSink(dir string, host Host, loc *time.Location) (*EventLogSink, error) {
	if loc == nil {
		loc = time.Local
	}
	w, err := openRotating(filepath.Join(dir, EventLogFile), 100*MB)
	if err != nil {
		return nil, err
	}
	return &EventLogSink{host: host, loc: loc, w: w}, nil
}

func (s *EventLogSink) WriteEvent(e event.Event) error {
	b, err := MarshalEvent(e, s.host, s.loc)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

// WriteLog appends a probe's log record (MarshalLog) to the event log:
// gala-gopher only sends these to Kafka; galago keeps them with event
// out_channel logs too.
func (s *EventLogSink) WriteLog(l event.Log) error {
	_, err := s.w.Write(append(MarshalLog(l, s.host), '\n'))
	return err
}

func (s *EventLogSink) Close() error { return s.w.Close() }
