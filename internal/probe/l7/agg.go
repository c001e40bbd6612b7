package l7

import (
	"maps"
	"net/netip"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// latencyBounds are gala-gopher's l7 latency buckets (10, 50, 100, 500,
// 1000, 3000, 10000 ms), in ns as its values are.
var latencyBounds = []float64{10e6, 50e6, 100e6, 500e6, 1000e6, 3000e6, 10000e6}

// l4Role values of the l4_role key.
const (
	l4TCPClient uint8 = iota
	l4TCPServer
	l4UDP
)

var l4RoleNames = [...]string{l4TCPClient: "tcp_client", l4TCPServer: "tcp_server", l4UDP: "udp"}

// rowKey is one l7_link / l7_rpc row: gala-gopher's keys and the ssl label.
type rowKey struct {
	tgid       uint32
	clientIP   netip.Addr
	serverIP   netip.Addr
	serverPort uint16
	l4Role     uint8
	l7Role     l7.Role
	proto      l7.Protocol
	ssl        bool
}

// apiKey is one l7_rpc_api row.
type apiKey struct {
	rowKey
	api string
}

// serviceKey is what the distinct-API cap counts per: one process's side
// of one service.
type serviceKey struct {
	tgid       uint32
	serverIP   netip.Addr
	serverPort uint16
	proto      l7.Protocol
	l7Role     l7.Role
}

type linkAgg struct {
	bytesSent, bytesRecv, segsSent, segsRecv uint64
	last                                     uint64 // the newest data's CLOCK_MONOTONIC time (ns)
}

type rpcAgg struct {
	req, resp, errs, clientErrs, serverErrs uint64
	latSum                                  uint64
	lat                                     *table.Histogram
}

func (r *rpcAgg) add(e *l7.Exchange) {
	if e.HasRequest {
		r.req++
	}
	if !e.HasResponse {
		return
	}
	r.resp++
	if e.HasRequest && e.End >= e.Start {
		lat := e.End - e.Start
		if r.lat == nil {
			r.lat = table.NewHistogram(latencyBounds)
		}
		r.lat.Observe(float64(lat))
		r.latSum += lat
	}
	switch e.Class {
	case l7.ClientError:
		r.errs++
		r.clientErrs++
	case l7.ServerError:
		r.errs++
		r.serverErrs++
	}
}

// OverflowAPI is the api of a service's requests beyond its MaxAPIs
// distinct templates.
const OverflowAPI = "__overflow__"

// DefaultMaxAPIs is the distinct api values kept per service.
const DefaultMaxAPIs = 256

// aggregator holds one period's rows. Not safe for concurrent use.
type aggregator struct {
	gen     uint64 // bumped at every flush: cached row pointers are stale
	links   map[rowKey]*linkAgg
	rpcs    map[rowKey]*rpcAgg
	apis    map[apiKey]*rpcAgg
	seen    map[serviceKey]map[string]struct{}
	maxAPIs int
	// overflowed counts requests folded into OverflowAPI since the start.
	overflowed uint64
	// holdback decides on the rows of processes not observed (see flush).
	holdback snoop.Holdback
	// onExchange, when set, also sees every exchange of a connection.
	onExchange func(c *conn, e *l7.Exchange)
	// lT, rT, aT are the link, rpc and api tables (the feature's); lT nil:
	// no link table.
	lT, rT, aT *table.Table
}

func newAggregator() *aggregator {
	return &aggregator{
		lT: table.L7Link, rT: table.L7Rpc, aT: table.L7RpcApi,
		links: map[rowKey]*linkAgg{}, rpcs: map[rowKey]*rpcAgg{}, apis: map[apiKey]*rpcAgg{},
		seen: map[serviceKey]map[string]struct{}{}, maxAPIs: DefaultMaxAPIs,
	}
}

func (a *aggregator) link(k rowKey) *linkAgg {
	l := a.links[k]
	if l == nil {
		l = &linkAgg{}
		a.links[k] = l
	}
	return l
}

func (a *aggregator) rpc(k rowKey) *rpcAgg {
	r := a.rpcs[k]
	if r == nil {
		r = &rpcAgg{}
		a.rpcs[k] = r
	}
	return r
}

// api returns the row of api for k, folding a service's values beyond
// maxAPIs into OverflowAPI.
func (a *aggregator) api(k rowKey, api string) *rpcAgg {
	if api == "" {
		return nil
	}
	ak := apiKey{k, api}
	if r := a.apis[ak]; r != nil {
		return r
	}
	sk := serviceKey{k.tgid, k.serverIP, k.serverPort, k.proto, k.l7Role}
	set := a.seen[sk]
	if set == nil {
		set = map[string]struct{}{}
		a.seen[sk] = set
	}
	if _, ok := set[api]; !ok {
		if len(set) >= a.maxAPIs {
			a.overflowed++
			ak.api = OverflowAPI
		} else {
			set[api] = struct{}{}
		}
	}
	r := a.apis[ak]
	if r == nil {
		r = &rpcAgg{}
		a.apis[ak] = r
	}
	return r
}

// exchange adds one exchange of the connection row k; c (may be nil)
// caches the connection's last api row, since a connection mostly repeats
// its requests.
func (a *aggregator) exchange(k rowKey, rpc *rpcAgg, e *l7.Exchange, c *conn) {
	rpc.add(e)
	if a.onExchange != nil && c != nil {
		a.onExchange(c, e)
	}
	if e.API == "" {
		return
	}
	if c != nil && c.apiGen == a.gen && c.apiRow != nil && c.api == e.API {
		c.apiRow.add(e)
		return
	}
	if r := a.api(k, e.API); r != nil {
		r.add(e)
		if c != nil {
			c.api, c.apiRow, c.apiGen = e.API, r, a.gen
		}
	}
}

func setKeys(t *table.Table, r *table.Record, k rowKey) {
	r.SetStr(t.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
	r.SetStr(t.MustIndex("client_ip"), k.clientIP.String())
	r.SetStr(t.MustIndex("server_ip"), k.serverIP.String())
	r.SetStr(t.MustIndex("server_port"), strconv.Itoa(int(k.serverPort)))
	r.SetStr(t.MustIndex("l4_role"), l4RoleNames[k.l4Role])
	r.SetStr(t.MustIndex("l7_role"), k.l7Role.String())
	r.SetStr(t.MustIndex("protocol"), k.proto.String())
	ssl := "no_ssl"
	if k.ssl {
		ssl = "ssl"
	}
	r.SetStr(t.MustIndex("ssl"), ssl)
}

func setRPC(t *table.Table, r *table.Record, g *rpcAgg, period time.Duration, perAPI bool) {
	secs := period.Seconds()
	r.SetNum(t.MustIndex("throughput_req"), float64(g.req)/secs)
	r.SetNum(t.MustIndex("throughput_resp"), float64(g.resp)/secs)
	r.SetNum(t.MustIndex("req_count"), float64(g.req))
	r.SetNum(t.MustIndex("resp_count"), float64(g.resp))
	r.SetNum(t.MustIndex("err_count"), float64(g.errs))
	if g.lat != nil && g.lat.Count() > 0 {
		r.SetHist(t.MustIndex("latency"), g.lat)
		r.SetNum(t.MustIndex("latency_sum"), float64(g.latSum))
		r.SetNum(t.MustIndex("latency_avg"), float64(g.latSum)/float64(g.lat.Count()))
	}
	if g.resp > 0 {
		r.SetNum(t.MustIndex("err_ratio"), 100*float64(g.errs)/float64(g.resp))
	}
	if perAPI {
		r.SetNum(t.MustIndex("client_err_count"), float64(g.clientErrs))
		r.SetNum(t.MustIndex("server_err_count"), float64(g.serverErrs))
		if g.resp > 0 {
			r.SetNum(t.MustIndex("client_err_ratio"), 100*float64(g.clientErrs)/float64(g.resp))
			r.SetNum(t.MustIndex("server_err_ratio"), 100*float64(g.serverErrs)/float64(g.resp))
		}
	}
}

// flush renders the period's rows of observed processes and starts a new
// period. bytes and rpc say which sub-items are on. The rows of a process
// the snoopers do not observe are dropped, or held for the next flush
// while they are not settled (snoop.Holdback, asked with the newest data
// of the process); dropped counts the requests in rows the holdback
// expired (at least one for rows of bytes only), lost.
func (a *aggregator) flush(end time.Time, period time.Duration, bytes, rpc bool, targets snoop.Targets) (out []*table.Record, dropped uint64) {
	gate := a.holdback.Begin(targets)
	for k, l := range a.links {
		gate.Note(k.tgid, l.last)
	}
	observed := func(tgid uint32) bool { return gate.Verdict(tgid) == snoop.Report }
	lT, rT, aT := a.lT, a.rT, a.aT
	if bytes && lT != nil {
		for k, l := range a.links {
			if !observed(k.tgid) {
				continue
			}
			r := lT.NewRecord(end, period)
			setKeys(lT, r, k)
			r.SetNum(lT.MustIndex("bytes_sent"), float64(l.bytesSent))
			r.SetNum(lT.MustIndex("bytes_recv"), float64(l.bytesRecv))
			r.SetNum(lT.MustIndex("segs_sent"), float64(l.segsSent))
			r.SetNum(lT.MustIndex("segs_recv"), float64(l.segsRecv))
			out = append(out, r)
		}
	}
	if rpc {
		for k, g := range a.rpcs {
			if !observed(k.tgid) || (g.req == 0 && g.resp == 0) {
				continue
			}
			r := rT.NewRecord(end, period)
			setKeys(rT, r, k)
			setRPC(rT, r, g, period, false)
			out = append(out, r)
		}
		for k, g := range a.apis {
			if !observed(k.tgid) || (g.req == 0 && g.resp == 0) {
				continue
			}
			r := aT.NewRecord(end, period)
			setKeys(aT, r, k.rowKey)
			r.SetStr(aT.MustIndex("api"), k.api)
			setRPC(aT, r, g, period, true)
			out = append(out, r)
		}
	}
	for k, l := range a.links {
		if gate.Verdict(k.tgid) == snoop.Expire {
			dropped += requestsIn(l, a.rpcs[k])
		}
	}
	a.holdback.End()
	a.gen++
	if !a.holdback.Holding() {
		clear(a.links)
		clear(a.rpcs)
		clear(a.apis)
		return out, dropped
	}
	held := func(tgid uint32) bool { return gate.Verdict(tgid) == snoop.Hold }
	maps.DeleteFunc(a.links, func(k rowKey, _ *linkAgg) bool { return !held(k.tgid) })
	maps.DeleteFunc(a.rpcs, func(k rowKey, _ *rpcAgg) bool { return !held(k.tgid) })
	maps.DeleteFunc(a.apis, func(k apiKey, _ *rpcAgg) bool { return !held(k.tgid) })
	return out, dropped
}

// requestsIn is what a dropped row counts as lost: its requests (or
// responses without a request), at least one for a row of bytes only.
func requestsIn(l *linkAgg, r *rpcAgg) uint64 {
	var n uint64
	if r != nil {
		n = max(r.req, r.resp)
	}
	if n == 0 && (l.segsSent > 0 || l.segsRecv > 0) {
		n = 1
	}
	return n
}

// conn is one traced connection.
type conn struct {
	info   syscap.Conn
	parser l7.Parser
	key    rowKey // zero serverPort: an unconnected UDP socket, keyed per datagram
	// Cached rows of key for the current period (gen).
	gen  uint64
	link *linkAgg
	rpc  *rpcAgg
	// The api row of the last exchange, for the current period (apiGen).
	api    string
	apiRow *rpcAgg
	apiGen uint64
	// desyncs already reported as lost.
	desyncs uint64
	// peers: per remote address parsers and keys of an unconnected UDP
	// socket (a DNS server): bounded by maxPeers.
	peers map[netip.AddrPort]*conn
}

// maxPeers bounds the per-peer parsers of one unconnected UDP socket.
const maxPeers = 1024

// rowKeyOf is the row of a connection (or of one peer of an unconnected
// UDP socket, remote given).
func rowKeyOf(c *syscap.Conn, remote netip.AddrPort, ssl bool) rowKey {
	k := rowKey{tgid: c.TGID, l7Role: c.Role, proto: c.Proto, ssl: ssl}
	local := c.Local
	switch {
	case c.L4 == syscap.UDP:
		k.l4Role = l4UDP
	case c.Role == l7.Server:
		k.l4Role = l4TCPServer
	default:
		k.l4Role = l4TCPClient
	}
	if c.Role == l7.Server {
		k.clientIP, k.serverIP, k.serverPort = remote.Addr(), local.Addr(), local.Port()
	} else {
		k.clientIP, k.serverIP, k.serverPort = local.Addr(), remote.Addr(), remote.Port()
	}
	return k
}

func (c *conn) rows(a *aggregator) (*linkAgg, *rpcAgg) {
	if c.gen != a.gen || c.link == nil {
		c.gen = a.gen
		c.link = a.link(c.key)
		c.rpc = a.rpc(c.key)
	}
	return c.link, c.rpc
}
