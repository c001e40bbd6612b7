package tprofiling

import (
	_ "embed"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Paths where the daemon serves a Hub beside the REST API.
const (
	TimelinePath = "/tprofiling/timeline"
	TracePath    = "/tprofiling/trace"
)

// hubMax bounds the events a Hub keeps: the oldest give way to new ones
// (a window, not a loss: every event has already gone to the outputs).
const hubMax = 100000

// maxWindow is the longest window a trace request may ask for.
const maxWindow = time.Hour

//go:embed timeline.html
var timelineHTML []byte

// Hub keeps the latest events of the running tprofiling probe and serves
// them: GET /tprofiling/trace?seconds=N (default 60, at most 3600) answers
// a Chrome trace-event JSON document of the last N seconds, with the calls
// threads are blocked in now as in_progress events (it opens in Perfetto
// and chrome://tracing); GET /tprofiling/timeline is a self-contained HTML
// page that draws it, one row per thread. 503 while no probe runs. A Hub
// outlives probe restarts.
type Hub struct {
	now func() time.Time

	mu       sync.Mutex
	active   bool
	ring     []Event
	head     int // next slot once the ring is full
	open     []Event
	clock    clock
	procName func(uint32) string
}

// NewHub returns a Hub with no probe running.
func NewHub() *Hub { return &Hub{now: time.Now} }

// setActive says whether a probe runs; a stopped probe's events are
// dropped.
func (h *Hub) setActive(on bool, procName func(uint32) string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active, h.procName = on, procName
	if !on {
		h.ring, h.head, h.open = nil, 0, nil
	}
}

// publish adds a period's events and replaces the in-progress calls.
func (h *Hub) publish(evs, open []Event, c clock) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		if len(h.ring) < hubMax {
			h.ring = append(h.ring, e)
			continue
		}
		h.ring[h.head] = e
		h.head = (h.head + 1) % hubMax
	}
	h.open, h.clock = open, c
}

// snapshot returns the events that ended in the last d, and the open calls.
func (h *Hub) snapshot(d time.Duration) (evs []Event, c clock, procName func(uint32) string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.active {
		return nil, clock{}, nil, false
	}
	from := h.now().Add(-d).UnixNano() - h.clock.offset
	for _, e := range h.ring {
		if int64(e.End()) >= from {
			evs = append(evs, e)
		}
	}
	evs = append(evs, h.open...)
	sortEvents(evs)
	return evs, h.clock, h.procName, true
}

// ServeHTTP answers the two paths.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == TimelinePath {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(timelineHTML)
		return
	}
	d := time.Minute
	if s := r.URL.Query().Get("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxWindow {
			http.Error(w, "seconds must be an integer from 1 to "+strconv.Itoa(int(maxWindow/time.Second)), http.StatusBadRequest)
			return
		}
		d = time.Duration(n) * time.Second
	}
	evs, c, procName, ok := h.snapshot(d)
	if !ok {
		http.Error(w, "tprofiling is not running", http.StatusServiceUnavailable)
		return
	}
	var next uint64
	body, err := traceJSON(traceEvents(evs, c, procName, map[uint64]string{}, &next))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="tprofiling-trace.json"`)
	}
	_, _ = w.Write(body)
}
