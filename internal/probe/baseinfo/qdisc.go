package baseinfo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// qdiscStats are the counters of one device's queueing disciplines that the
// nic table exports (gala-gopher parses them out of `tc -s qdisc show`).
type qdiscStats struct {
	Kind       string // kind of the root qdisc
	Drops      uint64 // root qdisc: packets dropped
	Overlimits uint64 // root qdisc: enqueues over the limit
	Backlog    uint64 // root qdisc: bytes queued now
	// ECNMark sums the ECN marks of the device's qdiscs that count them
	// (fq_codel, codel, pie, fq_pie); HasECN is false when none does.
	ECNMark uint64
	HasECN  bool
}

// qdiscMsg is what parseQdiscMsg extracts from one RTM_NEWQDISC message.
type qdiscMsg struct {
	ifindex int
	parent  uint32
	kind    string
	drops   uint32
	overlim uint32
	backlog uint32
	hasQ    bool
	ecn     uint32
	hasECN  bool
}

// Netlink handles from include/uapi/linux/pkt_sched.h.
const (
	tcHRoot    = 0xFFFFFFFF
	tcHIngress = 0xFFFFFFF1
)

// dumpRootQdiscs asks the kernel (rtnetlink, the reader's network
// namespace) for every qdisc and folds them per device (ifindex).
func dumpRootQdiscs() (map[int]qdiscStats, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
	req.AddData(&nl.TcMsg{Family: unix.AF_UNSPEC})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink qdisc dump: %w", err)
	}
	parsed := make([]qdiscMsg, 0, len(msgs))
	for _, m := range msgs {
		q, err := parseQdiscMsg(m)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, q)
	}
	return foldQdiscs(parsed), nil
}

// foldQdiscs keeps the root qdisc's queue counters per device and sums the
// ECN marks of all its egress qdiscs (with mq at the root they live in the
// per-queue children).
func foldQdiscs(msgs []qdiscMsg) map[int]qdiscStats {
	out := map[int]qdiscStats{}
	for _, q := range msgs {
		if q.parent == tcHIngress {
			continue
		}
		st := out[q.ifindex]
		if q.parent == tcHRoot {
			st.Kind = q.kind
			if q.hasQ {
				st.Drops, st.Overlimits, st.Backlog = uint64(q.drops), uint64(q.overlim), uint64(q.backlog)
			}
		}
		if q.hasECN {
			st.ECNMark += uint64(q.ecn)
			st.HasECN = true
		}
		out[q.ifindex] = st
	}
	// A device whose root qdisc was not in the dump has no queue counters.
	for idx, st := range out {
		if st.Kind == "" {
			delete(out, idx)
		}
	}
	return out
}

const (
	sizeofTcMsg = 20
	// nlaFlags are the NLA_F_NESTED and NLA_F_NET_BYTEORDER bits of an
	// attribute type.
	nlaFlags = unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER
)

// parseQdiscMsg decodes one RTM_NEWQDISC message (struct tcmsg plus
// attributes): the kind, the queue counters of TCA_STATS2 (or the legacy
// TCA_STATS) and the ECN mark counter of the kinds whose TCA_STATS_APP
// carries one.
func parseQdiscMsg(b []byte) (qdiscMsg, error) {
	if len(b) < sizeofTcMsg {
		return qdiscMsg{}, errors.New("qdisc message shorter than tcmsg")
	}
	ne := binary.NativeEndian
	q := qdiscMsg{ifindex: int(int32(ne.Uint32(b[4:8]))), parent: ne.Uint32(b[12:16])}
	attrs, err := parseAttrs(b[sizeofTcMsg:])
	if err != nil {
		return qdiscMsg{}, fmt.Errorf("qdisc attributes: %w", err)
	}
	var app []byte
	for _, a := range attrs {
		switch a.typ {
		case nl.TCA_KIND:
			q.kind = string(bytes.TrimRight(a.val, "\x00"))
		case nl.TCA_STATS:
			// struct tc_stats: bytes u64, packets, drops, overlimits, bps,
			// pps, qlen, backlog (u32 each). TCA_STATS2 wins when present.
			if len(a.val) >= 36 && !q.hasQ {
				q.drops, q.overlim, q.backlog = ne.Uint32(a.val[12:]), ne.Uint32(a.val[16:]), ne.Uint32(a.val[32:])
				q.hasQ = true
			}
		case nl.TCA_STATS2:
			nested, err := parseAttrs(a.val)
			if err != nil {
				return qdiscMsg{}, fmt.Errorf("qdisc TCA_STATS2: %w", err)
			}
			for _, n := range nested {
				switch n.typ {
				case nl.TCA_STATS_QUEUE:
					// struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits.
					if len(n.val) < 20 {
						return qdiscMsg{}, errors.New("short gnet_stats_queue")
					}
					q.backlog, q.drops, q.overlim = ne.Uint32(n.val[4:]), ne.Uint32(n.val[8:]), ne.Uint32(n.val[16:])
					q.hasQ = true
				case nl.TCA_STATS_APP:
					app = n.val
				}
			}
		}
	}
	if off, ok := ecnMarkOffset(q.kind, app); ok {
		q.ecn, q.hasECN = ne.Uint32(app[off:]), true
	}
	return q, nil
}

type attr struct {
	typ int
	val []byte
}

// parseAttrs splits netlink attributes (struct nlattr, 4-byte aligned). It
// checks every length, where nl.ParseRouteAttr panics on a length shorter
// than the header.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return nil, fmt.Errorf("attribute length %d of %d bytes", n, len(b))
		}
		out = append(out, attr{typ: int(binary.NativeEndian.Uint16(b[2:]) &^ nlaFlags), val: b[4:n]})
		b = b[min((n+3)&^3, len(b)):]
	}
	return out, nil
}

// ecnMarkOffset locates ecn_mark in a qdisc's xstats (pkt_sched.h).
func ecnMarkOffset(kind string, app []byte) (int, bool) {
	off := -1
	switch kind {
	case "fq_codel":
		// struct tc_fq_codel_xstats { u32 type; tc_fq_codel_qd_stats { maxpacket, drop_overlimit, ecn_mark, ... } }
		if len(app) >= 4 && binary.NativeEndian.Uint32(app) == 0 { // TCA_FQ_CODEL_XSTATS_QDISC
			off = 12
		}
	case "codel":
		// struct tc_codel_xstats { maxpacket, count, lastcount, ldelay, drop_next, drop_overlimit, ecn_mark, ... }
		off = 24
	case "pie":
		// struct tc_pie_xstats: since Linux 5.1 { u64 prob; delay, avg_dq_rate,
		// dq_rate_estimating, packets_in, dropped, overlimit, maxq, ecn_mark }
		// (40 bytes); before, without dq_rate_estimating and with a u32 prob (32 bytes).
		switch len(app) {
		case 40:
			off = 36
		case 32:
			off = 28
		}
	case "fq_pie":
		// struct tc_fq_pie_xstats { packets_in, dropped, overlimit, overmemory, ecn_mark, ... }
		off = 16
	}
	if off < 0 || len(app) < off+4 {
		return 0, false
	}
	return off, true
}
