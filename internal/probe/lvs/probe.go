package lvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/periodic"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "lvs"

// connPath is the host's IPVS connection table: pid 1's network namespace
// under the root, so a containerised galago reads the host's, not its own.
const connPath = "/proc/1/net/ip_vs_conn"

// protoNumbers are the IP protocol numbers gala-gopher prints in the
// protocol key, by ip_vs_conn's protocol name.
var protoNumbers = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}

// Probe is the lvs feature. See the package documentation.
type Probe struct {
	fs       procfs.FS
	maxConns int // replaces maxConnLines when set (tests)
	loopOpts []periodic.Option
	loop     *periodic.Loop
}

var (
	_ probe.Probe  = (*Probe)(nil)
	_ probe.Tables = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

func withInterval(d time.Duration) Option {
	return func(p *Probe) { p.loopOpts = append(p.loopOpts, periodic.Interval(d)) }
}
func withMaxConns(n int) Option { return func(p *Probe) { p.maxConns = n } }

// New returns a stopped lvs probe reading the host under fsys.
func New(fsys procfs.FS, opts ...Option) *Probe {
	p := &Probe{fs: fsys, maxConns: maxConnLines}
	for _, o := range opts {
		o(p)
	}
	p.loop = periodic.New(p.collect, p.loopOpts...)
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table { return []*table.Table{table.IpvsLink} }

// Start fails with probe.ErrNotSupported, naming the file, when the
// kernel has no IPVS; otherwise it starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	path := p.fs.Path(connPath)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("lvs: this kernel has no IPVS (%s absent: CONFIG_IP_VS off or the ip_vs module not loaded): %w", path, probe.ErrNotSupported)
		}
		return fmt.Errorf("lvs: %w", err)
	}
	if err := p.loop.Start(cfg, rt); err != nil {
		return fmt.Errorf("lvs: %w", err)
	}
	return nil
}

// Stop is a no-op: nothing is held between periods. Idempotent.
func (p *Probe) Stop() error { return nil }

// linkKey is one ipvs_link row: the connections of one client to one
// virtual service served by one real server, over one protocol.
type linkKey struct {
	proto   int
	client  netip.Addr
	virtual netip.AddrPort
	server  netip.AddrPort
}

// collect reads the connection table and publishes one row per link.
func (p *Probe) collect(c periodic.Cycle) {
	f, err := os.Open(p.fs.Path(connPath))
	if err != nil {
		c.RT.Error()
		c.WarnOnce("open", "lvs: cannot read the IPVS connection table", "err", err)
		return
	}
	conns, dropped, err := parseConns(f, p.maxConns)
	f.Close()
	if err != nil {
		c.RT.Error()
		c.WarnOnce("parse", "lvs: cannot parse the IPVS connection table", "err", err)
		return
	}
	if dropped > 0 {
		c.RT.Lost(uint64(dropped))
		c.WarnOnce("bound", "lvs: connection table larger than the bound; the rest of each read is counted as lost", "bound", p.maxConns)
	}
	links, unknown := aggregate(conns)
	for _, u := range unknown {
		c.WarnOnce("proto."+u, "lvs: connections of an unknown protocol are not reported", "protocol", u)
	}
	keys := make([]linkKey, 0, len(links))
	for k := range links {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	for _, k := range keys {
		c.RT.Record(linkRecord(k, links[k], c.Now, c.Period))
	}
}

// aggregate counts the live connections per link: persistence templates
// and entries in state CLOSE (a connection that ended, kept a few seconds)
// are not links. unknown lists protocol names it cannot number.
func aggregate(conns []conn) (map[linkKey]int, []string) {
	out := map[linkKey]int{}
	var unknown []string
	for _, c := range conns {
		if c.template() || c.state == "CLOSE" {
			continue
		}
		n, ok := protoNumbers[c.proto]
		if !ok {
			unknown = append(unknown, c.proto)
			continue
		}
		out[linkKey{proto: n, client: c.client.Addr(), virtual: c.virtual, server: c.server}]++
	}
	return out, unknown
}

func keyLess(a, b linkKey) bool {
	if a.proto != b.proto {
		return a.proto < b.proto
	}
	if c := a.client.Compare(b.client); c != 0 {
		return c < 0
	}
	if c := a.virtual.Compare(b.virtual); c != 0 {
		return c < 0
	}
	return a.server.Compare(b.server) < 0
}

// linkRecord is one ipvs_link row. client_port, local_ip and local_port
// stay unset: connections are counted over client ports, and mainline
// IPVS has no local (FULLNAT) address.
func linkRecord(k linkKey, n int, now time.Time, period time.Duration) *table.Record {
	t := table.IpvsLink
	r := t.NewRecord(now, period)
	r.SetStr(t.MustIndex("process_name"), "ipvs")
	r.SetStr(t.MustIndex("client_ip"), k.client.String())
	r.SetStr(t.MustIndex("virtual_ip"), k.virtual.Addr().String())
	r.SetStr(t.MustIndex("virtual_port"), strconv.Itoa(int(k.virtual.Port())))
	r.SetStr(t.MustIndex("server_ip"), k.server.Addr().String())
	r.SetStr(t.MustIndex("server_port"), strconv.Itoa(int(k.server.Port())))
	r.SetStr(t.MustIndex("protocol"), strconv.Itoa(k.proto))
	r.SetNum(t.MustIndex("link_count"), float64(n))
	return r
}
