package applog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/logpattern"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "applog"

// Sub-item bits, in the order of probe.Builtin's applog entry.
var (
	bitContainer = probe.MustSubItemBit(Name, "container_log")
	bitFile      = probe.MustSubItemBit(Name, "file_log")
)

// Defaults and bounds.
const (
	DefaultLogRoot     = "/var/log"
	DefaultDockerRoot  = "/var/lib/docker"
	DefaultMaxPatterns = 256
	DefaultPoll        = time.Second
	// discoverEvery is how many polls pass between two walks of the
	// observed processes' descriptors (sooner when the snoopers' set
	// changes): new files are read from their start, so a late discovery
	// loses nothing, and a blacklist over a whole host costs a walk of
	// every process's descriptors.
	discoverEvery = 5
	// maxSources bounds the containers, units and processes followed.
	maxSources = 1024
	// maxFiles bounds the files followed.
	maxFiles = 4096
	// maxReadPerFile and maxReadPerPoll bound what one poll reads.
	maxReadPerFile = 1 << 20
	maxReadPerPoll = 8 << 20
	// bornSlack is how far before Start a file's birth still counts as
	// after it. Such a file cannot have been counted by a previous run
	// unless the offsets file names it, which wins.
	bornSlack = time.Second
)

// Probe is the applog feature: it follows the logs of the observed
// processes' containers and the files under the log root they write, and
// counts their messages per source, level and pattern.
type Probe struct {
	root        string // host root
	logRoot     string // as the processes see it
	dockerRoot  string
	stateFile   string
	maxPatterns int
	pollEvery   time.Duration
	interval    time.Duration // replaces report_period when set (tests)
	ids         identity.Resolver
	now         func() time.Time

	mu      sync.Mutex
	cfg     probe.Config
	rt      probe.Runtime
	started int64 // unix ns: files born after it are read from their start
	stopped bool
	// rediscover asks the next poll to walk the processes (new targets or
	// sub-items).
	rediscover bool

	// Owned by the loop goroutine.
	buf      []byte
	gen      uint64
	polls    uint64
	files    map[fileID]*tracked
	sources  map[sourceKey]*source
	saved    map[fileID]stateEntry // offsets as of the last report
	finished map[fileID]stateEntry // files done since the last report
	// paths followed before: a new file under one of these names is a
	// rotation's successor, read from its start.
	paths     map[string]bool
	warned    map[string]bool
	linesRead uint64
	malformed uint64

	periodChanged chan struct{}
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithHostPath reads /proc and the log files under root (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.root = root } }

// WithLogRoot replaces /var/log: the directory (as processes see it) whose
// files written by observed processes are followed, and under which
// pods/ and containers/ hold the CRI logs.
func WithLogRoot(dir string) Option { return func(p *Probe) { p.logRoot = filepath.Clean(dir) } }

// WithDockerRoot replaces /var/lib/docker.
func WithDockerRoot(dir string) Option { return func(p *Probe) { p.dockerRoot = filepath.Clean(dir) } }

// WithStateFile is where offsets are kept across restarts ("" keeps none).
func WithStateFile(path string) Option { return func(p *Probe) { p.stateFile = path } }

// WithMaxPatterns replaces the per-source pattern cap.
func WithMaxPatterns(n int) Option { return func(p *Probe) { p.maxPatterns = n } }

// WithIdentity names containers (their name finds the pod log directory).
func WithIdentity(r identity.Resolver) Option { return func(p *Probe) { p.ids = r } }

// WithPoll replaces how often files are looked for and read.
func WithPoll(d time.Duration) Option { return func(p *Probe) { p.pollEvery = d } }

// WithInterval replaces report_period (tests use sub-second periods).
func WithInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// New returns an applog probe.
func New(opts ...Option) *Probe {
	p := &Probe{root: "/", logRoot: DefaultLogRoot, dockerRoot: DefaultDockerRoot,
		maxPatterns: DefaultMaxPatterns, pollEvery: DefaultPoll, now: time.Now,
		periodChanged: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{AppLog} }

// Start loads the saved offsets and starts the loop. Files already there
// are read from their saved offset, else from their end; files born after
// Start from their beginning.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return fmt.Errorf("applog: started twice")
	}
	p.cfg, p.rt = cfg, rt
	// File timestamps come from the kernel's coarse clock, a tick behind
	// the one read here: a file born just after Start must not look older.
	p.started = p.now().Add(-bornSlack).UnixNano()
	p.buf = make([]byte, readChunk)
	p.files, p.sources = map[fileID]*tracked{}, map[sourceKey]*source{}
	p.finished, p.warned, p.paths = map[fileID]stateEntry{}, map[string]bool{}, map[string]bool{}
	saved, err := loadState(p.stateFile)
	if err != nil {
		// Without offsets files are read from their end: nothing is
		// counted twice, what was written while galago was down is not
		// counted.
		rt.Error()
		rt.Logger().Warn("applog: offsets not loaded; files are read from their end", "err", err)
	}
	p.saved = saved
	rt.Go(p.run)
	return nil
}

// Reconfigure takes new sub-items, params and targets; the next poll
// follows them.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return fmt.Errorf("applog: not started")
	}
	old := p.cfg
	p.cfg, p.rediscover = cfg, true
	if p.period(cfg) != p.period(old) {
		probe.Kick(p.periodChanged)
	}
	return nil
}

// Stop closes the files. Counts of the unfinished period are not reported
// and its offsets not saved: the next start reads those messages again.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	for _, t := range p.files {
		if t.f != nil {
			t.f.Close()
		}
	}
	return nil
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.interval, cfg.Params)
}

func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	period := p.period(p.cfg)
	p.mu.Unlock()
	report := time.NewTicker(period)
	defer report.Stop()
	poll := time.NewTicker(min(p.pollEvery, period))
	defer poll.Stop()
	p.poll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.periodChanged:
			p.mu.Lock()
			period = p.period(p.cfg)
			p.mu.Unlock()
			report.Reset(period)
			poll.Reset(min(p.pollEvery, period))
		case <-poll.C:
			p.poll()
		case <-report.C:
			p.poll()
			p.report(p.now(), period)
		}
	}
}

// poll finds the files to follow and reads what they gained.
func (p *Probe) poll() {
	p.mu.Lock()
	cfg, stopped, changed := p.cfg, p.stopped, p.rediscover
	p.rediscover = false
	p.mu.Unlock()
	if stopped {
		return
	}
	if cfg.Targets != nil {
		select {
		case <-cfg.Targets.Changed():
			changed = true
		default:
		}
	}
	if changed || p.polls%discoverEvery == 0 {
		p.discover(cfg)
	}
	p.polls++
	budget := int64(maxReadPerPoll)
	for id, t := range p.files {
		if t.seen != p.gen {
			// No observed process writes it any more (or the runtime
			// moved on to a new file): read it to its end, over as many
			// polls as the budget needs, and let go.
			if t.drainTo < 0 {
				t.drainTo = p.sizeOf(t)
			}
			if p.readFile(t, &budget) || t.off >= t.drainTo {
				t.flush()
				p.finish(id, t)
			}
			continue
		}
		t.drainTo = -1
		p.readFile(t, &budget)
	}
}

// sizeOf is t's size now (its offset when it cannot be read).
func (p *Probe) sizeOf(t *tracked) int64 {
	fi, err := t.f.Stat()
	if err != nil {
		return t.off
	}
	return fi.Size()
}

// readFile reads what t gained, within the poll's budget; it reports
// whether t is drained: read up to its end, or unreadable.
func (p *Probe) readFile(t *tracked, budget *int64) bool {
	if *budget < readChunk {
		return false
	}
	fi, err := t.f.Stat()
	if err != nil {
		p.fail("stat "+t.path, err)
		return true
	}
	if fi.Size() < t.off {
		// Truncated in place (copytruncate): start over.
		t.flush()
		t.j = [2]logpattern.Joiner{}
		t.off, t.skip = 0, false
	}
	n, err := p.read(t, min(*budget, maxReadPerFile))
	*budget -= n
	if err != nil {
		p.fail("read "+t.path, err)
		return true
	}
	if n == 0 {
		// Nothing new since the last poll: a message being assembled is
		// complete (a trace is written at once).
		t.flush()
	}
	return n == 0
}

func (p *Probe) finish(id fileID, t *tracked) {
	p.finished[id] = stateEntry{Dev: id.Dev, Ino: id.Ino, Btime: t.st.btime, Path: t.path, Off: t.off}
	if t.f != nil {
		t.f.Close()
	}
	t.src.files--
	delete(p.files, id)
}

// discover walks the observed processes and follows the log files they
// lead to.
func (p *Probe) discover(cfg probe.Config) {
	p.gen++
	done := map[string]bool{}
	for _, pid := range p.observedPIDsOf(cfg) {
		o, err := p.origin(pid)
		if err != nil {
			continue // exited
		}
		if o.container != "" && cfg.Has(bitContainer) && !done[o.container] {
			done[o.container] = true
			for _, c := range p.containerLogs(o.container, o.podUID) {
				p.track(c)
			}
		}
		if !cfg.Has(bitFile) {
			continue
		}
		src := sourceKey{container: o.container}
		if src.container == "" {
			if src.unit = o.unit; src.unit == "" {
				src.pid = pid
			}
		}
		for _, path := range p.writtenLogs(pid, o.container != "") {
			p.track(candidate{open: path, format: fmtPlain, src: src})
		}
	}
}

// track follows a discovered file, unless it already is (under this or
// another name: a rotated file keeps its inode).
func (p *Probe) track(c candidate) {
	st, err := statFile(c.open)
	if err != nil {
		return
	}
	if t, ok := p.files[st.id]; ok {
		t.seen = p.gen
		return
	}
	if len(p.files) >= maxFiles {
		p.warnOnce("files", "applog: file limit reached; more files are not followed", "limit", maxFiles)
		p.rt.Lost(1)
		return
	}
	src := p.sources[c.src]
	if src == nil {
		if len(p.sources) >= maxSources {
			p.warnOnce("sources", "applog: source limit reached; more containers and processes are not followed", "limit", maxSources)
			p.rt.Lost(1)
			return
		}
		src = &source{key: c.src, cl: logpattern.NewClusterer(p.maxPatterns), counts: map[countKey]*count{}}
		p.sources[c.src] = src
	}
	off := st.size // a file older than galago's start: from its end
	if e, ok := p.finished[st.id]; ok && e.Btime == st.btime {
		off = e.Off
	} else if e, ok := p.saved[st.id]; ok && e.Btime == st.btime {
		off = e.Off
	} else if (st.btime != 0 && st.btime >= p.started) || p.paths[c.open] {
		off = 0
	}
	if off > st.size {
		off = 0
	}
	f, err := os.Open(c.open)
	if err != nil {
		p.fail("open "+c.open, err)
		return
	}
	src.files++
	if len(p.paths) >= 2*maxFiles {
		clear(p.paths)
	}
	p.paths[c.open] = true
	p.files[st.id] = &tracked{st: st, path: c.open, format: c.format, src: src, f: f, off: off, seen: p.gen, drainTo: -1}
	p.rt.Logger().Debug("applog: following", "file", c.open, "format", c.format.String(), "offset", off)
}

// report publishes the period's counts and saves the offsets that match
// them (before publishing: a crash in between loses a period rather than
// counting one twice).
func (p *Probe) report(now time.Time, period time.Duration) {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return
	}
	seen := now.Unix()
	for id, e := range p.finished {
		e.Seen = seen
		p.saved[id] = e
	}
	clear(p.finished)
	for id, t := range p.files {
		p.saved[id] = stateEntry{Dev: id.Dev, Ino: id.Ino, Btime: t.st.btime, Path: t.path, Off: t.committed(), Seen: seen}
	}
	if err := saveState(p.stateFile, p.saved); err != nil {
		p.fail("save offsets", err)
	}
	if p.malformed > 0 {
		// Lines of a runtime's log that are not in its format: their
		// messages are not counted.
		p.rt.Lost(p.malformed)
	}
	p.rt.Logger().Debug("applog: period", "files", len(p.files), "sources", len(p.sources),
		"lines", p.linesRead, "malformed", p.malformed)
	p.linesRead, p.malformed = 0, 0
	for k, s := range p.sources {
		for _, r := range s.records(now, period) {
			p.rt.Record(r)
		}
		if s.files == 0 {
			delete(p.sources, k)
		}
	}
}

func (p *Probe) fail(what string, err error) {
	p.rt.Error()
	p.warnOnce(what, "applog: "+what+" failed", "err", err)
}

func (p *Probe) warnOnce(key, msg string, attrs ...any) {
	if p.warned[key] {
		return
	}
	p.warned[key] = true
	p.rt.Logger().Warn(msg, attrs...)
}
