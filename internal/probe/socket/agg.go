package socket

import (
	"fmt"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// tcp counters, in table order: enum socket_tcp_counter of socket.bpf.c.
const (
	cListendrop        = int(socketSocketTcpCounterSOCKET_C_LISTENDROP)
	cAcceptOverflow    = int(socketSocketTcpCounterSOCKET_C_ACCEPT_OVERFLOW)
	cSynOverflow       = int(socketSocketTcpCounterSOCKET_C_SYN_OVERFLOW)
	cPassiveOpen       = int(socketSocketTcpCounterSOCKET_C_PASSIVE_OPEN)
	cPassiveOpenFailed = int(socketSocketTcpCounterSOCKET_C_PASSIVE_OPEN_FAILED)
	cRetranSynacks     = int(socketSocketTcpCounterSOCKET_C_RETRAN_SYNACKS)
	cRetranSyn         = int(socketSocketTcpCounterSOCKET_C_RETRAN_SYN)
	cActiveOpen        = int(socketSocketTcpCounterSOCKET_C_ACTIVE_OPEN)
	cActiveOpenFailed  = int(socketSocketTcpCounterSOCKET_C_ACTIVE_OPEN_FAILED)
	cSynSent           = int(socketSocketTcpCounterSOCKET_C_SYN_SENT)
	cSynDrop           = int(socketSocketTcpCounterSOCKET_C_SYN_DROP)
	cSynackSent        = int(socketSocketTcpCounterSOCKET_C_SYNACK_SENT)
	nTCPCounters       = int(socketSocketTcpCounterSOCKET_NR_TCP_COUNTERS)
)

var tcpCounterFields = [nTCPCounters]string{
	cListendrop: "listendrop", cAcceptOverflow: "accept_overflow", cSynOverflow: "syn_overflow",
	cPassiveOpen: "passive_open", cPassiveOpenFailed: "passive_open_failed", cRetranSynacks: "retran_synacks",
	cRetranSyn: "retran_syn", cActiveOpen: "active_open", cActiveOpenFailed: "active_open_failed",
	cSynSent: "syn_sent", cSynDrop: "syn_drop", cSynackSent: "synack_sent",
}

// estabBounds are gala-gopher's estab_latency buckets, in ns; socket.bpf.c
// (tcp_open) buckets with the same bounds.
var estabBounds = []float64{3e6, 10e6, 50e6, 100e6, 500e6, 1e9, 10e9}

// tcpEntry is one endpoint read from tcp_endpoints.
type tcpEntry struct {
	raw [tcpKeySize]byte // the BPF key, to delete it
	key tcpKey
	val tcpSample
}

// udpEntry is one endpoint read from udp_endpoints.
type udpEntry struct {
	raw [udpKeySize]byte
	key udpKey
	val udpSample
}

// tcpEndpoint is what user space keeps of one BPF endpoint: the previous
// read (counters are monotonic; a period reports the growth) and the
// growth not reported yet.
type tcpEndpoint struct {
	raw        [tcpKeySize]byte
	prev       tcpSample
	delta      [nTCPCounters]uint64
	latency    *table.Histogram
	lastChange time.Time
}

type udpEndpoint struct {
	raw        [udpKeySize]byte
	prev       udpSample
	delta      udpSample
	lastChange time.Time
}

type aggregator struct {
	tcp map[tcpKey]*tcpEndpoint
	udp map[udpKey]*udpEndpoint
	// holdback decides on the rows of processes not observed (see flush);
	// expired counts the rows with growth it dropped, for the probe to
	// report as lost.
	holdback snoop.Holdback
	expired  uint64
}

// takeExpired returns the rows expired since the last call.
func (a *aggregator) takeExpired() uint64 {
	n := a.expired
	a.expired = 0
	return n
}

func newAggregator() *aggregator {
	return &aggregator{tcp: map[tcpKey]*tcpEndpoint{}, udp: map[udpKey]*udpEndpoint{}}
}

func (s *tcpSample) isZero() bool {
	return s.c == [nTCPCounters]uint64{} && s.buckets == [nBuckets]uint64{}
}

// maxOf is the largest latency of report period seq, read after socket_period
// moved to seq+1. A connection that completed between the move and the read
// is counted in this period but keeps its maximum in the next slot: that
// slot is used when the period's own has none.
func (s *tcpSample) maxOf(seq uint64) (float64, bool) {
	if s.maxPeriod[seq&1] == seq {
		return float64(s.maxNs[seq&1]), true
	}
	if n := seq + 1; s.maxPeriod[n&1] == n {
		return float64(s.maxNs[n&1]), true
	}
	return 0, false
}

// observeTCP takes one read of tcp_endpoints at the end of period seq: each
// endpoint's growth since the previous read is added to the period.
// Endpoints that left the map (deleted) are forgotten.
func (a *aggregator) observeTCP(entries []tcpEntry, seq uint64, now time.Time) {
	seen := make(map[tcpKey]bool, len(entries))
	for i := range entries {
		e := &entries[i]
		seen[e.key] = true
		t := a.tcp[e.key]
		if t == nil {
			// Inserted zero before its first add: wait for the add.
			if e.val.isZero() {
				delete(seen, e.key)
				continue
			}
			t = &tcpEndpoint{raw: e.raw, latency: table.NewHistogram(estabBounds)}
			a.tcp[e.key] = t
		}
		t.add(&e.val, seq, now)
	}
	for k := range a.tcp {
		if !seen[k] {
			delete(a.tcp, k)
		}
	}
}

// add accounts the growth from t.prev to cur.
func (t *tcpEndpoint) add(cur *tcpSample, seq uint64, now time.Time) {
	changed := false
	for i := range cur.c {
		if d := cur.c[i] - t.prev.c[i]; d != 0 {
			t.delta[i] += d
			changed = true
		}
	}
	var n uint64
	for i := range cur.buckets {
		d := cur.buckets[i] - t.prev.buckets[i]
		t.latency.Counts[i] += d
		n += d
	}
	if n > 0 {
		changed = true
		t.latency.Sum += float64(cur.sum - t.prev.sum)
		if m, ok := cur.maxOf(seq); ok && m > t.latency.Max {
			t.latency.Max = m
		}
	}
	if changed {
		t.lastChange = now
	}
	t.prev = *cur
}

// idleTCP lists the endpoints without growth for idleTimeout: the caller
// deletes them from the map and hands the value the deletion returned to
// retireTCP.
func (a *aggregator) idleTCP(now time.Time) []tcpKey {
	var out []tcpKey
	for k, t := range a.tcp {
		if now.Sub(t.lastChange) >= idleTimeout {
			out = append(out, k)
		}
	}
	return out
}

// retireTCP settles an endpoint deleted from the map: final is the value
// the deletion returned (found false: already gone). An endpoint that grew
// after the last read keeps its row: the growth is reported, and counting
// restarts from zero in the element the next increment inserts.
func (a *aggregator) retireTCP(k tcpKey, final tcpSample, found bool, seq uint64, now time.Time) {
	t := a.tcp[k]
	if t == nil {
		return
	}
	if !found || final == t.prev {
		delete(a.tcp, k)
		return
	}
	t.add(&final, seq, now)
	t.prev = tcpSample{}
}

func (s *udpSample) isZero() bool { return *s == udpSample{} }

func (a *aggregator) observeUDP(entries []udpEntry, now time.Time) {
	seen := make(map[udpKey]bool, len(entries))
	for i := range entries {
		e := &entries[i]
		u := a.udp[e.key]
		if u == nil {
			if e.val.isZero() {
				continue
			}
			u = &udpEndpoint{raw: e.raw}
			a.udp[e.key] = u
		}
		seen[e.key] = true
		u.add(e.val, now)
	}
	for k := range a.udp {
		if !seen[k] {
			delete(a.udp, k)
		}
	}
}

func (u *udpEndpoint) add(cur udpSample, now time.Time) {
	d := udpSample{drops: cur.drops - u.prev.drops, sends: cur.sends - u.prev.sends, rcvs: cur.rcvs - u.prev.rcvs}
	if !d.isZero() {
		u.lastChange = now
		u.delta.drops += d.drops
		u.delta.sends += d.sends
		u.delta.rcvs += d.rcvs
	}
	u.prev = cur
}

func (a *aggregator) idleUDP(now time.Time) []udpKey {
	var out []udpKey
	for k, u := range a.udp {
		if now.Sub(u.lastChange) >= idleTimeout {
			out = append(out, k)
		}
	}
	return out
}

func (a *aggregator) retireUDP(k udpKey, final udpSample, found bool, now time.Time) {
	u := a.udp[k]
	if u == nil {
		return
	}
	if !found || final == u.prev {
		delete(a.udp, k)
		return
	}
	u.add(final, now)
	u.prev = udpSample{}
}

func roleName(r uint8) string {
	if r == RoleServer {
		return "server"
	}
	return "client"
}

// flush renders the period's growth of every endpoint still kept (measured
// zeros for the idle ones) and its events, and starts the next period.
func (a *aggregator) flush(now time.Time, period time.Duration, cfg probe.Config) ([]*table.Record, []event.Event) {
	var recs []*table.Record
	var evs []event.Event
	// The snoopers are asked when the period is reported, not in the
	// kernel alone: a process matching a proc_name snooper is counted in
	// the kernel from its exec on, before user space has classified it (a
	// new process that does not match is dropped here, once the snoopers
	// have settled about it: snoop.Holdback), and the snoopers answer for
	// exited processes for a grace period, so the last connections of a
	// short-lived process are kept.
	g := a.holdback.Begin(cfg.Targets)
	defer a.holdback.End()
	T := table.EndpointTcp
	if cfg.Has(bitTCP) {
		for k, t := range a.tcp {
			if v := g.Verdict(k.tgid); v != snoop.Report {
				if v == snoop.Hold {
					continue // its growth waits for the next period
				}
				if v == snoop.Expire && (t.delta != [nTCPCounters]uint64{} || t.latency.Count() > 0) {
					a.expired++
				}
				t.delta = [nTCPCounters]uint64{}
				t.latency = table.NewHistogram(estabBounds)
				continue
			}
			r := T.NewRecord(now, period)
			r.SetStr(T.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
			r.SetStr(T.MustIndex("comm"), k.comm)
			r.SetStr(T.MustIndex("role"), roleName(k.role))
			r.SetStr(T.MustIndex("client_ip"), k.client.String())
			r.SetStr(T.MustIndex("server_ip"), k.server.String())
			r.SetStr(T.MustIndex("server_port"), strconv.Itoa(int(k.serverPort)))
			r.SetStr(T.MustIndex("protocol"), strconv.Itoa(int(k.family)))
			for i, name := range tcpCounterFields {
				r.SetNum(T.MustIndex(name), float64(t.delta[i]))
			}
			r.SetHist(T.MustIndex("estab_latency"), t.latency)
			recs = append(recs, r)
			if cfg.Params.ReportEvent == 1 {
				evs = append(evs, tcpEvents(k, t, now)...)
			}
			t.delta = [nTCPCounters]uint64{}
			t.latency = table.NewHistogram(estabBounds)
		}
	}
	U := table.EndpointUdp
	if cfg.Has(bitUDP) {
		for k, u := range a.udp {
			if v := g.Verdict(k.tgid); v != snoop.Report {
				if v == snoop.Hold {
					continue
				}
				if v == snoop.Expire && !u.delta.isZero() {
					a.expired++
				}
				u.delta = udpSample{}
				continue
			}
			r := U.NewRecord(now, period)
			r.SetStr(U.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
			r.SetStr(U.MustIndex("local_ip"), k.local.String())
			r.SetStr(U.MustIndex("local_port"), strconv.Itoa(int(k.localPort)))
			if k.remote.IsValid() {
				r.SetStr(U.MustIndex("remote_ip"), k.remote.String())
				r.SetStr(U.MustIndex("remote_port"), strconv.Itoa(int(k.remotePort)))
			}
			r.SetStr(U.MustIndex("protocol"), strconv.Itoa(int(k.family)))
			r.SetNum(U.MustIndex("udp_rcv_drops"), float64(u.delta.drops))
			r.SetNum(U.MustIndex("bind_sends"), float64(u.delta.sends))
			r.SetNum(U.MustIndex("bind_rcvs"), float64(u.delta.rcvs))
			recs = append(recs, r)
			u.delta = udpSample{}
		}
	}
	return recs, evs
}

// tcpEvents are gala-gopher's endpoint_tcp events for one period.
func tcpEvents(k tcpKey, t *tcpEndpoint, now time.Time) []event.Event {
	var out []event.Event
	id := fmt.Sprintf("%d_%s_%s_%d_%d", k.tgid, k.client, k.server, k.serverPort, k.role)
	ip := fmt.Sprintf("Client %s, Server %s:%d", k.client, k.server, k.serverPort)
	add := func(d *event.Desc, v uint64) {
		if v == 0 {
			return
		}
		e := event.New(now, d, id, v)
		e.PID, e.Comm, e.IP = int(k.tgid), k.comm, ip
		out = append(out, e)
	}
	add(event.EndpointListenDrop, t.delta[cListendrop])
	add(event.EndpointAcceptOverflow, t.delta[cAcceptOverflow])
	add(event.EndpointSynOverflow, t.delta[cSynOverflow])
	add(event.EndpointRetranSynacks, t.delta[cRetranSynacks])
	return out
}
