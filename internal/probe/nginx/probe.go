package nginx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature's name.
const Name = "nginx"

// scanInterval is how often running nginx processes are looked for.
const scanInterval = 2 * time.Second

// hooks are the functions probed: the symbol, its entry program and its
// return program ("" for none).
var hooks = []struct{ sym, enter, ret string }{
	{"ngx_event_connect_peer", "ngx_event_connect_peer", "ngx_event_connect_peer_ret"},
	{"ngx_close_connection", "ngx_close_connection", ""},
	{"ngx_http_upstream_init", "ngx_http_upstream_init", "ngx_http_upstream_init_ret"},
	{"ngx_stream_core_run_phases", "ngx_stream_core_run_phases", "ngx_stream_core_run_phases_ret"},
}

// skipWhy says what a skips counter means, for the log.
var skipWhy = [...]string{
	nginxNginxSkipNGINX_SKIP_LAYOUT:   "a request's or session's signature did not match: this nginx's structures are not laid out as read, its links are not counted",
	nginxNginxSkipNGINX_SKIP_NOT_TCP:  "links of UDP or unix-socket proxying are not reported",
	nginxNginxSkipNGINX_SKIP_NO_SOCK:  "an upstream or client connection's socket could not be read",
	nginxNginxSkipNGINX_SKIP_MAP_FULL: "a BPF map was full: links were lost",
}

// Probe is the nginx feature. See the package documentation.
type Probe struct {
	stats    *bpfrt.Stats
	hostPath string
	// reportEvery, when set, replaces report_period (tests).
	reportEvery time.Duration
	// onFlush, when set, sees each period's rows (tests).
	onFlush func(map[rowKey]uint64)
	now     func() time.Time

	mu     sync.Mutex
	cfg    probe.Config
	rt     probe.Runtime
	coll   *ebpf.Collection
	reader *bpfrt.Reader
	files  map[fileID]*attached
	elf    *fileID // params.elf_path's file, when set
	links  *links
	// foldLogged: the first period folded per client address was logged.
	foldLogged bool
	skips      [nginxNginxSkipNGINX_SKIP_MAX]uint64
	kick       chan struct{}
	stopped    bool
}

// attached is one ELF file's uprobes.
type attached struct {
	path  string
	links []link.Link
	funcs []string
}

var (
	_ probe.Probe        = (*Probe)(nil)
	_ probe.Reconfigurer = (*Probe)(nil)
	_ probe.Tables       = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

// WithStats registers the BPF programs' run-time statistics.
func WithStats(s *bpfrt.Stats) Option { return func(p *Probe) { p.stats = s } }

// WithHostPath roots /proc (GOPHER_HOST_PATH).
func WithHostPath(root string) Option { return func(p *Probe) { p.hostPath = root } }

// New returns the nginx feature.
func New(opts ...Option) *Probe {
	p := &Probe{now: time.Now, kick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.NginxLink} }

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}

// Start loads the BPF object, attaches to elf_path when set, and starts
// the ring reader, the scan for nginx processes and the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt != nil {
		return errors.New("nginx: started twice")
	}
	if path := cfg.Params.ElfPath; path != "" {
		if err := checkExe(path); err != nil {
			return fmt.Errorf("nginx: elf_path %s: %w", path, err)
		}
	}
	spec, err := loadNginx()
	if err != nil {
		return fmt.Errorf("nginx: %w", err)
	}
	if p.coll, err = ebpf.NewCollection(spec); err != nil {
		return fmt.Errorf("nginx: load: %w", err)
	}
	p.files = map[fileID]*attached{}
	p.links = newLinks()
	p.skips = [len(p.skips)]uint64{}
	p.stopped = false
	p.rt, p.cfg = rt, cfg
	if cfg.Params.ElfPath != "" {
		if err := p.attachElfLocked(cfg.Params.ElfPath); err != nil {
			p.rt = nil
			return errors.Join(err, p.closeLocked())
		}
	}
	p.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:   p.coll.Maps["events"],
		Lost:   p.coll.Maps[bpfrt.LostEventsMap],
		Handle: p.handle,
		OnLost: rt.Lost,
		OnError: func(err error) {
			probe.LogError(rt, "nginx: bad record", err)
		},
	})
	if err != nil {
		p.rt = nil
		return errors.Join(fmt.Errorf("nginx: %w", err), p.closeLocked())
	}
	p.stats.TryRegister(rt.Logger(), Name, p.coll.Programs)
	rt.Logger().Info("nginx: links are counted per client address, virtual and server; client_port is not set " +
		"(clients' ephemeral ports would make a row per connection); UDP stream proxying and unix-socket upstreams are not observed")
	rt.Go(p.reader.Run)
	rt.Go(p.scanLoop)
	rt.Go(p.loop)
	return nil
}

// attachElfLocked attaches to the nginx binary at path (params.elf_path),
// which must have ngx_event_connect_peer.
func (p *Probe) attachElfLocked(path string) error {
	id, err := statID(path)
	if err == nil {
		err = checkExe(path)
	}
	if err != nil {
		return fmt.Errorf("nginx: elf_path %s: %w", path, err)
	}
	if a := p.files[id]; a == nil || len(a.funcs) == 0 {
		if err := p.attachLocked(path, id); err != nil {
			return fmt.Errorf("nginx: elf_path %s: %w", path, err)
		}
	}
	p.elf = &id
	return nil
}

// attachLocked attaches every hook whose symbol the file at path has.
func (p *Probe) attachLocked(path string, id fileID) error {
	offs, err := hookOffsets(path)
	if err != nil {
		return err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return err
	}
	a := &attached{path: path}
	for _, h := range hooks {
		off, ok := offs[h.sym]
		if !ok {
			continue
		}
		// The address given: cilium/ebpf never reads the file's symbols.
		opts := &link.UprobeOptions{Address: off}
		l, err := ex.Uprobe(h.sym, p.coll.Programs[h.enter], opts)
		if err != nil {
			_ = bpfrt.CloseLinks(a.links)
			return fmt.Errorf("uprobe %s: %w", h.sym, err)
		}
		a.links = append(a.links, l)
		if h.ret != "" {
			r, err := ex.Uretprobe(h.sym, p.coll.Programs[h.ret], opts)
			if err != nil {
				_ = bpfrt.CloseLinks(a.links)
				return fmt.Errorf("uretprobe %s: %w", h.sym, err)
			}
			a.links = append(a.links, r)
		}
		a.funcs = append(a.funcs, h.sym)
	}
	p.files[id] = a
	if len(a.funcs) > 0 {
		p.rt.Logger().Info("nginx: uprobes attached", "file", path, "functions", a.funcs)
	}
	return nil
}

// Reconfigure applies new parameters: report_period, and elf_path, which
// must name an nginx binary (else nothing changes).
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return errors.New("nginx: not started")
	}
	if cfg.Params.ElfPath != p.cfg.Params.ElfPath {
		if cfg.Params.ElfPath == "" {
			p.elf = nil
		} else if err := p.attachElfLocked(cfg.Params.ElfPath); err != nil {
			return err
		}
	}
	p.cfg = cfg
	probe.Kick(p.kick)
	return nil
}

// Stop detaches, closes the reader and the BPF object. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeLocked()
}

func (p *Probe) closeLocked() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	for _, a := range p.files {
		_ = bpfrt.CloseLinks(a.links)
	}
	p.files = nil
	var errs []error
	if p.reader != nil {
		errs = append(errs, p.reader.Close())
		p.reader = nil
	}
	p.stats.Unregister(Name)
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	p.rt = nil
	return errors.Join(errs...)
}

// scanLoop attaches to the nginx processes' executables and modules as
// they appear.
func (p *Probe) scanLoop(ctx context.Context) error {
	t := time.NewTicker(scanInterval)
	defer t.Stop()
	for {
		p.scan()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Probe) scan() {
	p.mu.Lock()
	elf, root := p.elf, p.root()
	p.mu.Unlock()
	procs := findNginx(root, elf)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return
	}
	for _, np := range procs {
		p.attachFileLocked(inRoot(root, np.pid, np.exe), true)
		for _, m := range np.modules {
			p.attachFileLocked(inRoot(root, np.pid, m), false)
		}
	}
}

// attachFileLocked attaches to a file found in a process once; a file
// that cannot be attached is said once and not tried again.
func (p *Probe) attachFileLocked(path string, exe bool) {
	id, err := statID(path)
	if err != nil {
		return // the process exited
	}
	if _, done := p.files[id]; done {
		return
	}
	if exe {
		err = checkExe(path)
	}
	if err == nil {
		err = p.attachLocked(path, id)
	}
	if err != nil {
		p.rt.Logger().Warn("nginx: not observed", "file", path, "err", err)
		p.files[id] = &attached{path: path}
	}
}

func (p *Probe) handle(raw []byte) error {
	e, err := decode(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rt == nil {
		return nil
	}
	switch e.kind {
	case nginxNginxEvKindNGINX_EV_LINK:
		if !p.links.add(&e) {
			p.rt.Lost(1)
		}
	case nginxNginxEvKindNGINX_EV_CLOSE:
		p.links.close(e.id)
	}
	return nil
}

func (p *Probe) period() time.Duration { return probe.ReportPeriod(p.reportEvery, p.cfg.Params) }

func (p *Probe) loop(ctx context.Context) error {
	probe.Every(ctx, p.kick, &p.mu, p.period, p.report)
	return nil
}

// report publishes the period's links.
func (p *Probe) report() {
	p.mu.Lock()
	if p.rt == nil {
		p.mu.Unlock()
		return
	}
	now, period, rt, root := p.now(), p.period(), p.rt, p.root()
	p.pollSkipsLocked()
	alive := map[uint32]bool{}
	p.links.forget(func(tgid uint32) bool {
		ok, seen := alive[tgid]
		if !seen {
			_, err := os.Stat(filepath.Join(root, "proc", strconv.FormatUint(uint64(tgid), 10)))
			ok = err == nil
			alive[tgid] = ok
		}
		return ok
	})
	rows, folded := p.links.flush()
	if folded && !p.foldLogged {
		p.foldLogged = true
		rt.Logger().Warn("nginx: more links in a period than rows per client connection allowed: reported per client address, client_port not set (logged once)",
			"max_rows", p.links.maxRows)
	}
	p.mu.Unlock()
	if p.onFlush != nil {
		p.onFlush(rows)
	}
	for k, n := range rows {
		rt.Record(record(k, n, now, period))
	}
}

// pollSkipsLocked reads the skips counters: a full map's losses are
// counted as lost events, the first skip of each other reason is logged.
func (p *Probe) pollSkipsLocked() {
	m := p.coll.Maps["skips"]
	for why := range p.skips {
		var per []uint64
		if err := m.Lookup(uint32(why), &per); err != nil {
			continue
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		if n <= p.skips[why] {
			continue
		}
		if nginxNginxSkip(why) == nginxNginxSkipNGINX_SKIP_MAP_FULL {
			p.rt.Lost(n - p.skips[why])
		} else if p.skips[why] == 0 {
			p.rt.Logger().Warn("nginx: "+skipWhy[why], "count", n)
		}
		p.skips[why] = n
	}
}

// openConns is how many linked client connections to one of the
// virtual ports are open (tests: other nginx processes may run).
func (p *Probe) openConns(ports map[uint16]bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, set := range p.links.open {
		for k := range set {
			if ports[k.virtual.Port()] {
				n++
				break
			}
		}
	}
	return n
}

// attachedFuncs lists the functions attached in every file (tests).
func (p *Probe) attachedFuncs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for _, a := range p.files {
		for _, f := range a.funcs {
			out[f] = true
		}
	}
	return out
}

// closedLinks is how many links of closed connections to one of the
// virtual ports wait for the next report (tests).
func (p *Probe) closedLinks(ports map[uint16]bool) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for k, c := range p.links.closed {
		if ports[k.virtual.Port()] {
			n += c
		}
	}
	return n
}
