package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "container"

// Probe is the container feature: the container_* tables of every
// container that holds an observed process.
type Probe struct {
	fs       procfs.FS
	ids      identity.Resolver
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	interval time.Duration // replaces report_period when set (tests)
	now      func() time.Time

	mu     sync.Mutex
	cfg    probe.Config
	rt     probe.Runtime
	log    *slog.Logger
	objs   *oomObjects
	link   link.Link
	reader *bpfrt.Reader
	// victims are this period's OOM kills of observed processes, by tgid.
	victims  map[uint32]*victim
	warned   map[string]bool
	stopped  bool
	changed  chan struct{}
	lastTick time.Time
	load     map[string]*loadState // by full container id
	// reported are the containers of the last period, by full id: their
	// cgroup ids and OOM count, so that the kill that ends a container
	// (its last process OOM-killed) is still reported once.
	reported map[string]reportedContainer
}

type reportedContainer struct {
	cgroups []uint64
	ooms    uint64
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the OOM program with the daemon's BPF run-time
// statistics.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports a missing mark_victim hook through the
// daemon's reporter (once per daemon, not per restart).
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

func withInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// New returns a container probe reading the host under fsys and mapping
// processes to containers through ids.
func New(fsys procfs.FS, ids identity.Resolver, opts ...Option) *Probe {
	p := &Probe{fs: fsys, ids: ids, now: time.Now, changed: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	return []*table.Table{table.ContainerCpu, table.ContainerFs, table.ContainerMemory,
		table.ContainerNetwork, table.ContainerOom, table.ContainerStart, table.ContainerFile, ProcOom}
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.interval, cfg.Params)
}

// Start loads the OOM program (without it container_oom is not reported,
// logged once) and starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("container: started twice")
	}
	p.cfg, p.rt, p.log, p.warned = cfg, rt, rt.Logger(), map[string]bool{}
	p.missing = p.missing.OrNew(p.log)
	if err := p.loadOOM(); err != nil {
		p.closeOOM()
		_ = p.missing.Report(err, "container_oom (oom_events_total), proc_oom and its events")
	}
	if p.reader != nil {
		rt.Go(p.reader.Run)
	}
	rt.Go(p.run)
	return nil
}

func (p *Probe) loadOOM() error {
	if err := bpfrt.HaveTPBTF("mark_victim"); err != nil {
		return err
	}
	spec, err := loadOom()
	if err != nil {
		return &bpfrt.HookError{Hook: "tp_btf/mark_victim", Err: err}
	}
	var objs oomObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return &bpfrt.HookError{Hook: "tp_btf/mark_victim", Err: err}
	}
	p.objs = &objs
	l, err := link.AttachTracing(link.TracingOptions{Program: objs.MarkVictim, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		return &bpfrt.HookError{Hook: "tp_btf/mark_victim", Err: err}
	}
	p.link = l
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:   objs.Victims,
		Lost:   objs.LostEvents,
		Handle: p.handleVictim,
		OnLost: func(n uint64) { p.rt.Lost(n) },
		OnError: func(err error) {
			probe.LogError(p.rt, "container: bad oom_victim record", err)
		},
	})
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	p.stats.TryRegister(p.log, Name, map[string]*ebpf.Program{"mark_victim": objs.MarkVictim})
	return nil
}

func (p *Probe) closeOOM() {
	if p.stats != nil && p.objs != nil {
		p.stats.Unregister(Name)
	}
	if p.link != nil {
		_ = p.link.Close()
		p.link = nil
	}
	if p.reader != nil {
		_ = p.reader.Close()
		p.reader = nil
	}
	if p.objs != nil {
		_ = p.objs.Close()
		p.objs = nil
	}
}

// Reconfigure takes new parameters and targets; a new report_period
// re-arms the timer.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("container: not started")
	}
	old := p.cfg
	p.cfg = cfg
	if p.period(cfg) != p.period(old) {
		probe.Kick(p.changed)
	}
	return nil
}

// Stop releases the OOM program. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.closeOOM()
	return nil
}

func (p *Probe) run(ctx context.Context) error {
	p.mu.Lock()
	t := time.NewTicker(p.period(p.cfg))
	p.lastTick = p.now()
	p.mu.Unlock()
	defer t.Stop()
	lt := time.NewTicker(loadSample)
	defer lt.Stop()
	p.sampleLoad(p.now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-lt.C:
			p.sampleLoad(p.now())
		case <-p.changed:
			p.mu.Lock()
			t.Reset(p.period(p.cfg))
			p.mu.Unlock()
		case <-t.C:
			p.collect(p.now())
		}
	}
}

// warnOnce logs msg once per probe instance and key.
func (p *Probe) warnOnce(key, msg string, attrs ...any) {
	if p.warned[key] {
		return
	}
	p.warned[key] = true
	p.log.Warn(msg, attrs...)
}

// observedPIDs are the processes the snoopers select: the resolved set in
// whitelist mode, every process not excluded in blacklist mode.
func (p *Probe) observedPIDs() ([]int, error) {
	t := p.cfg.Targets
	if t == nil {
		return nil, nil
	}
	if t.Mode() == snoop.Whitelist {
		return t.PIDs(), nil
	}
	all, err := p.fs.PIDs()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, pid := range all {
		if t.Observed(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// containersOf maps the observed processes to their containers: container
// id -> its lowest observed pid.
func (p *Probe) containersOf(pids []int) map[string]int {
	out := map[string]int{}
	for _, pid := range pids {
		proc, ok := p.ids.Process(pid)
		if !ok || proc.ContainerID == "" || proc.Exited {
			continue
		}
		if cur, seen := out[proc.ContainerID]; !seen || pid < cur {
			out[proc.ContainerID] = pid
		}
	}
	return out
}

// oomCounts reads the kill counters keyed by cgroup ids.
func (p *Probe) oomCounts() (map[oomOomKey]uint64, error) {
	out := map[oomOomKey]uint64{}
	var k oomOomKey
	var v uint64
	it := p.objs.OomKills.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	return out, it.Err()
}

// collect publishes the rows of the period that ends at now.
func (p *Probe) collect(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	elapsed := now.Sub(p.lastTick)
	p.lastTick = now
	p.publishVictims(now, elapsed)
	pids, err := p.observedPIDs()
	if err != nil {
		p.rt.Error()
		p.warnOnce("pids", "container: cannot list processes", "err", err)
		return
	}
	conts := p.containersOf(pids)
	var ooms map[oomOomKey]uint64
	if p.objs != nil {
		if ooms, err = p.oomCounts(); err != nil {
			p.rt.Error()
			p.warnOnce("oommap", "container: cannot read the OOM kill counters", "err", err)
			ooms = nil
		}
	}
	// present are the containers still there: listed, and not found gone
	// when read (the identity cache may list a process that just exited).
	present := map[string]bool{}
	for id := range conts {
		present[id] = true
	}
	defer func() { p.reportGone(present, ooms, now, elapsed) }()
	if len(conts) == 0 {
		return
	}
	rd, err := newReader(p.fs)
	if err != nil {
		p.rt.Error()
		p.warnOnce("reader", "container: no cgroup statistics", "err", err)
		return
	}
	ids := make([]string, 0, len(conts))
	for id := range conts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s, err := rd.read(id, conts[id])
		if err != nil {
			if gone(err) {
				delete(present, id)
			} else {
				p.rt.Error()
				p.warnOnce("read."+id, "container: cannot read a container's cgroups", "container_id", id, "err", err)
			}
			continue
		}
		for fields, err := range s.unread {
			p.warnOnce("unread."+fields, "container: fields left unset", "fields", fields, "reason", err)
		}
		if s.hostNet {
			p.warnOnce("hostnet."+id, "container: no container_network row for a container in the host network namespace", "container_id", id)
		}
		if ooms != nil {
			n := oomsOf(ooms, s.cgroups)
			s.set("oom_events_total", float64(n))
			p.noteReported(id, reportedContainer{cgroups: s.cgroups, ooms: n})
		}
		if st := p.load[id]; st != nil {
			s.set("cpu_load_average_10s", st.avg)
		}
		p.publish(s, now, elapsed)
	}
}

func (p *Probe) noteReported(id string, c reportedContainer) {
	if p.reported == nil {
		p.reported = map[string]reportedContainer{}
	}
	p.reported[id] = c
}

// reportGone publishes a last container_oom row for a container reported
// in an earlier period that has no process now, when kills were counted in
// its cgroups since: the OOM kill of a container's last process (Kubernetes'
// OOMKilled) would otherwise never show. The container is then forgotten.
func (p *Probe) reportGone(live map[string]bool, ooms map[oomOomKey]uint64, now time.Time, period time.Duration) {
	for id, c := range p.reported {
		if live[id] {
			continue
		}
		delete(p.reported, id)
		if ooms == nil {
			continue
		}
		if n := oomsOf(ooms, c.cgroups); n > c.ooms {
			r := table.ContainerOom.NewRecord(now, period)
			r.SetStr(table.ContainerOom.MustIndex("container_id"), identity.ShortID(id))
			r.SetNum(table.ContainerOom.MustIndex("oom_events_total"), float64(n))
			p.rt.Record(r)
		}
	}
}

// oomsOf sums the kills of victims in one of the container's cgroups; an
// entry is counted once even when both of its ids are the container's.
func oomsOf(ooms map[oomOomKey]uint64, cgroups []uint64) uint64 {
	in := make(map[uint64]bool, len(cgroups))
	for _, c := range cgroups {
		in[c] = true
	}
	var n uint64
	for k, v := range ooms {
		if (k.MemcgId != 0 && in[k.MemcgId]) || (k.CgroupId != 0 && in[k.CgroupId]) {
			n += v
		}
	}
	return n
}

// publish turns a sample into one record per table that has at least one
// field read.
func (p *Probe) publish(s *sample, now time.Time, period time.Duration) {
	key := identity.ShortID(s.id)
	for _, t := range p.Tables() {
		r := t.NewRecord(now, period)
		n := 0
		for i, f := range t.Fields {
			if f.Kind == table.KindKey {
				r.SetStr(i, key)
				continue
			}
			if v, ok := s.values[f.Name]; ok {
				r.SetNum(i, v)
				n++
			}
		}
		if n > 0 {
			p.rt.Record(r)
		}
	}
}

// String describes the fields a sample lacks (for tests' messages).
func (s *sample) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s: %d values", s.id, len(s.values))
	for f, err := range s.unread {
		fmt.Fprintf(&b, "; %s unread: %v", f, err)
	}
	return b.String()
}
