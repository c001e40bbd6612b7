package identity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Runtimes says which container runtime APIs to ask for the names, images,
// pods and labels that the cgroup paths and state files do not hold. Paths
// are unix sockets on the host, looked up under the resolver's root (the
// GOPHER_HOST_PATH mount when galago runs in a container); "" disables one.
type Runtimes struct {
	// CRI are the CRI runtime endpoints (runtime.v1.RuntimeService),
	// "unix://" prefix optional: containerd's, CRI-O's, cri-dockerd's,
	// iSulad's. Each that answers is used.
	CRI []string
	// Containerd is containerd's own API socket (namespaces, containers).
	Containerd string
	// Docker is the Docker Engine API socket.
	Docker string
	// Timeout bounds each call to a runtime.
	Timeout time.Duration
	// Period is how often every runtime is listed again even when no
	// unknown container was asked for (names and pod labels can change).
	Period time.Duration
}

// Defaults of the runtime APIs.
const (
	DefaultRuntimeTimeout = 2 * time.Second
	DefaultRuntimePeriod  = time.Minute
	// runtimeMinGap is the least time between two listings: a burst of
	// unknown ids costs one listing per runtime.
	runtimeMinGap = time.Second
)

// SocketPath turns an endpoint ("unix:///run/x.sock" or "/run/x.sock")
// into a socket path; it fails for another scheme or a relative path.
func SocketPath(endpoint string) (string, error) {
	p := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != "unix" {
			return "", fmt.Errorf("endpoint %q: scheme %q, only unix sockets are supported", endpoint, scheme)
		}
		p = rest
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q: not an absolute socket path", endpoint)
	}
	return filepath.Clean(p), nil
}

// runtimeSource lists the running containers one runtime knows.
type runtimeSource interface {
	kind() string
	socket() string // path under the host root, as configured
	list(ctx context.Context) ([]Container, error)
	close()
}

// sourceState is what the last listing of a source gave.
type sourceState struct {
	src        runtimeSource
	up         bool
	logged     bool // the current up/down state was logged
	errors     uint64
	containers int
	lastErr    error
	// last is what the last good listing gave: kept while the runtime
	// fails (its containers outlive a restart of the runtime).
	last []Container
}

// runtimeAPI keeps what the runtimes' APIs say of their containers, listed
// in the background: lookups never wait for a runtime. An id nobody knows
// asks for a new listing (at most one per runtimeMinGap, and per id at
// most one per missTTL); every Period all are listed again.
type runtimeAPI struct {
	root    string
	log     *slog.Logger
	timeout time.Duration
	period  time.Duration
	missTTL time.Duration
	max     int
	now     func() time.Time
	kick    chan struct{}

	mu       sync.RWMutex
	sources  []*sourceState
	byID     map[string]runtimeEntry
	byShort  map[string]string // ShortID -> full id, "" when several share it
	gen      uint64            // listings done
	dropped  uint64            // containers a listing returned beyond max
	missedAt lru[string, time.Time]
	// keepGone is how long a container that left the listings is still
	// answered: the rows its processes left behind (labelled for the exit
	// grace) keep their names, so their series do not change.
	keepGone time.Duration
}

type runtimeEntry struct {
	c      Container
	listed time.Time // last listing that had it
}

func newRuntimeAPI(root string, cfg Runtimes, max int, missTTL, keepGone time.Duration, log *slog.Logger, now func() time.Time) (*runtimeAPI, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &runtimeAPI{root: root, log: log, timeout: cfg.Timeout, period: cfg.Period, missTTL: missTTL,
		max: max, now: now, kick: make(chan struct{}, 1), byID: map[string]runtimeEntry{}, keepGone: keepGone}
	if a.timeout <= 0 {
		a.timeout = DefaultRuntimeTimeout
	}
	if a.period <= 0 {
		a.period = DefaultRuntimePeriod
	}
	a.missedAt.init(max)
	add := func(s runtimeSource) { a.sources = append(a.sources, &sourceState{src: s}) }
	for _, e := range cfg.CRI {
		if e == "" {
			continue
		}
		p, err := SocketPath(e)
		if err != nil {
			return nil, fmt.Errorf("CRI %w", err)
		}
		add(newCRISource(p, a.hostPath(p)))
	}
	if cfg.Containerd != "" {
		p, err := SocketPath(cfg.Containerd)
		if err != nil {
			return nil, fmt.Errorf("containerd %w", err)
		}
		add(newContainerdSource(p, a.hostPath(p)))
	}
	if cfg.Docker != "" {
		p, err := SocketPath(cfg.Docker)
		if err != nil {
			return nil, fmt.Errorf("docker %w", err)
		}
		add(newDockerSource(p, a.hostPath(p)))
	}
	return a, nil
}

func (a *runtimeAPI) hostPath(p string) string { return filepath.Join(a.root, p) }

// lookup returns what the runtimes said of a full container id. A miss asks
// the background loop for a new listing.
func (a *runtimeAPI) lookup(id string) (Container, bool) {
	a.mu.RLock()
	e, ok := a.byID[id]
	a.mu.RUnlock()
	if ok || len(a.sources) == 0 {
		return e.c, ok
	}
	now := a.now()
	a.mu.Lock()
	last, asked := a.missedAt.get(id)
	if !asked || now.Sub(last) >= a.missTTL {
		a.missedAt.put(id, now)
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
	a.mu.Unlock()
	return Container{}, false
}

// expect says that container id has just come (its cgroups were made):
// the runtimes are listed again (a CRI runtime lists a container before
// starting it), and the next lookup that misses it asks for a listing
// again, whenever the last miss was.
func (a *runtimeAPI) expect(id string) {
	a.mu.Lock()
	a.missedAt.remove(id)
	a.mu.Unlock()
	if len(a.sources) == 0 {
		return
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// run lists the runtimes at start, on kicks and every period, until ctx
// ends; then it closes the connections.
func (a *runtimeAPI) run(ctx context.Context) {
	defer func() {
		for _, s := range a.sources {
			s.src.close()
		}
	}()
	if len(a.sources) == 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(a.period)
	defer t.Stop()
	for {
		start := time.Now()
		a.refresh(ctx)
		if wait := runtimeMinGap - time.Since(start); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-t.C:
		}
	}
}

// refresh lists every runtime (concurrently, each bounded by the timeout)
// and replaces the known containers. Sources earlier in the list win a
// field both fill (CRI first: it has the pods).
func (a *runtimeAPI) refresh(ctx context.Context) {
	lists := make([][]Container, len(a.sources))
	errs := make([]error, len(a.sources))
	var wg sync.WaitGroup
	for i, s := range a.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := os.Stat(a.hostPath(s.src.socket())); err != nil {
				errs[i] = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, a.timeout)
			defer cancel()
			lists[i], errs[i] = s.src.list(cctx)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := a.now()
	byID := map[string]runtimeEntry{}
	var dropped uint64
	for i, l := range lists {
		s := a.sources[i]
		a.noteState(s, errs[i], len(l))
		if errs[i] != nil {
			l = s.last
		} else {
			s.last = l
		}
		for _, c := range l {
			c.ID = strings.ToLower(c.ID)
			old, ok := byID[c.ID]
			if !ok && len(byID) >= a.max {
				dropped++
				continue
			}
			if ok {
				mergeContainer(&old.c, c)
				c = old.c
			}
			byID[c.ID] = runtimeEntry{c: c, listed: now}
		}
	}
	a.mu.Lock()
	for id, e := range a.byID {
		if _, ok := byID[id]; !ok && len(byID) < a.max && now.Sub(e.listed) < a.keepGone {
			byID[id] = e
		}
	}
	a.byID = byID
	a.byShort = make(map[string]string, len(byID))
	for id := range byID {
		k := ShortID(id)
		if _, dup := a.byShort[k]; dup {
			a.byShort[k] = ""
		} else {
			a.byShort[k] = id
		}
	}
	a.gen++
	first := a.gen == 1
	a.dropped += dropped
	a.mu.Unlock()
	if first {
		a.logRuntimes()
	}
}

// noteState records a source's result and logs a change of reachability:
// the first listing of all runtimes is one line (which answered, which
// did not and why), later a line per runtime that comes or goes, not one
// per try.
func (a *runtimeAPI) noteState(s *sourceState, err error, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	up := err == nil
	if !up && !errors.Is(err, fs.ErrNotExist) {
		s.errors++
	}
	s.containers = 0
	if up {
		s.containers = n
	}
	first := !s.logged
	if !first && s.up == up {
		return
	}
	s.up, s.logged, s.lastErr = up, true, err
	if first {
		return // logRuntimes says it
	}
	if up {
		a.log.Info("container runtime API reachable", "runtime", s.src.kind(), "socket", s.src.socket(), "containers", n)
		return
	}
	a.log.Info("container runtime API not reachable: names, images and pods from cgroup paths and state files only",
		"runtime", s.src.kind(), "socket", s.src.socket(), "err", err)
}

// logRuntimes logs, once, what the first listing found.
func (a *runtimeAPI) logRuntimes() {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var up, down []string
	for _, s := range a.sources {
		name := s.src.kind() + " " + s.src.socket()
		if s.up {
			up = append(up, fmt.Sprintf("%s (%d containers)", name, s.containers))
		} else {
			down = append(down, fmt.Sprintf("%s (%v)", name, s.lastErr))
		}
	}
	msg := "container runtime APIs"
	if len(up) == 0 {
		msg = "no container runtime API reachable: names, images and pods from cgroup paths and state files only"
	}
	a.log.Info(msg, "reachable", strings.Join(up, ", "), "not_reachable", strings.Join(down, ", "))
}

// mergeContainer fills the empty fields of dst from src.
func mergeContainer(dst *Container, src Container) {
	set := func(d *string, s string) {
		if *d == "" {
			*d = s
		}
	}
	set(&dst.Name, src.Name)
	set(&dst.Image, src.Image)
	set(&dst.PodID, src.PodID)
	set(&dst.PodName, src.PodName)
	set(&dst.PodNamespace, src.PodNamespace)
	if dst.PodLabels == nil {
		dst.PodLabels = src.PodLabels
	}
	if dst.Labels == nil {
		dst.Labels = src.Labels
	}
	if dst.CgroupID == 0 {
		dst.CgroupID = src.CgroupID
	}
}

var (
	descRuntimeUp = prometheus.NewDesc("galago_identity_runtime_up",
		"1 when the last listing of the container runtime API succeeded.", []string{"runtime", "socket"}, nil)
	descRuntimeErrors = prometheus.NewDesc("galago_identity_runtime_errors_total",
		"Failed listings of the container runtime API (an absent socket is not counted).", []string{"runtime", "socket"}, nil)
	descRuntimeContainers = prometheus.NewDesc("galago_identity_runtime_containers",
		"Containers the last listing of the runtime API returned.", []string{"runtime", "socket"}, nil)
	descRuntimeDropped = prometheus.NewDesc("galago_identity_runtime_containers_dropped_total",
		"Containers the runtime APIs listed beyond the identity cache's bound, left unnamed.", nil, nil)
)

// Describe implements prometheus.Collector.
func (a *runtimeAPI) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRuntimeUp
	ch <- descRuntimeErrors
	ch <- descRuntimeContainers
	ch <- descRuntimeDropped
}

// Collect implements prometheus.Collector.
func (a *runtimeAPI) Collect(ch chan<- prometheus.Metric) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, s := range a.sources {
		up := 0.0
		if s.up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descRuntimeUp, prometheus.GaugeValue, up, s.src.kind(), s.src.socket())
		ch <- prometheus.MustNewConstMetric(descRuntimeErrors, prometheus.CounterValue, float64(s.errors), s.src.kind(), s.src.socket())
		ch <- prometheus.MustNewConstMetric(descRuntimeContainers, prometheus.GaugeValue, float64(s.containers), s.src.kind(), s.src.socket())
	}
	ch <- prometheus.MustNewConstMetric(descRuntimeDropped, prometheus.CounterValue, float64(a.dropped))
}

// expand maps an abbreviated id to the one full id a runtime listed that
// starts with it; it returns prefix unchanged if none or several.
func (a *runtimeAPI) expand(prefix string) string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if _, ok := a.byID[prefix]; ok {
		return prefix
	}
	if len(prefix) == ShortIDLen {
		// The container tables' key: no scan.
		if full := a.byShort[prefix]; full != "" {
			return full
		}
		return prefix
	}
	return uniquePrefix(a.byID, prefix)
}
