package hw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/periodic"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "hw"

// Entity is the event entity, as gala-gopher's hwprobe names it.
const Entity = "hw"

var (
	bitNIC = probe.MustSubItemBit(Name, "hw_nic")
	bitMem = probe.MustSubItemBit(Name, "hw_mem")
)

// Probe is the hw feature. See the package documentation.
type Probe struct {
	root     string // host root for /sys and /proc (GOPHER_HOST_PATH)
	stats    *bpfrt.Stats
	missing  *bpfrt.MissingHooks
	loopOpts []periodic.Option
	loop     *periodic.Loop

	mu       sync.Mutex
	started  bool
	coll     *ebpf.Collection
	links    []link.Link
	hostNS   uint32
	prevNIC  map[hwNicKey]uint64
	prevMC   map[hwMcKey]uint64
	drops    [2]uint64
	stopOnce probe.StopOnce
}

var (
	_ probe.Probe  = (*Probe)(nil)
	_ probe.Tables = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the probe's programs with the daemon's BPF run-time
// statistics while it runs.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithMissingHooks reports missing hooks through the daemon's reporter.
func WithMissingHooks(m *bpfrt.MissingHooks) Option { return func(p *Probe) { p.missing = m } }

// WithHostPath roots /sys and /proc (GOPHER_HOST_PATH).
func WithHostPath(root string) Option {
	return func(p *Probe) {
		if root != "" {
			p.root = root
		}
	}
}

// withInterval replaces report_period (tests use sub-second periods).
func withInterval(d time.Duration) Option {
	return func(p *Probe) { p.loopOpts = append(p.loopOpts, periodic.Interval(d)) }
}

// New returns a stopped hw probe.
func New(opts ...Option) *Probe {
	p := &Probe{root: "/"}
	for _, o := range opts {
		o(p)
	}
	p.loop = periodic.New(p.collect, p.loopOpts...)
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.NicFailure, table.MemMcEvent} }

// hook is one raw tracepoint: its program, the sub-item it serves and what
// its absence disables.
type hook struct {
	prog, target string
	sub          uint32
	disables     string
}

var hooks = []hook{
	{"hw_xmit_timeout", "net_dev_xmit_timeout", bitNIC, "nic_failure xmit_timeout_count and the nic_xmit_timeout event"},
	{"hw_mc_event", "mc_event", bitMem, "mem_mc_event"},
}

// Start loads the BPF object, attaches the hooks of the enabled sub-items
// and starts the report loop. hw_nic's carrier counters come from sysfs and
// work without BPF.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("hw: started twice")
	}
	if cfg.SubItems&(bitNIC|bitMem) == 0 {
		return errors.New("hw: no sub-item enabled (hw_nic, hw_mem)")
	}
	log := rt.Logger()
	p.prevNIC, p.prevMC = map[hwNicKey]uint64{}, map[hwMcKey]uint64{}
	p.missing = p.missing.OrNew(log)
	p.hostNS = netnsInode(p.root)
	if err := p.load(cfg, log); err != nil {
		p.closeLocked()
		if !cfg.Has(bitNIC) {
			return err // hw_mem has no source without BPF
		}
		log.Warn("hw: BPF unavailable: nic_failure has carrier counts only", "err", err)
	}
	if err := p.loop.Start(cfg, rt); err != nil {
		p.closeLocked()
		return fmt.Errorf("hw: %w", err)
	}
	p.started = true
	return nil
}

func (p *Probe) load(cfg probe.Config, log *slog.Logger) error {
	spec, err := loadHw()
	if err != nil {
		return fmt.Errorf("hw: %w", err)
	}
	var want []hook
	for _, h := range hooks {
		if !cfg.Has(h.sub) {
			delete(spec.Programs, h.prog)
			continue
		}
		if err := p.missing.Report(bpfrt.HaveRawTracepoint(h.target), h.disables); err != nil {
			delete(spec.Programs, h.prog)
			continue
		}
		want = append(want, h)
	}
	if len(want) == 0 {
		return fmt.Errorf("hw: no usable hook: %w", probe.ErrNotSupported)
	}
	if p.coll, err = ebpf.NewCollection(spec); err != nil {
		return fmt.Errorf("hw: load: %w", err)
	}
	for _, h := range want {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.target, Program: p.coll.Programs[h.prog]})
		if err != nil {
			return p.missing.Report(&bpfrt.HookError{Hook: "raw_tp/" + h.target, Err: err}, h.disables)
		}
		p.links = append(p.links, l)
	}
	p.stats.TryRegister(log, Name, p.coll.Programs)
	return nil
}

func (p *Probe) closeLocked() {
	_ = bpfrt.CloseLinks(p.links)
	p.links = nil
	if p.coll != nil {
		p.stats.Unregister(Name)
		p.coll.Close()
		p.coll = nil
	}
}

// Stop detaches and unloads. Idempotent.
func (p *Probe) Stop() error {
	return p.stopOnce.Do(&p.mu, func() error { p.closeLocked(); return nil })
}

// collect publishes the rows of the period c ends.
func (p *Probe) collect(c periodic.Cycle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.Config.Has(bitNIC) {
		p.carrierRows(c)
	}
	if p.coll == nil {
		return
	}
	p.countDrops(c.RT)
	if m := p.coll.Maps["xmit_timeouts"]; m != nil && c.Config.Has(bitNIC) && p.attached("hw_xmit_timeout") {
		p.xmitRows(c, m)
	}
	if m := p.coll.Maps["mc_errors"]; m != nil && c.Config.Has(bitMem) && p.attached("hw_mc_event") {
		p.mcRows(c, m)
	}
}

func (p *Probe) attached(prog string) bool { return p.coll.Programs[prog] != nil }

// countDrops reports events the full maps refused as lost.
func (p *Probe) countDrops(rt probe.Runtime) {
	m := p.coll.Maps["drops"]
	for i := range p.drops {
		var v uint64
		if err := m.Lookup(uint32(i), &v); err != nil {
			continue
		}
		if v > p.drops[i] {
			rt.Lost(v - p.drops[i])
			p.drops[i] = v
		}
	}
}

// carrierRows publishes one nic_failure row per interface of the host's
// network namespace with its sysfs carrier counters.
func (p *Probe) carrierRows(c periodic.Cycle) {
	carriers, err := readCarriers(p.root)
	if err != nil {
		c.RT.Error()
		c.WarnOnce("sysfs", "hw: cannot read carrier counters from sysfs", "dir", filepath.Join(p.root, "sys/class/net"), "err", err)
		return
	}
	t := table.NicFailure
	for _, cr := range carriers {
		r := t.NewRecord(c.Now, c.Period)
		r.SetStr(t.MustIndex("name"), cr.dev)
		r.SetStr(t.MustIndex("dev_name"), cr.dev)
		if cr.driver != "" {
			r.SetStr(t.MustIndex("driver"), cr.driver)
		}
		r.SetNum(t.MustIndex("carrier_up_count"), float64(cr.up))
		r.SetNum(t.MustIndex("carrier_down_count"), float64(cr.down))
		c.RT.Record(r)
	}
}

// growth reads a map of counts since load and returns the new snapshot
// with the keys that grew since prev, ordered by name.
func growth[K comparable](m *ebpf.Map, prev map[K]uint64, name func(K) string) (map[K]uint64, []K, error) {
	cur := map[K]uint64{}
	var k K
	var v uint64
	it := m.Iterate()
	for it.Next(&k, &v) {
		cur[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, nil, err
	}
	var keys []K
	for k, v := range cur {
		if v > prev[k] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return name(keys[i]) < name(keys[j]) })
	return cur, keys, nil
}

// xmitRows publishes one nic_failure row per device and TX queue that timed
// out during the period, and gala-gopher's nic_xmit_timeout event for it.
func (p *Probe) xmitRows(c periodic.Cycle, m *ebpf.Map) {
	name := func(k hwNicKey) string { return nicName(k, p.hostNS) }
	cur, keys, err := growth(m, p.prevNIC, name)
	if err != nil {
		c.RT.Error()
		c.WarnOnce("xmitmap", "hw: cannot read the xmit timeout counters", "err", err)
		return
	}
	t := table.NicFailure
	for _, k := range keys {
		dev, drv := cstr(k.Dev[:]), cstr(k.Driver[:])
		r := t.NewRecord(c.Now, c.Period)
		r.SetStr(t.MustIndex("name"), name(k))
		r.SetStr(t.MustIndex("dev_name"), dev)
		if drv != "" {
			r.SetStr(t.MustIndex("driver"), drv)
		}
		r.SetStr(t.MustIndex("queue_index"), strconv.Itoa(int(k.Queue)))
		r.SetNum(t.MustIndex("xmit_timeout_count"), float64(cur[k]-p.prevNIC[k]))
		c.RT.Record(r)
		e := event.New(c.Now, event.HWNicXmitTimeout, dev+"_"+drv, dev, drv, k.Queue)
		e.Device = dev
		c.RT.Event(e)
	}
	p.prevNIC = cur
}

// mcRows publishes one mem_mc_event row per error kind and location that
// had errors during the period.
func (p *Probe) mcRows(c periodic.Cycle, m *ebpf.Map) {
	cur, keys, err := growth(m, p.prevMC, mcName)
	if err != nil {
		c.RT.Error()
		c.WarnOnce("mcmap", "hw: cannot read the memory controller error counters", "err", err)
		return
	}
	for _, k := range keys {
		c.RT.Record(mcRecord(k, cur[k]-p.prevMC[k], c.Now, c.Period))
	}
	p.prevMC = cur
}

// mcRecord is one mem_mc_event row.
func mcRecord(k hwMcKey, n uint64, now time.Time, period time.Duration) *table.Record {
	t := table.MemMcEvent
	r := t.NewRecord(now, period)
	r.SetStr(t.MustIndex("name"), mcName(k))
	r.SetStr(t.MustIndex("err_type"), errTypeName(k.ErrType))
	r.SetStr(t.MustIndex("label"), cstr(k.Label[:]))
	r.SetStr(t.MustIndex("mc_index"), strconv.Itoa(int(k.McIndex)))
	r.SetStr(t.MustIndex("top_layer"), strconv.Itoa(int(k.TopLayer)))
	r.SetStr(t.MustIndex("mid_layer"), strconv.Itoa(int(k.MidLayer)))
	r.SetNum(t.MustIndex("error_count"), float64(n))
	return r
}

// errTypeName names enum hw_event_mc_err_type as gala-gopher prints it.
func errTypeName(t uint32) string {
	switch t {
	case 0:
		return "Corrected"
	case 1:
		return "Uncorrected"
	case 2:
		return "Deferred"
	case 3:
		return "Fatal"
	}
	return "Info"
}

// nicName is the row key of a device's TX queue: "<dev>:<queue>", with
// "@netns:<inode>" appended for a device outside the host's namespace
// (two containers' eth0 stay apart).
func nicName(k hwNicKey, hostNS uint32) string {
	s := cstr(k.Dev[:]) + ":" + strconv.Itoa(int(k.Queue))
	if k.Netns != 0 && k.Netns != hostNS {
		s += "@netns:" + strconv.FormatUint(uint64(k.Netns), 10)
	}
	return s
}

// mcName is the row key of one error kind at one location:
// "mc<index>:<top>:<mid>:<err_type>:<label>".
func mcName(k hwMcKey) string {
	return fmt.Sprintf("mc%d:%d:%d:%s:%s", k.McIndex, k.TopLayer, k.MidLayer, errTypeName(k.ErrType), cstr(k.Label[:]))
}

func cstr(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// netnsInode is the inode of the host's network namespace (pid 1's under
// root), 0 when unreadable.
func netnsInode(root string) uint32 {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "proc/1/ns/net"), &st); err != nil {
		return 0
	}
	return uint32(st.Ino)
}
