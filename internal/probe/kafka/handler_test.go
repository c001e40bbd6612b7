package kafkaprobe

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
)

// recordBatch is a v2 record batch header declaring n records.
func recordBatch(n int) []byte {
	b := (&kmsg.RecordBatch{Magic: 2, NumRecords: int32(n)}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // the batch length after it
	return b
}

// produceRequest is a framed Produce v9 request of one batch of n records
// to each topic.
func produceRequest(n int, topics ...string) []byte {
	req := &kmsg.ProduceRequest{Version: 9, Acks: -1, TimeoutMillis: 5000}
	for _, t := range topics {
		req.Topics = append(req.Topics, kmsg.ProduceRequestTopic{Topic: t,
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: recordBatch(n)}}})
	}
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 1)
}

// TestHandler drives the capture handler with the records of two
// connections, one traced at the client's end and one at the broker's:
// the ends map to client and server, kafka_port selects the broker, and a
// protocol other than Kafka is not parsed.
func TestHandler(t *testing.T) {
	p := New()
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	p.rt, p.cfg = rt, probe.Config{Params: probe.DefaultParams()}
	p.agg, p.conns, p.names = newAgg(), map[uint64]*conn{}, map[uint32]*procNames{}
	h := handler{p}
	client := netip.MustParseAddrPort("10.0.0.2:40000")
	broker := netip.MustParseAddrPort("10.0.0.1:9092")
	other := netip.MustParseAddrPort("10.0.0.1:9093")
	conns := []syscap.Conn{
		{ID: 1, TGID: 100, L4: syscap.TCP, Role: l7.Client, Proto: l7.Kafka, Local: client, Remote: broker},
		{ID: 2, TGID: 200, L4: syscap.TCP, Role: l7.Server, Proto: l7.Kafka, Local: broker, Remote: netip.MustParseAddrPort("10.0.0.3:40001")},
		{ID: 3, TGID: 100, L4: syscap.TCP, Role: l7.Client, Proto: l7.Kafka, Local: client, Remote: other},
		{ID: 4, TGID: 100, L4: syscap.TCP, Role: l7.Client, Proto: l7.HTTP, Local: client, Remote: broker},
	}
	for i := range conns {
		h.Conn(&conns[i])
	}
	send := func(id uint64, dir l7.Direction, b []byte) {
		h.Data(&syscap.Data{ConnID: id, Dir: dir, Bytes: b, Size: len(b)})
	}
	send(1, l7.Egress, produceRequest(3, "orders"))
	send(2, l7.Ingress, produceRequest(5, "orders"))
	send(3, l7.Egress, produceRequest(7, "orders")) // another broker port
	send(4, l7.Egress, produceRequest(9, "orders")) // not Kafka's
	for i := range conns {
		h.Close(&syscap.Close{ConnID: conns[i].ID})
	}
	rows := p.agg.flush()
	want := map[rowKey]uint64{
		{kind: kafka.Produce, client: client, server: broker, topic: "orders"}:                                    3,
		{kind: kafka.Produce, client: netip.MustParseAddrPort("10.0.0.3:40001"), server: broker, topic: "orders"}: 5,
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	for k, n := range want {
		if rows[k] != n {
			t.Errorf("%+v: %d, want %d", k, rows[k], n)
		}
	}
	if len(p.conns) != 0 || len(p.names) != 0 {
		t.Errorf("%d connections and %d processes' topic names left after the closes", len(p.conns), len(p.names))
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
}

// TestHandlerGap: a capture gap over a Produce request's second topic
// (the capture keeps a prefix of each syscall's bytes): the first topic's
// records are counted, the hidden topic is counted as lost.
func TestHandlerGap(t *testing.T) {
	p := New()
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	p.rt, p.cfg = rt, probe.Config{Params: probe.DefaultParams()}
	p.agg, p.conns, p.names = newAgg(), map[uint64]*conn{}, map[uint32]*procNames{}
	h := handler{p}
	client, broker := netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.0.0.1:9092")
	h.Conn(&syscap.Conn{ID: 1, TGID: 100, L4: syscap.TCP, Role: l7.Client, Proto: l7.Kafka, Local: client, Remote: broker})
	// 3 records to orders, then 3 to payments, whose partitions are in
	// the gap
	req := produceRequest(3, "orders", "payments")
	cut := bytes.Index(req, []byte("payments")) + len("payments") // the gap starts at its partitions
	h.Data(&syscap.Data{ConnID: 1, Dir: l7.Egress, Bytes: req[:cut], Size: len(req)})
	rows := p.agg.flush()
	if k := (rowKey{kind: kafka.Produce, client: client, server: broker, topic: "orders"}); rows[k] != 3 || len(rows) != 1 {
		t.Fatalf("rows %v, want orders 3", rows)
	}
	if n := rt.LostCount(); n != 1 {
		t.Fatalf("%d lost, want the hidden request's 1", n)
	}
}
