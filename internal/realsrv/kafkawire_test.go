package realsrv

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaWire: a kfake broker on a counted listener; a franz-go client
// produces 3 records one by one and 5 in one batch to topic a, and one
// record to topic r whose first Produce request the broker drops (the
// connection closed, as a broken one), so that the client sends it again;
// then fetches them all back. The wire count is the records of every
// Produce request received (r's twice) and of every Fetch response sent.
func TestKafkaWire(t *testing.T) {
	wire := NewKafkaWire()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "r"), kfake.ListenFn(wire.Listen(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// r's is the fifth Produce request (topics may be named by id only).
	produces, dropped := 0, false
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces++; produces == 5 {
			dropped = true
			return nil, errors.New("dropped by the test"), true
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("a", "r"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var batch []*kgo.Record
	for i := range 5 {
		batch = append(batch, &kgo.Record{Topic: "a", Value: []byte("b" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "r", Value: []byte("retried")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for fetched := 0; fetched < 9; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fetched += fs.NumRecords()
	}
	got, err := wire.Counts()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"Producer a": 8, "Producer r": 2, "Consumer a": 8, "Consumer r": 1}
	if !dropped || !maps.Equal(got, want) {
		t.Errorf("wire counts %v (first Produce to r dropped: %v), want %v", got, dropped, want)
	}
}
