package tcp

import (
	"fmt"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// Histogram bounds. gala-gopher's reference does not give bounds for the
// tcp_link histograms, so these are galago's choice: roughly logarithmic,
// covering loopback to intercontinental RTTs and the kernel's default
// buffer and window ranges. An observation above the last bound lands in
// +Inf; Max keeps its exact value.
var (
	// µs: srtt, rcv_rtt, syn_srtt.
	rttBounds = []float64{50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000}
	// segments: snd_cwnd, reordering.
	segBounds = []float64{1, 2, 4, 8, 10, 16, 32, 64, 128, 256, 512, 1024}
	// bytes: windows, unsent/unacked data, socket buffers.
	byteBounds = []float64{0, 1024, 4096, 16384, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608, 16777216}
	// ms: rto, ato.
	msBounds = []float64{1, 5, 10, 40, 100, 200, 500, 1000, 3000, 10000, 60000, 120000}
	// ns: net_delay (proc_flow_perf reports nanoseconds, as gala-gopher),
	// 10 µs to 10 s.
	nsBounds = []float64{1e4, 5e4, 1e5, 5e5, 1e6, 5e6, 1e7, 5e7, 1e8, 5e8, 1e9, 5e9, 1e10}
)

// Bounds of the aggregator's memory (package doc, "Memory"). Records they
// keep out are counted and reported as lost events (probe.Runtime.Lost).
const (
	// maxTracked is the most connections remembered at once: live ones
	// (where their counters stood at the last sample, ~100 bytes each)
	// plus recently closed ones (identity and row, ~40 bytes each). A
	// snapshot or close record of a connection not yet remembered is
	// dropped while the table is full.
	maxTracked = 1 << 18
	// maxRows is the most tcp_metric rows (and proc_flow_perf rows) of one
	// report period, and the most row keys kept for reuse. A record whose
	// row would be one more is dropped.
	maxRows = 1 << 14
	// liveExpiry: a live connection no sample has seen for this many
	// samples (at least; see orphanLinger) is forgotten (it closed and its
	// close record was lost to a full ring buffer).
	liveExpiry = 3
	// orphanLinger: how long a connection may go unseen by the samples
	// before its close record comes. The samples read the sockets held in
	// fd tables; one the application has closed lingers in FIN_WAIT1,
	// FIN_WAIT2, CLOSING or LAST_ACK until the kernel is done with it
	// (tcp_fin_timeout, 60 s by default; tcp_orphan_retries, 8
	// retransmissions with backoff, ~100 s). Forgotten earlier, its close
	// record would count it again from zero.
	orphanLinger = 5 * time.Minute
)

// connID identifies one connection: a socket can carry several in turn
// (connect after tcp_disconnect), which the generation tells apart.
type connID struct {
	cookie uint64
	gen    uint32
}

// linkKey is one tcp_metric row.
type linkKey struct {
	tgid       uint32
	comm       string
	role       uint8 // roleClient or roleServer
	clientIP   string
	serverIP   string
	clientPort int // -1 when report_cport is off
	serverPort uint16
	family     uint16
}

// rawKey is a linkKey before its strings are built: the lookup key of the
// row keys kept for reuse, so that a record of a known row costs no string
// formatting or allocation.
type rawKey struct {
	client, server [16]byte // netip.Addr.As16 (IPv4 mapped; family tells)
	comm           [16]int8
	tgid           uint32
	clientPort     int32
	serverPort     uint16
	family         uint16
	// role is 32 bits wide so that the struct has no padding: the map
	// then hashes it as plain memory instead of field by field.
	role uint32
}

// keyEntry is one row key shared by the connections of the row, with the
// row's aggregate of the current period (so that a record finds it without
// hashing the key's strings).
type keyEntry struct {
	key    linkKey
	agg    *linkAgg // the row of period `period`; stale when older
	period uint64
}

// cumulative are the counters that only grow during a connection.
type cumulative struct {
	bytesAcked, bytesReceived                     uint64
	segsIn, segsOut, retrans, skDrops             uint64
	sendRsts, recvRsts, backlogDrops, filterDrops uint64
	sndBufLimit, rmemScheduls                     uint64
	tcpOom                                        uint64
	// tmout is tcp_sock.total_rto as the kernel keeps it: 16 bits, so
	// differences are taken modulo 2^16 (minus).
	tmout uint64
}

func cumulativeOf(r *tcpTcpConn) cumulative {
	return cumulative{
		bytesAcked: r.BytesAcked, bytesReceived: r.BytesReceived,
		segsIn: uint64(r.SegsIn), segsOut: uint64(r.SegsOut), retrans: uint64(r.TotalRetrans), skDrops: uint64(r.SkDrops),
		sendRsts: uint64(r.C.SendRsts), recvRsts: uint64(r.C.ReceiveRsts),
		backlogDrops: uint64(r.C.BacklogDrops), filterDrops: uint64(r.C.FilterDrops),
		sndBufLimit: uint64(r.C.SndBufLimit), rmemScheduls: uint64(r.C.RmemScheduls),
		tcpOom: uint64(r.C.TcpOom), tmout: totalRTO(r.TotalRto),
	}
}

// baseline is where a live connection's counters stood at its last sample,
// at the widths the record carries them (the per-connection state is kept
// small: 64 bytes instead of 112).
type baseline struct {
	bytesAcked, bytesReceived         uint64
	segsIn, segsOut, retrans, skDrops uint32
	sendRsts, recvRsts                uint32
	backlogDrops, filterDrops         uint32
	sndBufLimit, rmemScheduls, tcpOom uint32
	tmout                             uint16
}

func baselineOf(r *tcpTcpConn) baseline {
	return baseline{
		bytesAcked: r.BytesAcked, bytesReceived: r.BytesReceived,
		segsIn: r.SegsIn, segsOut: r.SegsOut, retrans: r.TotalRetrans, skDrops: r.SkDrops,
		sendRsts: r.C.SendRsts, recvRsts: r.C.ReceiveRsts,
		backlogDrops: r.C.BacklogDrops, filterDrops: r.C.FilterDrops,
		sndBufLimit: r.C.SndBufLimit, rmemScheduls: r.C.RmemScheduls,
		tcpOom: r.C.TcpOom, tmout: uint16(totalRTO(r.TotalRto)),
	}
}

func (b *baseline) cumulative() cumulative {
	return cumulative{
		bytesAcked: b.bytesAcked, bytesReceived: b.bytesReceived,
		segsIn: uint64(b.segsIn), segsOut: uint64(b.segsOut), retrans: uint64(b.retrans), skDrops: uint64(b.skDrops),
		sendRsts: uint64(b.sendRsts), recvRsts: uint64(b.recvRsts),
		backlogDrops: uint64(b.backlogDrops), filterDrops: uint64(b.filterDrops),
		sndBufLimit: uint64(b.sndBufLimit), rmemScheduls: uint64(b.rmemScheduls),
		tcpOom: uint64(b.tcpOom), tmout: uint64(b.tmout),
	}
}

// totalRTO is the record's total_rto, 0 when the kernel has none (the field
// is then never reported: hooksAvail.totalRTO is false).
func totalRTO(v uint32) uint64 {
	if v == unsetU32 {
		return 0
	}
	return uint64(uint16(v))
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func (a cumulative) minus(b cumulative) cumulative {
	return cumulative{
		sub(a.bytesAcked, b.bytesAcked), sub(a.bytesReceived, b.bytesReceived),
		sub(a.segsIn, b.segsIn), sub(a.segsOut, b.segsOut), sub(a.retrans, b.retrans), sub(a.skDrops, b.skDrops),
		sub(a.sendRsts, b.sendRsts), sub(a.recvRsts, b.recvRsts), sub(a.backlogDrops, b.backlogDrops),
		sub(a.filterDrops, b.filterDrops), sub(a.sndBufLimit, b.sndBufLimit), sub(a.rmemScheduls, b.rmemScheduls),
		sub(a.tcpOom, b.tcpOom), uint64(uint16(a.tmout - b.tmout)),
	}
}

func (a *cumulative) add(b cumulative) {
	a.bytesAcked += b.bytesAcked
	a.bytesReceived += b.bytesReceived
	a.segsIn += b.segsIn
	a.segsOut += b.segsOut
	a.retrans += b.retrans
	a.skDrops += b.skDrops
	a.sendRsts += b.sendRsts
	a.recvRsts += b.recvRsts
	a.backlogDrops += b.backlogDrops
	a.filterDrops += b.filterDrops
	a.sndBufLimit += b.sndBufLimit
	a.rmemScheduls += b.rmemScheduls
	a.tcpOom += b.tcpOom
	a.tmout += b.tmout
}

// connState is what the aggregator remembers of one live connection,
// stored in the map by value (no allocation per connection).
type connState struct {
	key       *keyEntry
	last      baseline
	lostMax   uint32 // max lost_out seen this period
	sackedMax uint32
	// seen is the sample number of the last snapshot.
	seen        uint64
	synObserved bool
}

// linkAgg accumulates one row over a period.
type linkAgg struct {
	sum                   cumulative
	lostOut, sackedOut    uint64
	srtt, rcvRTT, synSRTT *table.Histogram
	synMax                float64
	synSeen               bool
	cwnd, notsent, notack *table.Histogram
	reordering            *table.Histogram
	sndWnd, rcvWnd, avl   *table.Histogram
	rto, ato              *table.Histogram
	rcvbuf, sndbuf        *table.Histogram
}

func newLinkAgg() *linkAgg {
	return &linkAgg{
		srtt: table.NewHistogram(rttBounds), rcvRTT: table.NewHistogram(rttBounds), synSRTT: table.NewHistogram(rttBounds),
		cwnd: table.NewHistogram(segBounds), reordering: table.NewHistogram(segBounds),
		notsent: table.NewHistogram(byteBounds), notack: table.NewHistogram(byteBounds),
		sndWnd: table.NewHistogram(byteBounds), rcvWnd: table.NewHistogram(byteBounds), avl: table.NewHistogram(byteBounds),
		rto: table.NewHistogram(msBounds), ato: table.NewHistogram(msBounds),
		rcvbuf: table.NewHistogram(byteBounds), sndbuf: table.NewHistogram(byteBounds),
	}
}

// hooksAvail says which optional hooks are attached; the fields they feed
// stay unset otherwise.
type hooksAvail struct {
	resets     bool // tcp_send_reset and tcp_receive_reset
	dropReason bool // kfree_skb with reason and rx socket
	bufLimit   bool // sock_exceed_buf_limit
	hz         bool // CONFIG_HZ known: rto, ato
	totalRTO   bool // tcp_sock.total_rto (6.7+): tmout_count
	oom        bool // tcp_send_reset with its reason (6.10+), attached: tcp_oom
	netDelay   bool // sock_ops TX timestamping attached: net_delay
}

// aggregator turns snapshots and close records into per-period rows. It is
// pure (no BPF): the probe feeds it under its lock.
//
// Per connection it keeps only what the next record needs: a live
// connection its baseline (conns); a closed one, for one to two sample
// periods, only its row (closedNew, closedOld), so that a snapshot read
// before its close record was handled is ignored (the iterator runs
// unlocked while close records are applied; such a snapshot is applied by
// the first snapshot call after the close) and a LATE record (a reset sent
// after the close) finds its row. Close records come through the ring
// buffer in order, right after the close, so one to two periods is ample.
type aggregator struct {
	conns connMap[connState]
	// Recently closed connections, two generations: closedNew collects
	// the closes until the end of the next snapshot, then becomes
	// closedOld, dropped at the end of the one after.
	closedNew, closedOld connMap[*keyEntry]
	keys                 map[rawKey]*keyEntry // row keys, reset every period
	links                map[linkKey]*linkAgg
	flows                map[flowKey]*table.Histogram // net_delay per proc_flow_perf row
	sample               uint64
	period               uint64
	// dropped counts records the bounds kept out since takeDropped.
	dropped uint64
	// The bounds: maxTracked and maxRows (tests lower them).
	maxTracked, maxRows int
	// expiry: samples a live connection may go unseen (setSamplePeriod).
	expiry uint64
	// reportCport keeps client ports in the key (params report_cport).
	reportCport bool
	// targets are the snoopers, asked when a period's rows are reported
	// rather than when a record arrives (nil: every process): the kernel
	// observes a process that matches a proc_name snooper from its exec
	// on, before user space has classified it, and a short-lived one's
	// records (its last connections' close) arrive after it exited; the
	// snoopers answer for exited processes for a grace period
	// (snoop.ExitGrace). linkHold and flowHold decide on the rows of
	// processes they do not observe: dropped, or held for the next period
	// while the snoopers have not settled about them (snoop.Holdback);
	// those held too long are dropped and counted in dropped.
	targets            snoop.Targets
	linkHold, flowHold snoop.Holdback
	// serverOf, when set (cluster_ip_backend), is the server of a client
	// connection: its DNAT backend (backend.go).
	serverOf serverFunc
	// clientOf, when set (cluster_ip_backend=2), is the real client of a
	// server connection, if flowtracer saw its SYN (backend.go).
	clientOf clientFunc
}

func newAggregator() *aggregator {
	return &aggregator{
		conns: newConnMap[connState](), closedNew: newConnMap[*keyEntry](), closedOld: newConnMap[*keyEntry](),
		keys: map[rawKey]*keyEntry{}, links: map[linkKey]*linkAgg{}, flows: map[flowKey]*table.Histogram{},
		maxTracked: maxTracked, maxRows: maxRows, expiry: liveExpiry,
	}
}

// setSamplePeriod sizes the expiry of unseen connections (orphanLinger)
// for a sample period.
func (a *aggregator) setSamplePeriod(d time.Duration) {
	a.expiry = liveExpiry
	if d > 0 {
		a.expiry = max(liveExpiry, uint64((orphanLinger+d-1)/d))
	}
}

// tracked is the number of connections remembered (bounded by maxTracked).
func (a *aggregator) tracked() int {
	return a.conns.len() + a.closedNew.len() + a.closedOld.len()
}

// takeDropped returns the number of records the bounds kept out since the
// last call (the probe reports them as lost events).
func (a *aggregator) takeDropped() uint64 {
	n := a.dropped
	a.dropped = 0
	return n
}

// keyOf finds the row key of a connection; role unknown (a socket that
// existed before the probe) is inferred from the listeners: a connection
// whose local port is listened on in its namespace was accepted.
func (a *aggregator) keyOf(c *conn, listeners map[listenKey]bool) (*keyEntry, bool) {
	role := c.raw.Role
	if role == roleUnknown {
		role = roleClient
		if listeners[listenKey{c.raw.Netns, c.raw.Sport}] {
			role = roleServer
		}
	}
	rk := rawKey{tgid: c.raw.Tgid, comm: c.raw.Comm, role: uint32(role), family: c.family, clientPort: -1}
	client, server := c.local, c.remot
	switch role {
	case roleClient:
		rk.serverPort = c.raw.Dport
		if a.serverOf != nil {
			server, rk.serverPort = a.serverOf(c)
		}
		if a.reportCport {
			rk.clientPort = int32(c.raw.Sport)
		}
	case roleServer:
		client, server = c.remot, c.local
		rk.serverPort = c.raw.Sport
		if a.reportCport {
			rk.clientPort = int32(c.raw.Dport)
		}
		if a.clientOf != nil {
			if orig, ok := a.clientOf(c); ok {
				client = orig.Addr()
				if a.reportCport {
					rk.clientPort = int32(orig.Port())
				}
			}
		}
	default:
		return nil, false
	}
	rk.client, rk.server = client.As16(), server.As16()
	if e := a.keys[rk]; e != nil {
		return e, true
	}
	e := &keyEntry{key: linkKey{
		tgid: rk.tgid, comm: commString(rk.comm[:]), role: role, family: rk.family,
		clientIP: client.String(), serverIP: server.String(), clientPort: int(rk.clientPort), serverPort: rk.serverPort,
	}}
	if len(a.keys) < a.maxRows {
		a.keys[rk] = e
	}
	return e, true
}

type listenKey struct {
	netns uint32
	port  uint16
}

// link returns the row of e in the current period, nil (and one record
// counted as dropped) when the period already has maxRows rows.
func (a *aggregator) link(e *keyEntry) *linkAgg {
	if e.agg != nil && e.period == a.period {
		return e.agg
	}
	l := a.links[e.key]
	if l == nil {
		if len(a.links) >= a.maxRows {
			a.dropped++
			return nil
		}
		l = newLinkAgg()
		a.links[e.key] = l
	}
	e.agg, e.period = l, a.period
	return l
}

// observe adds the instantaneous values of one sample of a connection.
func (l *linkAgg) observe(r *tcpTcpConn, h hooksAvail) {
	l.srtt.Observe(float64(r.SrttUs))
	if r.RcvRttUs > 0 { // 0: the receiver has not measured yet
		l.rcvRTT.Observe(float64(r.RcvRttUs))
	}
	l.cwnd.Observe(float64(r.SndCwnd))
	l.notsent.Observe(float64(r.NotsentBytes))
	l.notack.Observe(float64(r.NotackBytes))
	l.reordering.Observe(float64(r.Reordering))
	l.sndWnd.Observe(float64(r.SndWnd))
	l.rcvWnd.Observe(float64(r.RcvWnd))
	l.avl.Observe(float64(r.AvlSndWnd))
	if h.hz && r.RtoUs != unsetU32 && r.AtoUs != unsetU32 {
		l.rto.Observe(float64(r.RtoUs) / 1000)
		l.ato.Observe(float64(r.AtoUs) / 1000)
	}
	l.rcvbuf.Observe(float64(r.SkRcvbuf))
	l.sndbuf.Observe(float64(r.SkSndbuf))
}

// update applies one snapshot or close record to its connection: st and
// known are its entry in conns (the caller has looked it up).
func (a *aggregator) update(c *conn, id connID, st connState, known bool, key *keyEntry, h hooksAvail, baseline bool) {
	if !known {
		// A close record is unique; a snapshot of a connection whose close
		// was handled was read before it.
		if c.raw.Type != recClose && (a.closedNew.has(id) || a.closedOld.has(id)) {
			return
		}
		if a.tracked() >= a.maxTracked {
			a.dropped++
			return
		}
		st = connState{key: key}
		if baseline {
			// Existed before the probe: count from now on, and its SYN RTT
			// belongs to a period the probe did not see.
			st.last = baselineOf(&c.raw)
			st.synObserved = true
			st.seen = a.sample
			a.conns.set(id, st)
			return
		}
	}
	if baseline {
		st.last = baselineOf(&c.raw)
		st.seen = a.sample
		a.conns.set(id, st)
		return
	}
	cur := cumulativeOf(&c.raw)
	delta := cur.minus(st.last.cumulative())
	st.last = baselineOf(&c.raw)
	st.seen = a.sample
	st.lostMax = max(st.lostMax, c.raw.LostOut)
	st.sackedMax = max(st.sackedMax, c.raw.SackedOut)
	// A row the period has no room for loses this record's share (counted
	// by link); the baseline still moves, so nothing counts twice.
	l := a.link(st.key)
	if l != nil {
		l.sum.add(delta)
		l.observe(&c.raw, h)
		if !st.synObserved && c.raw.C.SynSrttUs > 0 {
			st.synObserved = true
			v := float64(c.raw.C.SynSrttUs)
			l.synSRTT.Observe(v)
			if !l.synSeen || v > l.synMax {
				l.synMax = v
			}
			l.synSeen = true
		}
	}
	if c.raw.Type != recClose {
		a.conns.set(id, st)
		return
	}
	// Closed: its period maxima go to the row now (nothing can change
	// them any more), and only its row is remembered.
	if l != nil {
		l.lostOut += uint64(st.lostMax)
		l.sackedOut += uint64(st.sackedMax)
	}
	if known {
		a.conns.del(id)
	}
	a.closedNew.set(id, st.key)
}

// snapshot applies one iterator pass. baseline marks the pass at start:
// it only records where each existing connection's counters stand.
func (a *aggregator) snapshot(recs []conn, h hooksAvail, baseline bool) {
	a.sample++
	listeners := map[listenKey]bool{}
	for i := range recs {
		if recs[i].raw.Type == recListen {
			listeners[listenKey{recs[i].raw.Netns, recs[i].raw.Sport}] = true
		}
	}
	for i := range recs {
		c := &recs[i]
		if c.raw.Type != recSnapshot {
			continue
		}
		id := connID{c.raw.Cookie, c.raw.Gen}
		st, known := a.conns.get(id)
		key := st.key
		if !known {
			var ok bool
			if key, ok = a.keyOf(c, listeners); !ok {
				continue
			}
		}
		a.update(c, id, st, known, key, h, baseline)
	}
	a.expire()
}

// closed applies a close record (from the ring buffer).
func (a *aggregator) closed(c *conn, h hooksAvail) {
	id := connID{c.raw.Cookie, c.raw.Gen}
	st, known := a.conns.get(id)
	key := st.key // a known connection keeps the key it was first seen with
	if !known {
		var ok bool
		if key, ok = a.keyOf(c, nil); !ok {
			return
		}
	}
	a.update(c, id, st, known, key, h, false)
}

// late applies a LATE record: a counter that grew after the connection
// closed (the reset tcp_disconnect sends). Returns false when the
// connection is unknown (it closed before the probe saw it).
func (a *aggregator) late(c *conn) bool {
	id := connID{c.raw.Cookie, c.raw.Gen}
	e, _ := a.closedNew.get(id)
	if e == nil {
		e, _ = a.closedOld.get(id)
	}
	if e == nil {
		// Its close record was lost, or not handled yet.
		st, ok := a.conns.get(id)
		if !ok {
			return false
		}
		e = st.key
	}
	if l := a.link(e); l != nil {
		l.sum.add(cumulative{
			sendRsts: uint64(c.raw.C.SendRsts), recvRsts: uint64(c.raw.C.ReceiveRsts),
			backlogDrops: uint64(c.raw.C.BacklogDrops), filterDrops: uint64(c.raw.C.FilterDrops),
			sndBufLimit: uint64(c.raw.C.SndBufLimit), rmemScheduls: uint64(c.raw.C.RmemScheduls),
			tcpOom: uint64(c.raw.C.TcpOom),
		})
	}
	return true
}

// flowKey is one proc_flow_perf row: gala-gopher's (tgid, role, remote ip,
// server port).
type flowKey struct {
	tgid       uint32
	role       uint8
	remoteIP   string
	serverPort uint16
}

// delay adds one net_delay sample (a DELAY record).
func (a *aggregator) delay(d *delaySample) {
	k := flowKey{tgid: d.raw.Tgid, role: d.raw.Role, remoteIP: d.remote.String(), serverPort: d.raw.ServerPort}
	h := a.flows[k]
	if h == nil {
		if len(a.flows) >= a.maxRows {
			a.dropped++
			return
		}
		h = table.NewHistogram(nsBounds)
		a.flows[k] = h
	}
	h.Observe(float64(d.raw.DelayNs))
}

// flushFlows returns the period's proc_flow_perf rows of observed
// processes and starts a new period.
func (a *aggregator) flushFlows() map[flowKey]*table.Histogram {
	out := a.flows
	a.flows = map[flowKey]*table.Histogram{}
	a.dropped += snoop.Sift(&a.flowHold, a.targets, out, a.flows, func(k flowKey) uint32 { return k.tgid })
	return out
}

// expire ends a sample: live connections not seen for a.expiry samples
// are forgotten (they vanished without a close record, lost to a full ring
// buffer), and closed ones age by one generation.
func (a *aggregator) expire() {
	for id, st := range a.conns.all() {
		if a.sample-st.seen > a.expiry {
			if st.lostMax > 0 || st.sackedMax > 0 {
				if l := a.link(st.key); l != nil {
					l.lostOut += uint64(st.lostMax)
					l.sackedOut += uint64(st.sackedMax)
				}
			}
			a.conns.del(id)
		}
	}
	a.closedOld.clear() // keeps its buckets for reuse: bounded by maxTracked
	a.closedOld, a.closedNew = a.closedNew, a.closedOld
}

// flush moves the period's lost_out/sacked_out maxima into their rows and
// returns the rows, starting a new period.
func (a *aggregator) flush() map[linkKey]*linkAgg {
	for id, st := range a.conns.all() {
		if st.lostMax > 0 || st.sackedMax > 0 {
			if l := a.link(st.key); l != nil {
				l.lostOut += uint64(st.lostMax)
				l.sackedOut += uint64(st.sackedMax)
			}
			st.lostMax, st.sackedMax = 0, 0
			a.conns.set(id, st)
		}
	}
	out := a.links
	a.links = map[linkKey]*linkAgg{}
	a.dropped += snoop.Sift(&a.linkHold, a.targets, out, a.links, func(k linkKey) uint32 { return k.tgid })
	a.period++
	// Keys of connections still remembered stay valid (they hold their
	// entry); dropping the table bounds it by the rows of one period.
	clear(a.keys)
	return out
}

// Field indexes of table.TcpMetric.
var (
	fTgid, fComm, fRole, fClientIP, fServerIP   = idx("tgid"), idx("comm"), idx("role"), idx("client_ip"), idx("server_ip")
	fClientPort, fServerPort, fProtocol         = idx("client_port"), idx("server_port"), idx("protocol")
	fRx, fTx, fSegsIn, fSegsOut                 = idx("rx_bytes"), idx("tx_bytes"), idx("segs_in"), idx("segs_out")
	fSrtt, fRcvRTT                              = idx("srtt"), idx("rcv_rtt")
	fCwnd, fNotsent, fNotack, fReord            = idx("snd_cwnd"), idx("notsent_bytes"), idx("notack_bytes"), idx("reordering")
	fSndWnd, fRcvWnd, fAvl                      = idx("snd_wnd"), idx("rcv_wnd"), idx("avl_snd_wnd")
	fRto, fAto, fSyn, fSynMax, fRcvbuf, fSndbuf = idx("rto"), idx("ato"), idx("syn_srtt"), idx("syn_srtt_max"), idx("sk_rcvbuf"), idx("sk_sndbuf")
	fRetran, fBacklog, fSkDrops, fLost          = idx("retran_packets"), idx("backlog_drops"), idx("sk_drops"), idx("lost_out")
	fSacked, fFilter, fSndBufLim, fRmem         = idx("sacked_out"), idx("filter_drops"), idx("snd_buf_limit_count"), idx("rmem_scheduls")
	fSendRst, fRecvRst, fRetransRatio           = idx("send_rsts"), idx("receive_rsts"), idx("retrans_ratio")
	fTmout, fTcpOom                             = idx("tmout_count"), idx("tcp_oom")
)

// Field indexes of table.ProcFlowPerf.
var (
	fpTgid, fpRole, fpRemoteIP = table.ProcFlowPerf.MustIndex("tgid"), table.ProcFlowPerf.MustIndex("role"), table.ProcFlowPerf.MustIndex("remote_ip")
	fpServerPort, fpNetDelay   = table.ProcFlowPerf.MustIndex("server_port"), table.ProcFlowPerf.MustIndex("net_delay")
)

func idx(name string) int { return table.TcpMetric.MustIndex(name) }

func roleName(r uint8) string {
	if r == roleServer {
		return "server"
	}
	return "client"
}

func setHist(r *table.Record, i int, h *table.Histogram) {
	if h.Count() > 0 {
		r.SetHist(i, h)
	}
}

// record renders one row. Sub-items not enabled and fields this kernel or
// galago cannot measure stay unset.
func record(k linkKey, l *linkAgg, cfg probe.Config, h hooksAvail, end time.Time, period time.Duration) *table.Record {
	r := table.TcpMetric.NewRecord(end, period)
	r.SetStr(fTgid, strconv.FormatUint(uint64(k.tgid), 10))
	r.SetStr(fComm, k.comm)
	r.SetStr(fRole, roleName(k.role))
	r.SetStr(fClientIP, k.clientIP)
	r.SetStr(fServerIP, k.serverIP)
	// Without report_cport the row stands for every client port, and
	// gala-gopher prints 0 there: dashboards group by the label.
	r.SetStr(fClientPort, strconv.Itoa(max(k.clientPort, 0)))
	r.SetStr(fServerPort, strconv.Itoa(int(k.serverPort)))
	r.SetStr(fProtocol, strconv.Itoa(int(k.family)))
	s := &l.sum
	if cfg.Has(bitStats) {
		r.SetNum(fRx, float64(s.bytesReceived))
		r.SetNum(fTx, float64(s.bytesAcked))
		r.SetNum(fSegsIn, float64(s.segsIn))
		r.SetNum(fSegsOut, float64(s.segsOut))
	}
	if cfg.Has(bitRTT) {
		setHist(r, fSrtt, l.srtt)
		setHist(r, fRcvRTT, l.rcvRTT)
	}
	if cfg.Has(bitWindows) {
		setHist(r, fCwnd, l.cwnd)
		setHist(r, fNotsent, l.notsent)
		setHist(r, fNotack, l.notack)
		setHist(r, fReord, l.reordering)
		setHist(r, fSndWnd, l.sndWnd)
		setHist(r, fRcvWnd, l.rcvWnd)
		setHist(r, fAvl, l.avl)
	}
	if cfg.Has(bitRate) && h.hz {
		setHist(r, fRto, l.rto)
		setHist(r, fAto, l.ato)
	}
	if cfg.Has(bitSRTT) && l.synSeen {
		setHist(r, fSyn, l.synSRTT)
		r.SetNum(fSynMax, l.synMax)
	}
	if cfg.Has(bitSockbuf) {
		setHist(r, fRcvbuf, l.rcvbuf)
		setHist(r, fSndbuf, l.sndbuf)
	}
	if cfg.Has(bitAbnormal) {
		r.SetNum(fRetran, float64(s.retrans))
		r.SetNum(fSkDrops, float64(s.skDrops))
		r.SetNum(fLost, float64(l.lostOut))
		r.SetNum(fSacked, float64(l.sackedOut))
		if s.segsOut > 0 {
			r.SetNum(fRetransRatio, float64(s.retrans)/float64(s.segsOut))
		}
		if h.dropReason {
			r.SetNum(fBacklog, float64(s.backlogDrops))
			r.SetNum(fFilter, float64(s.filterDrops))
		}
		if h.bufLimit {
			r.SetNum(fSndBufLim, float64(s.sndBufLimit))
			r.SetNum(fRmem, float64(s.rmemScheduls))
		}
		if h.resets {
			r.SetNum(fSendRst, float64(s.sendRsts))
			r.SetNum(fRecvRst, float64(s.recvRsts))
		}
		if h.totalRTO {
			r.SetNum(fTmout, float64(s.tmout))
		}
		if h.oom {
			r.SetNum(fTcpOom, float64(s.tcpOom))
		}
	}
	return r
}

// flowRecord renders one proc_flow_perf row: net_delay only (sys_delay is
// not measured, see the package doc).
func flowRecord(k flowKey, h *table.Histogram, end time.Time, period time.Duration) *table.Record {
	r := table.ProcFlowPerf.NewRecord(end, period)
	r.SetStr(fpTgid, strconv.FormatUint(uint64(k.tgid), 10))
	r.SetStr(fpRole, roleName(k.role))
	r.SetStr(fpRemoteIP, k.remoteIP)
	r.SetStr(fpServerPort, strconv.Itoa(int(k.serverPort)))
	setHist(r, fpNetDelay, h)
	return r
}

// events are gala-gopher's tcp_link abnormal events for one row (only with
// report_event=1; the caller checks). Entity id and messages as
// gala-gopher's tcpprobe prints them.
func events(k linkKey, l *linkAgg, cfg probe.Config, h hooksAvail, now time.Time) []event.Event {
	if !cfg.Has(bitAbnormal) && !cfg.Has(bitSRTT) {
		return nil
	}
	p := cfg.Params
	id := fmt.Sprintf("%d_%s_%s_%s_%d_%d", k.tgid, roleName(k.role), k.clientIP, k.serverIP, k.serverPort, k.family)
	ip := fmt.Sprintf("CIP(%s), SIP(%s:%d)", k.clientIP, k.serverIP, k.serverPort)
	var out []event.Event
	add := func(d *event.Desc, v uint64) {
		e := event.New(now, d, id, v)
		e.PID, e.Comm, e.IP = int(k.tgid), k.comm, ip
		out = append(out, e)
	}
	thr := uint64(max(p.DropsThr, 0))
	if cfg.Has(bitAbnormal) {
		if h.oom && l.sum.tcpOom > 0 {
			add(event.TCPOOM, l.sum.tcpOom)
		}
		if h.dropReason && l.sum.backlogDrops > thr {
			add(event.TCPBacklogDrops, l.sum.backlogDrops)
		}
		if h.dropReason && l.sum.filterDrops > thr {
			add(event.TCPFilterDrops, l.sum.filterDrops)
		}
		if l.sum.skDrops > thr {
			add(event.TCPSkDrops, l.sum.skDrops)
		}
		if l.lostOut > thr {
			add(event.TCPLostOut, l.lostOut)
		}
		if l.sackedOut > thr {
			add(event.TCPSackedOut, l.sackedOut)
		}
	}
	// gala-gopher compares the SYN RTT (µs) with latency_thr (ms) << 3.
	if cfg.Has(bitSRTT) && l.synSeen && p.LatencyThr > 0 && l.synMax > float64(uint64(p.LatencyThr)<<3) {
		add(event.TCPSynSRTT, uint64(l.synMax))
	}
	return out
}
