package flamegraph

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// PprofPath is where the daemon serves Hub beside the REST API.
const PprofPath = "/flamegraph/pprof"

// maxSeconds bounds a pprof request (the REST server's write timeout is 2 min).
const maxSeconds = 60

// Hub serves live profiles over HTTP: GET /flamegraph/pprof?type=oncpu|
// offcpu|mem|mem_glibc&seconds=N (default 30, at most 60) answers a gzipped pprof profile of
// every observed process, made of what the running flamegraph probe drains
// during those N seconds (drains happen every 2 s, so the window's edges
// are that coarse); mem_glibc's in-use values are the live blocks at the
// last drain. 503 when the probe does not run that type. The probe
// publishes to the Hub it was given (WithHub); a Hub outlives probe
// restarts.
type Hub struct {
	now func() time.Time

	mu     sync.Mutex
	active [nKinds]bool
	period time.Duration
	subs   map[*subscription]struct{}
	live   map[int]*procProfile // mem_glibc's live blocks at the last drain
}

type subscription struct {
	k     kind
	procs map[int]*procProfile
}

// NewHub returns a Hub with no probe running.
func NewHub() *Hub { return &Hub{now: time.Now, subs: map[*subscription]struct{}{}} }

// WithHub makes the probe publish its samples to h.
func WithHub(h *Hub) Option { return func(p *Probe) { p.hub = h } }

// setActive records which types the probe runs and its sample period.
func (h *Hub) setActive(on [nKinds]bool, period time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.active, h.period = on, period
	h.mu.Unlock()
}

// setLive replaces mem_glibc's live blocks.
func (h *Hub) setLive(procs map[int]*procProfile) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.live = procs
	h.mu.Unlock()
}

// publish hands one drained sample to the subscribers of its type.
func (h *Hub) publish(k kind, from *procProfile, stack string, v, objs uint64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.k != k {
			continue
		}
		pp, ok := s.procs[from.pid]
		if !ok {
			pp = from.empty()
			s.procs[from.pid] = pp
		}
		pp.add(stack, v, objs)
	}
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	k := onCPU
	if t := r.URL.Query().Get("type"); t != "" {
		var ok bool
		if k, ok = parseKind(t); !ok {
			http.Error(w, fmt.Sprintf("type %q: want oncpu, offcpu, mem or mem_glibc", t), http.StatusBadRequest)
			return
		}
	}
	secs := 30
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSeconds {
			http.Error(w, fmt.Sprintf("seconds %q: want 1 to %d", v, maxSeconds), http.StatusBadRequest)
			return
		}
		secs = n
	}
	s := &subscription{k: k, procs: map[int]*procProfile{}}
	h.mu.Lock()
	if !h.active[k] {
		h.mu.Unlock()
		http.Error(w, fmt.Sprintf("flamegraph %s is not running", k), http.StatusServiceUnavailable)
		return
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	start := h.now()
	select {
	case <-time.After(time.Duration(secs) * time.Second):
	case <-r.Context().Done():
	}
	h.mu.Lock()
	delete(h.subs, s)
	period := h.period
	if k == memGlibc {
		for pid, l := range h.live {
			pp, ok := s.procs[pid]
			if !ok {
				pp = l.empty()
				s.procs[pid] = pp
			}
			pp.live = l.live
		}
	}
	procs := make([]*procProfile, 0, len(s.procs))
	for _, pp := range s.procs {
		procs = append(procs, pp)
	}
	h.mu.Unlock()
	if r.Context().Err() != nil {
		return
	}
	prof := toPprof(k, procs, period, start, h.now().Sub(start))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.pb.gz"`, k))
	_ = prof.Write(w) // gzipped; a failed write is the client gone
}
