package nginx

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/table"
)

// rowKey is one nginx_link row: links from one client address and port
// (as gala-gopher's statistics key: a row per client connection) through
// one listening address to one upstream server, L7 (http) or L4 (stream).
// clientPort 0: the period's rows were folded per client address.
type rowKey struct {
	client          netip.Addr
	clientPort      uint16
	virtual, server netip.AddrPort
	l7              bool
}

// maxConns bounds the open client connections followed; links of
// connections beyond are counted as lost.
const maxConns = 65536

// maxPortRows bounds the rows of a period: clients' ports are ephemeral,
// so rows are per connection; a period with more links than this is
// reported per client address (client_port not set), every link still
// counted.
const maxPortRows = 1024

// links follows the proxied client connections and counts, per period,
// those that were open at some time in it: a client connection counts
// once per upstream server it was linked to.
type links struct {
	max int // maxConns; smaller in tests
	// maxRows is maxPortRows; smaller in tests.
	maxRows int
	open    map[connID]map[rowKey]struct{}
	// closed are the links of the connections that closed in the period.
	closed map[rowKey]uint64
}

func newLinks() *links {
	return &links{max: maxConns, maxRows: maxPortRows, open: map[connID]map[rowKey]struct{}{}, closed: map[rowKey]uint64{}}
}

// add applies a link event; false when the bound dropped it.
func (l *links) add(e *event) bool {
	set := l.open[e.id]
	if set == nil {
		if len(l.open) >= l.max {
			return false
		}
		set = map[rowKey]struct{}{}
		l.open[e.id] = set
	}
	set[rowKey{client: e.client.Addr(), clientPort: e.client.Port(), virtual: e.virtual, server: e.server, l7: e.l7}] = struct{}{}
	return true
}

// close ends a client connection's links (unknown ids are ignored: a
// connection linked before the probe started).
func (l *links) close(id connID) {
	for k := range l.open[id] {
		l.closed[k]++
	}
	delete(l.open, id)
}

// forget ends the connections of processes that are gone (they closed
// without nginx's ngx_close_connection: killed, or crashed).
func (l *links) forget(alive func(tgid uint32) bool) {
	for id := range l.open {
		if !alive(id.tgid) {
			l.close(id)
		}
	}
}

// flush returns the period's link counts and starts a new period: the
// open connections count again in the next. folded says the period had
// more than maxRows rows and they were summed per client address.
func (l *links) flush() (rows map[rowKey]uint64, folded bool) {
	out := l.closed
	for _, set := range l.open {
		for k := range set {
			out[k]++
		}
	}
	l.closed = map[rowKey]uint64{}
	if len(out) <= l.maxRows {
		return out, false
	}
	byAddr := make(map[rowKey]uint64, l.maxRows)
	for k, n := range out {
		k.clientPort = 0
		byAddr[k] += n
	}
	return byAddr, true
}

// record is a row's nginx_link record.
func record(k rowKey, n uint64, end time.Time, period time.Duration) *table.Record {
	t := table.NginxLink
	rec := t.NewRecord(end, period)
	rec.SetStr(t.MustIndex("client_ip"), k.client.String())
	if k.clientPort != 0 {
		rec.SetStr(t.MustIndex("client_port"), strconv.Itoa(int(k.clientPort)))
	}
	rec.SetStr(t.MustIndex("virtual_ip"), k.virtual.Addr().String())
	rec.SetStr(t.MustIndex("virtual_port"), strconv.Itoa(int(k.virtual.Port())))
	rec.SetStr(t.MustIndex("server_ip"), k.server.Addr().String())
	rec.SetStr(t.MustIndex("server_port"), strconv.Itoa(int(k.server.Port())))
	l7 := "0"
	if k.l7 {
		l7 = "1"
	}
	rec.SetStr(t.MustIndex("is_l7"), l7)
	rec.SetNum(t.MustIndex("link_count"), float64(n))
	return rec
}
