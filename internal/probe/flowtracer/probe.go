package flowtracer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
)

// Name is the feature name.
const Name = "flowtracer"

// statsEvery is how often the option counters are read and closed
// connections swept (the probe has no table and no report period of its
// own).
const statsEvery = 5 * time.Second

// closedGrace is how long a closed connection keeps its origin: the tcp
// probe may first see a short connection in its close record, up to a
// report period after it closed.
const closedGrace = 5 * time.Minute

// Probe is the flowtracer feature. See the package documentation.
type Probe struct {
	origins *Origins
	stats   *bpfrt.Stats
	missing *bpfrt.MissingHooks

	mu       sync.Mutex
	rt       probe.Runtime
	log      *slog.Logger
	objs     flowtracerObjects
	loaded   bool
	link     link.Link
	lost     uint64 // FT_NO_ROOM + FT_FULL reported so far
	stopOnce probe.StopOnce
}

var _ probe.Probe = (*Probe)(nil)

// Option configures a Probe.
type Option func(*Probe)

// WithOrigins is the table the probe fills while it runs.
func WithOrigins(o *Origins) Option { return func(p *Probe) { p.origins = o } }

// WithStats registers the probe's program with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// New returns a stopped flowtracer probe.
func New(opts ...Option) *Probe {
	p := &Probe{}
	for _, o := range opts {
		o(p)
	}
	if p.origins == nil {
		p.origins = NewOrigins()
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Start loads the sock_ops program and attaches it at the cgroup2 root.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("flowtracer: started twice")
	}
	p.log = rt.Logger()
	p.missing = p.missing.OrNew(p.log)
	root, err := bpfrt.HaveCgroup2()
	if err != nil {
		_ = p.missing.Report(err, "flowtracer")
		return fmt.Errorf("flowtracer: %w: %w", err, probe.ErrNotSupported)
	}
	if err := loadFlowtracerObjects(&p.objs, nil); err != nil {
		return fmt.Errorf("flowtracer: load BPF object: %w", err)
	}
	p.loaded = true
	p.link, err = link.AttachCgroup(link.CgroupOptions{Path: root, Attach: ebpf.AttachCGroupSockOps, Program: p.objs.FlowtracerSockops})
	if err != nil {
		return errors.Join(fmt.Errorf("flowtracer: attach sock_ops at %s: %w", root, err), p.closeLocked())
	}
	p.origins.set(p.objs.Origins)
	p.rt = rt
	p.stats.TryRegister(p.log, Name, map[string]*ebpf.Program{"flowtracer_sockops": p.objs.FlowtracerSockops})
	rt.Go(p.run)
	return nil
}

// run reports SYNs that had no room for the option and origins the full
// table could not take as lost, and deletes the origins of connections
// closed closedGrace ago, until ctx ends.
func (p *Probe) run(ctx context.Context) error {
	probe.Every(ctx, nil, &p.mu, func() time.Duration { return statsEvery }, func() {
		if err := p.pollLost(); err != nil {
			probe.LogError(p.rt, "flowtracer: read counters", err)
		}
		if err := p.sweepClosed(closedGrace); err != nil {
			probe.LogError(p.rt, "flowtracer: sweep closed connections", err)
		}
	})
	return nil
}

// sweepClosed deletes the origins of connections closed more than grace
// ago.
func (p *Probe) sweepClosed(grace time.Duration) error {
	now, err := bpfrt.MonotonicNow()
	if err != nil || now <= uint64(grace) {
		return err
	}
	_, err = p.origins.sweep(now - uint64(grace))
	return err
}

// counter sums one ft_stats slot over CPUs.
func (p *Probe) counter(s flowtracerFtStat) (uint64, error) {
	var per []uint64
	if err := p.objs.FtStats.Lookup(uint32(s), &per); err != nil {
		return 0, fmt.Errorf("flowtracer: read ft_stats: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

func (p *Probe) pollLost() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		return nil
	}
	var n uint64
	for _, s := range []flowtracerFtStat{flowtracerFtStatFT_NO_ROOM, flowtracerFtStatFT_FULL} {
		c, err := p.counter(s)
		if err != nil {
			return err
		}
		n += c
	}
	if n > p.lost {
		p.rt.Lost(n - p.lost)
		p.lost = n
	}
	return nil
}

// Stop detaches the program, empties the shared table and unloads the
// object. Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	var errs []error
	p.origins.set(nil)
	p.stats.Unregister(Name)
	if p.link != nil {
		errs = append(errs, p.link.Close())
		p.link = nil
	}
	if p.loaded {
		errs = append(errs, p.objs.Close())
		p.loaded = false
	}
	return errors.Join(errs...)
}
