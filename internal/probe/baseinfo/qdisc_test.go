package baseinfo

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink/nl"
)

func u32s(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// qdiscBytes builds an RTM_NEWQDISC payload as the kernel sends it.
func qdiscBytes(ifindex int32, parent uint32, kind string, queue, app []byte, legacy []byte) []byte {
	msg := nl.TcMsg{Ifindex: ifindex, Handle: 0x10000, Parent: parent}
	b := append([]byte(nil), msg.Serialize()...)
	b = append(b, nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(kind)).Serialize()...)
	if legacy != nil {
		b = append(b, nl.NewRtAttr(nl.TCA_STATS, legacy).Serialize()...)
	}
	if queue != nil || app != nil {
		st := nl.NewRtAttr(nl.TCA_STATS2, nil)
		st.AddRtAttr(nl.TCA_STATS_BASIC, make([]byte, 16))
		if queue != nil {
			st.AddRtAttr(nl.TCA_STATS_QUEUE, queue)
		}
		if app != nil {
			st.AddRtAttr(nl.TCA_STATS_APP, app)
		}
		b = append(b, st.Serialize()...)
	}
	return b
}

func TestParseQdiscMsg(t *testing.T) {
	// gnet_stats_queue: qlen, backlog, drops, requeues, overlimits.
	queue := u32s(2, 3028, 17, 1, 5)
	for _, c := range []struct {
		name string
		msg  []byte
		want qdiscMsg
	}{
		{"pfifo_fast root", qdiscBytes(2, tcHRoot, "pfifo_fast", queue, nil, nil),
			qdiscMsg{ifindex: 2, parent: tcHRoot, kind: "pfifo_fast", drops: 17, overlim: 5, backlog: 3028, hasQ: true}},
		{"fq_codel: ecn_mark after type, maxpacket, drop_overlimit",
			qdiscBytes(3, tcHRoot, "fq_codel", queue, u32s(0, 1514, 9, 42, 7), nil),
			qdiscMsg{ifindex: 3, parent: tcHRoot, kind: "fq_codel", drops: 17, overlim: 5, backlog: 3028, hasQ: true, ecn: 42, hasECN: true}},
		{"fq_codel class xstats carry no qdisc counters",
			qdiscBytes(3, 0x10001, "fq_codel", queue, u32s(1, 5, 6, 7), nil),
			qdiscMsg{ifindex: 3, parent: 0x10001, kind: "fq_codel", drops: 17, overlim: 5, backlog: 3028, hasQ: true}},
		{"codel", qdiscBytes(4, tcHRoot, "codel", queue, u32s(1, 2, 3, 4, 5, 6, 77, 8, 9), nil),
			qdiscMsg{ifindex: 4, parent: tcHRoot, kind: "codel", drops: 17, overlim: 5, backlog: 3028, hasQ: true, ecn: 77, hasECN: true}},
		{"pie since 5.1 (u64 prob)", qdiscBytes(5, tcHRoot, "pie", queue, u32s(0, 0, 1, 2, 3, 4, 5, 6, 7, 88), nil),
			qdiscMsg{ifindex: 5, parent: tcHRoot, kind: "pie", drops: 17, overlim: 5, backlog: 3028, hasQ: true, ecn: 88, hasECN: true}},
		{"pie before 5.1", qdiscBytes(5, tcHRoot, "pie", queue, u32s(0, 1, 2, 3, 4, 5, 6, 99), nil),
			qdiscMsg{ifindex: 5, parent: tcHRoot, kind: "pie", drops: 17, overlim: 5, backlog: 3028, hasQ: true, ecn: 99, hasECN: true}},
		{"fq_pie", qdiscBytes(6, tcHRoot, "fq_pie", queue, u32s(1, 2, 3, 4, 55, 6, 7), nil),
			qdiscMsg{ifindex: 6, parent: tcHRoot, kind: "fq_pie", drops: 17, overlim: 5, backlog: 3028, hasQ: true, ecn: 55, hasECN: true}},
		{"short xstats are ignored", qdiscBytes(4, tcHRoot, "codel", queue, u32s(1, 2), nil),
			qdiscMsg{ifindex: 4, parent: tcHRoot, kind: "codel", drops: 17, overlim: 5, backlog: 3028, hasQ: true}},
		{"legacy TCA_STATS only", qdiscBytes(7, tcHRoot, "tbf", nil, nil,
			append(make([]byte, 12), u32s(11, 12, 0, 0, 0, 900)...)),
			qdiscMsg{ifindex: 7, parent: tcHRoot, kind: "tbf", drops: 11, overlim: 12, backlog: 900, hasQ: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseQdiscMsg(c.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
	if _, err := parseQdiscMsg(make([]byte, 10)); err == nil {
		t.Error("short message accepted")
	}
	bad := qdiscBytes(2, tcHRoot, "pfifo", u32s(1, 2), nil, nil)
	if _, err := parseQdiscMsg(bad); err == nil {
		t.Error("short gnet_stats_queue accepted")
	}
}

func TestFoldQdiscs(t *testing.T) {
	got := foldQdiscs([]qdiscMsg{
		// mq root with two fq_codel children: queue counters from the
		// root, ECN marks summed over the children.
		{ifindex: 2, parent: tcHRoot, kind: "mq", drops: 9, overlim: 1, backlog: 100, hasQ: true},
		{ifindex: 2, parent: 0x10001, kind: "fq_codel", drops: 4, hasQ: true, ecn: 3, hasECN: true},
		{ifindex: 2, parent: 0x10002, kind: "fq_codel", drops: 5, hasQ: true, ecn: 4, hasECN: true},
		{ifindex: 2, parent: tcHIngress, kind: "ingress", drops: 1000, hasQ: true},
		// A device with only an ingress qdisc has no egress counters.
		{ifindex: 3, parent: tcHIngress, kind: "ingress", hasQ: true},
		{ifindex: 4, parent: tcHRoot, kind: "noqueue", hasQ: true},
	})
	want := map[int]qdiscStats{
		2: {Kind: "mq", Drops: 9, Overlimits: 1, Backlog: 100, ECNMark: 7, HasECN: true},
		4: {Kind: "noqueue"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func FuzzParseQdiscMsg(f *testing.F) {
	f.Add(qdiscBytes(2, tcHRoot, "fq_codel", u32s(2, 3028, 17, 1, 5), u32s(0, 1514, 9, 42, 7), nil))
	f.Add(qdiscBytes(7, tcHRoot, "pie", nil, u32s(0, 1, 2, 3, 4, 5, 6, 99), append(make([]byte, 12), u32s(11, 12, 0, 0, 0, 900)...)))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parseQdiscMsg(b)
		if err != nil {
			return
		}
		if q.hasECN && q.kind != "fq_codel" && q.kind != "codel" && q.kind != "pie" && q.kind != "fq_pie" {
			t.Fatalf("ECN counter read for kind %q", q.kind)
		}
	})
}
