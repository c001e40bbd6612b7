package kafkaprobe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/table"
)

func TestAggBothEnds(t *testing.T) {
	a := newAgg()
	k := rowKey{kind: kafka.Produce, client: netip.MustParseAddrPort("10.0.0.2:40000"),
		server: netip.MustParseAddrPort("10.0.0.1:9092"), topic: "orders"}
	// Both ends read the same two requests (3 and 4 records): counted once.
	for _, n := range []uint64{3, 4} {
		a.add(k, atClient, n)
		a.add(k, atServer, n)
	}
	// Only the broker's end is traced for another client.
	k2 := k
	k2.client = netip.MustParseAddrPort("10.0.0.3:40001")
	a.add(k2, atServer, 5)
	rows := a.flush()
	if rows[k] != 7 || rows[k2] != 5 || len(rows) != 2 {
		t.Fatalf("rows %v", rows)
	}
	if rows := a.flush(); len(rows) != 0 {
		t.Fatalf("second period %v", rows)
	}
	// A request the client wrote before a period's end and the broker read
	// after it: counted in the first period only.
	a.add(k, atClient, 2)
	if rows := a.flush(); rows[k] != 2 || len(rows) != 1 {
		t.Fatalf("client's end first: %v", rows)
	}
	a.add(k, atServer, 2)
	if rows := a.flush(); len(rows) != 0 {
		t.Fatalf("the broker's end later: %v", rows)
	}
	// Idle rows go after idleFlushes periods; a new record starts again.
	for range idleFlushes {
		a.flush()
	}
	if len(a.rows) != 0 {
		t.Fatalf("%d idle rows kept", len(a.rows))
	}
	a.add(k, atServer, 1)
	if rows := a.flush(); rows[k] != 1 {
		t.Fatalf("after idle: %v", rows)
	}
}

func TestAggBound(t *testing.T) {
	a := newAgg()
	k := rowKey{kind: kafka.Fetch, server: netip.MustParseAddrPort("127.0.0.1:9092")}
	for i := range maxRows {
		k.topic = string(rune('a'+i%26)) + string(rune(i))
		if !a.add(k, atClient, 1) {
			t.Fatalf("row %d dropped", i)
		}
	}
	k.topic = "one-too-many"
	if a.add(k, atClient, 1) {
		t.Fatal("row past the bound kept")
	}
	k.topic = string(rune('a')) + string(rune(0))
	if !a.add(k, atServer, 1) {
		t.Fatal("existing row refused")
	}
}

func TestTopicName(t *testing.T) {
	id := [16]byte{0xde, 0xad, 15: 1}
	for _, c := range []struct {
		in   kafka.TopicRecords
		want string
	}{
		{kafka.TopicRecords{Topic: "orders"}, "orders"},
		{kafka.TopicRecords{Topic: "orders", TopicID: id}, "orders"},
		{kafka.TopicRecords{TopicID: id}, "dead0000000000000000000000000001"},
	} {
		if got := topicName(c.in); got != c.want {
			t.Errorf("topicName(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRecord(t *testing.T) {
	k := rowKey{kind: kafka.Fetch, client: netip.MustParseAddrPort("[::1]:5000"),
		server: netip.MustParseAddrPort("[::1]:9092"), topic: "orders"}
	r := record(k, 12, time.Unix(100, 0), time.Minute)
	want := map[string]string{"msg_type": "Consumer", "client_ip": "::1", "client_port": "5000", "topic": "orders",
		"server_ip": "::1", "server_port": "9092"}
	for f, v := range want {
		if got := r.Str(f); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	if n := r.Values[table.Kafkaprobe.MustIndex("num")].Num; n != 12 {
		t.Errorf("num %v", n)
	}
}
