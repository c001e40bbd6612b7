package ioprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "io"

var (
	bitTrace = probe.MustSubItemBit(Name, "io_trace")
	bitErr   = probe.MustSubItemBit(Name, "io_err")
	bitCount = probe.MustSubItemBit(Name, "io_count")
	bitPage  = probe.MustSubItemBit(Name, "page_cache")
)

// hook is one tp_btf attach point: the program, the sub-items it serves
// and what its absence disables.
type hook struct {
	prog    string
	target  string
	sub     uint32
	metrics []string
}

var hooks = []hook{
	{"io_rq_issue", "block_rq_issue", bitTrace | bitErr, []string{"io_latency driver and device stages", "io_err submitter"}},
	{"io_rq_requeue", "block_rq_requeue", bitTrace | bitErr, []string{"io_latency and io_err of requeued requests"}},
	{"io_rq_complete", "block_rq_complete", bitTrace | bitErr, []string{"io_latency", "io_err"}},
	{"io_bio_queue", "block_bio_queue", bitCount, []string{"io_count"}},
	{"io_dirty_buffer", "block_dirty_buffer", bitPage, []string{"io_pagecache mark_buffer_dirty"}},
	{"io_page_add", "mm_filemap_add_to_page_cache", bitPage, []string{"io_pagecache load_page_cache"}},
	{"io_page_dirty", "writeback_dirty_folio", bitPage, []string{"io_pagecache mark_page_dirty"}},
}

// errAccessPagecache is why access_pagecache is never reported: gala-gopher
// counts mark_page_accessed calls with a kprobe, and no tracepoint sits on
// that path.
var errAccessPagecache = &bpfrt.HookError{
	Hook: "kprobe/mark_page_accessed",
	Err:  errors.New("no tracepoint on mark_page_accessed and kprobes are not used; the field is omitted"),
}

// Probe is the io feature. See the package documentation.
type Probe struct {
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	sys      sysBlock
	interval time.Duration // replaces report_period when set (tests)
	maxDevs  uint32        // replaces the device maps' size when set (tests)
	now      func() time.Time

	mu        sync.Mutex
	cfg       probe.Config
	rt        probe.Runtime
	log       *slog.Logger
	coll      *ebpf.Collection
	links     bpfrt.Links
	reader    *bpfrt.Reader
	absent    map[string]bool
	kick      chan struct{}
	prev      map[Dev]counts // dev_counts at the previous report
	drops     uint64         // io_drops reported so far
	filter    map[Dev]bool   // devices params.dev_name selects; nil: all
	filterFor string         // the dev_name filter was resolved for
	filterErr string         // last resolution error logged
	stopOnce  probe.StopOnce

	// lat are the two per-disk latency maps: lat[active] is in
	// lat_active[0], the other is empty and waits for the next swap.
	lat    [2]*ebpf.Map
	active int

	failMu sync.Mutex // the reader goroutine adds, the report loop takes
	fails  *failures
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the probe's programs with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// WithHostPath roots /sys (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.sys = sysBlock{root: root} } }

// withInterval replaces report_period (tests use sub-second periods).
func withInterval(d time.Duration) Option { return func(p *Probe) { p.interval = d } }

// withMaxDevs replaces the size of the per-device maps (tests fill them).
func withMaxDevs(n uint32) Option { return func(p *Probe) { p.maxDevs = n } }

// New returns a stopped io probe.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	return []*table.Table{table.IoLatency, table.IoErr, table.IoCount, table.IoPagecache}
}

func (p *Probe) period(cfg probe.Config) time.Duration {
	return probe.ReportPeriod(p.interval, cfg.Params)
}

// Start loads the BPF object, attaches the hooks of the enabled sub-items
// and starts the ring buffer reader and the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("io: started twice")
	}
	p.log = rt.Logger()
	p.missing = p.missing.OrNew(p.log)
	if err := p.load(rt); err != nil {
		return errors.Join(err, p.closeLocked())
	}
	p.cfg, p.rt = cfg, rt
	p.fails = newFailures()
	p.prev = map[Dev]counts{}
	p.kick = make(chan struct{}, 1)
	if err := p.apply(cfg); err != nil {
		p.rt = nil
		return errors.Join(err, p.closeLocked())
	}
	p.stats.TryRegister(p.log, Name, p.coll.Programs)
	rt.Go(p.reader.Run)
	rt.Go(p.run)
	return nil
}

func (p *Probe) load(rt probe.Runtime) error {
	spec, err := loadIo()
	if err != nil {
		return fmt.Errorf("io: %w", err)
	}
	wake := bpfrt.Wakeup{Records: 64, RecordSize: recSize, FillPercent: 25}
	if err := bpfrt.ApplyWakeup(spec, "events", wake); err != nil {
		return fmt.Errorf("io: %w", err)
	}
	p.absent = map[string]bool{}
	for _, h := range hooks {
		if err := bpfrt.HaveTPBTF(h.target); err != nil {
			_ = p.missing.Report(err, h.metrics...)
			p.absent[h.prog] = true
			delete(spec.Programs, h.prog)
		}
	}
	if len(p.absent) == len(hooks) {
		return fmt.Errorf("io: no usable hook: %w", probe.ErrNotSupported)
	}
	inner := spec.Maps["lat_active"].InnerMap
	if p.maxDevs > 0 {
		inner.MaxEntries = p.maxDevs
		spec.Maps["dev_counts"].MaxEntries = p.maxDevs
	}
	p.coll, err = ebpf.NewCollection(spec)
	if err != nil {
		return fmt.Errorf("io: load: %w", err)
	}
	for i := range p.lat {
		if p.lat[i], err = ebpf.NewMap(inner); err != nil {
			return fmt.Errorf("io: latency map: %w", err)
		}
	}
	p.active = 0
	if err := p.coll.Maps["lat_active"].Put(uint32(0), p.lat[0]); err != nil {
		return fmt.Errorf("io: latency map: %w", err)
	}
	p.links = bpfrt.Links{}
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:    p.coll.Maps["events"],
		Wakeup:  wake,
		Lost:    p.coll.Maps[bpfrt.LostEventsMap],
		Handle:  p.handle,
		OnLost:  rt.Lost,
		OnError: func(err error) { probe.LogError(rt, "io: bad record", err) },
	})
	if err != nil {
		return fmt.Errorf("io: %w", err)
	}
	return nil
}

// apply makes the kernel side follow cfg: the device filter first (so no
// record of an unselected device is produced once hooks are on), then the
// run-time flags, then the links.
func (p *Probe) apply(cfg probe.Config) error {
	if err := p.syncFilter(cfg.Params.DevName); err != nil {
		return err
	}
	var flags uint32
	if cfg.Has(bitTrace) {
		flags |= uint32(ioIoFlagIO_TRACE_ON)
	}
	if cfg.Has(bitErr) {
		flags |= uint32(ioIoFlagIO_ERR_ON)
	}
	if err := p.coll.Variables["io_flags"].Set(flags); err != nil {
		return fmt.Errorf("io: set io_flags: %w", err)
	}
	if cfg.Has(bitPage) {
		_ = p.missing.Report(errAccessPagecache, "io_pagecache access_pagecache")
	}
	return p.syncLinks(cfg.SubItems)
}

// syncLinks attaches the hooks of the enabled sub-items and detaches the
// others.
func (p *Probe) syncLinks(sub uint32) error {
	for _, h := range hooks {
		detached, err := p.links.Set(h.prog, sub&h.sub != 0 && !p.absent[h.prog], func() (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: p.coll.Programs[h.prog], AttachType: ebpf.AttachTraceRawTp})
		})
		if err != nil {
			return fmt.Errorf("io: %w", err)
		}
		if detached && h.prog == "io_rq_issue" {
			if err := p.clearInflight(); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearInflight forgets the requests in flight once issues are no longer
// seen: their completions may not be seen either, and a stale entry would
// otherwise meet a later request at the same address.
func (p *Probe) clearInflight() error {
	m := p.coll.Maps["rq_inflight"]
	var key uint64
	var keys []uint64
	it := m.Iterate()
	var v []byte
	for it.Next(&key, &v) {
		keys = append(keys, key)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("io: clear rq_inflight: %w", err)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("io: clear rq_inflight: %w", err)
		}
	}
	return nil
}

// syncFilter makes dev_filter and dev_filter_on select the devices
// params.dev_name names. A name that resolves to nothing (yet) selects
// nothing; it is resolved again every period, so a disk that appears later
// is picked up.
func (p *Probe) syncFilter(name string) error {
	on := p.coll.Variables["dev_filter_on"]
	m := p.coll.Maps["dev_filter"]
	var want map[Dev]bool
	if name != "" {
		devs, err := p.sys.devices(name)
		if err != nil && err.Error() != p.filterErr {
			p.log.Warn("io: dev_name selects no device", "dev_name", name, "err", err)
		}
		p.filterErr = ""
		if err != nil {
			p.filterErr = err.Error()
		}
		want = map[Dev]bool{}
		for _, d := range devs {
			want[d] = true
		}
	}
	if name == p.filterFor && maps.Equal(want, p.filter) && (want == nil) == (p.filter == nil) {
		return nil
	}
	if want == nil {
		if err := on.Set(uint32(0)); err != nil {
			return fmt.Errorf("io: dev filter: %w", err)
		}
	}
	for d := range p.filter {
		if !want[d] {
			if err := m.Delete(d.kernel()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("io: dev filter: %w", err)
			}
		}
	}
	for d := range want {
		if err := m.Put(d.kernel(), uint8(1)); err != nil {
			return fmt.Errorf("io: dev filter: %w", err)
		}
	}
	if want != nil {
		if err := on.Set(uint32(1)); err != nil {
			return fmt.Errorf("io: dev filter: %w", err)
		}
	}
	p.filter, p.filterFor = want, name
	return nil
}

// Reconfigure applies new sub-items (attach/detach) and parameters
// (dev_name, report_period, thresholds) without reloading.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("io: not started")
	}
	if err := p.apply(cfg); err != nil {
		return err
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

// Stop detaches every hook and unloads the object. Idempotent.
func (p *Probe) Stop() error { return p.stopOnce.Do(&p.mu, p.closeLocked) }

func (p *Probe) closeLocked() error {
	var errs []error
	p.stats.Unregister(Name)
	errs = append(errs, p.links.Close())
	if p.reader != nil {
		errs = append(errs, p.reader.Close())
		p.reader = nil
	}
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	for i, m := range p.lat {
		if m != nil {
			errs = append(errs, m.Close())
			p.lat[i] = nil
		}
	}
	return errors.Join(errs...)
}

// handle takes one ring buffer record.
func (p *Probe) handle(raw []byte) error {
	r, err := DecodeFailure(raw)
	if err != nil {
		return err
	}
	p.failMu.Lock()
	p.fails.add(r)
	p.failMu.Unlock()
	return nil
}

// run ends a report period on every tick.
func (p *Probe) run(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, func() time.Duration { return p.period(p.cfg) }, func() {
		if err := p.report(p.now()); err != nil {
			probe.LogError(p.rt, "io: report failed", err)
		}
	})
	return nil
}

// readCounts sums dev_counts over CPUs.
func (p *Probe) readCounts() (map[Dev]counts, error) {
	out := map[Dev]counts{}
	var key uint32
	var per []ioIoCounts
	it := p.coll.Maps["dev_counts"].Iterate()
	for it.Next(&key, &per) {
		out[devOf(key)] = sumCPUs(per)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("io: read dev_counts: %w", err)
	}
	return out, nil
}

// swapLatency puts the empty latency map in place of the active one and
// returns what the active one held, emptied. The map-in-map update
// returns after an RCU grace period: no program still adds to the old map
// when it is read.
func (p *Probe) swapLatency() (map[Dev]latStats, error) {
	old, spare := p.lat[p.active], p.lat[1-p.active]
	if err := p.coll.Maps["lat_active"].Put(uint32(0), spare); err != nil {
		return nil, fmt.Errorf("io: swap latency maps: %w", err)
	}
	p.active = 1 - p.active
	out := map[Dev]latStats{}
	var key uint32
	var per []ioIoLat
	var keys []uint32
	it := old.Iterate()
	for it.Next(&key, &per) {
		out[devOf(key)] = mergeLat(per)
		keys = append(keys, key)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("io: read latency: %w", err)
	}
	for _, k := range keys {
		if err := old.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, fmt.Errorf("io: empty latency map: %w", err)
		}
	}
	return out, nil
}

// readDrops sums io_drops over CPUs and slots.
func (p *Probe) readDrops() (uint64, error) {
	var total uint64
	for i := uint32(0); i < uint32(ioIoDropIO_DROP_MAX); i++ {
		var per []uint64
		if err := p.coll.Maps["io_drops"].Lookup(i, &per); err != nil {
			return 0, fmt.Errorf("io: read io_drops: %w", err)
		}
		for _, n := range per {
			total += n
		}
	}
	return total, nil
}

// report ends one period: it publishes the rows of every device with
// activity in it and the events its thresholds raise.
func (p *Probe) report(now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return nil
	}
	cfg, period := p.cfg, p.period(p.cfg)
	if err := p.syncFilter(cfg.Params.DevName); err != nil {
		return err
	}
	p.failMu.Lock()
	fails := p.fails.take()
	p.failMu.Unlock()
	lat, err := p.swapLatency()
	if err != nil {
		return err
	}
	cur, err := p.readCounts()
	if err != nil {
		return err
	}
	if drops, err := p.readDrops(); err != nil {
		return err
	} else if drops > p.drops {
		p.rt.Lost(drops - p.drops)
		p.drops = drops
	}
	selected := func(d Dev) bool { return p.filter == nil || p.filter[d] }
	nameOf := map[Dev]names{}
	nm := func(d Dev) names {
		n, ok := nameOf[d]
		if !ok {
			n = p.sys.names(d)
			nameOf[d] = n
		}
		return n
	}
	for _, d := range sortedDevs(lat) {
		if !selected(d) || !cfg.Has(bitTrace) {
			continue
		}
		if r := latencyRecord(d, nm(d), lat[d], now, period); r != nil {
			p.rt.Record(r)
		}
		if cfg.Params.ReportEvent == 1 {
			if e := latencyEvent(d, nm(d), lat[d], cfg.Params, now); e != nil {
				p.rt.Event(*e)
			}
		}
	}
	for _, d := range sortedDevs(fails) {
		if !selected(d) || !cfg.Has(bitErr) {
			continue
		}
		if r := errRecord(d, nm(d), fails[d], now, period); r != nil {
			p.rt.Record(r)
		}
		if cfg.Params.ReportEvent == 1 {
			for _, e := range errorEvents(d, nm(d), fails[d], now) {
				p.rt.Event(e)
			}
		}
	}
	for _, d := range sortedDevs(cur) {
		delta := cur[d].sub(p.prev[d])
		if !selected(d) {
			continue
		}
		if cfg.Has(bitCount) {
			if r := countRecord(d, nm(d), delta, now, period); r != nil {
				p.rt.Record(r)
			}
		}
		if cfg.Has(bitPage) {
			if r := pagecacheRecord(d, nm(d), delta, now, period); r != nil {
				p.rt.Record(r)
			}
		}
	}
	p.prev = cur
	return nil
}

func sortedDevs[V any](m map[Dev]V) []Dev {
	out := make([]Dev, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Major != out[j].Major {
			return out[i].Major < out[j].Major
		}
		return out[i].Minor < out[j].Minor
	})
	return out
}
