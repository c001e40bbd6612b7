package kafkaprobe

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// The broker's topics and how many records the client produces to each:
// orders one record per Produce request, payments in batches of
// paymentsBatch records per request.
const (
	nOrders, nPayments, paymentsBatch = 30, 40, 8
)

// kafkaBroker runs franz-go's kfake as a broker process on a loopback
// port with the two topics, prints "port <n>" and serves until killed.
func kafkaBroker() error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "payments"))
	if err != nil {
		return err
	}
	defer c.Close()
	_, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err != nil {
		return err
	}
	fmt.Printf("port %s\n", port)
	select {}
}

// kafkaClient produces nOrders records to orders one by one and
// nPayments to payments in batches, each acknowledged, then with a second
// client (so that no fetch runs while the topics fill) consumes both
// topics back, and prints what the broker acknowledged and what was
// fetched: "count <Producer|Consumer> <topic> <n>" lines.
func kafkaClient() error {
	seed := kgo.SeedBrokers("127.0.0.1:" + os.Getenv("GALAGO_KAFKA_PORT"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts := map[string]int{}
	prod, err := kgo.NewClient(seed)
	if err != nil {
		return err
	}
	defer prod.Close()
	for i := range nOrders {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("order " + strconv.Itoa(i))}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		counts["Producer orders"]++
	}
	for i := 0; i < nPayments; i += paymentsBatch {
		var recs []*kgo.Record
		for j := i; j < min(i+paymentsBatch, nPayments); j++ {
			recs = append(recs, &kgo.Record{Topic: "payments", Value: []byte("payment " + strconv.Itoa(j))})
		}
		res := prod.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		counts["Producer payments"] += len(res)
	}
	cons, err := kgo.NewClient(seed, kgo.ConsumeTopics("orders", "payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cons.Close()
	for counts["Consumer orders"]+counts["Consumer payments"] < nOrders+nPayments {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) { counts["Consumer "+r.Topic]++ })
	}
	cons.PauseFetchTopics("orders", "payments")
	time.Sleep(300 * time.Millisecond)
	for k, n := range counts {
		fmt.Printf("count %s %d\n", k, n)
	}
	return nil
}

// tally sums the rows of one broker port by msg_type and topic.
type tally struct {
	mu   sync.Mutex
	port uint16
	n    map[string]uint64
}

func (t *tally) add(rows map[rowKey]uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, n := range rows {
		if k.server.Port() == t.port {
			t.n[k.kind.String()+" "+k.topic] += n
		}
	}
}

func (t *tally) snapshot() map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.n)
}

// TestKafkaProbePrivileged: a franz-go client produces to two topics of a
// kfake broker (one record per request to one, batches of eight to the
// other) and consumes them back, both processes on loopback, so both ends
// of every connection are traced. The records per msg_type and topic
// equal what the broker acknowledged and what the client fetched, each
// counted once; with kafka_port another port nothing is counted.
func TestKafkaProbePrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	procs := realsrv.NewProcs()
	defer procs.StopAll()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := func(name string, env ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, self, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), helperEnv+"="+name), env...)
		return cmd
	}
	broker, err := procs.Start("kafkabroker", helper("kafkabroker"))
	if err != nil {
		t.Fatal(err)
	}
	var port int
	probetest.WaitFor(t, "the broker's port", func() bool {
		out := broker.Output.String()
		if i := strings.Index(out, "port "); i >= 0 {
			if j := strings.IndexByte(out[i:], '\n'); j > 0 {
				port, _ = strconv.Atoi(out[i+5 : i+j])
			}
		}
		return port > 0
	})

	p := New(WithShared(testShared))
	p.reportEvery = 100 * time.Millisecond
	tl := &tally{port: uint16(port), n: map[string]uint64{}}
	p.onFlush = tl.add
	rt := probetest.NewRuntime(t, probetest.ProbeName(p.Name()))
	cfg := probe.Config{Params: probe.DefaultParams()}
	cfg.Params.KafkaPort = port
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })

	out, err := procs.Run(ctx, helper("kafkaclient", "GALAGO_KAFKA_PORT="+strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("kafkaclient: %v\n%s", err, out)
	}
	want := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "count" {
			n, _ := strconv.ParseUint(f[3], 10, 64)
			want[f[1]+" "+f[2]] = n
		}
	}
	if want["Producer orders"] != nOrders || want["Producer payments"] != nPayments ||
		want["Consumer orders"] != nOrders || want["Consumer payments"] != nPayments {
		t.Fatalf("client counted %v, want %d orders and %d payments each way", want, nOrders, nPayments)
	}
	for deadline := time.Now().Add(15 * time.Second); !maps.Equal(tl.snapshot(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("counted %v, want %v (%d lost)", tl.snapshot(), want, rt.LostCount())
		}
	}
	// Later periods add nothing: each record was counted once.
	time.Sleep(300 * time.Millisecond)
	if got := tl.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
	// The table's records say the same.
	fromRecs := map[string]uint64{}
	for _, r := range rt.Records() {
		if r.Table != table.Kafkaprobe {
			t.Fatalf("record of table %s", r.Table.Name)
		}
		if r.Str("server_port") == strconv.Itoa(port) && r.Str("server_ip") == "127.0.0.1" && r.Str("client_ip") == "127.0.0.1" {
			fromRecs[r.Str("msg_type")+" "+r.Str("topic")] += uint64(r.Values[table.Kafkaprobe.MustIndex("num")].Num)
		}
	}
	if !maps.Equal(fromRecs, want) {
		t.Errorf("kafkaprobe records sum to %v, want %v", fromRecs, want)
	}

	// Another kafka_port: the same traffic is not this feature's.
	cfg.Params.KafkaPort = port + 1
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if out, err := procs.Run(ctx, helper("kafkaclient", "GALAGO_KAFKA_PORT="+strconv.Itoa(port))); err != nil {
		t.Fatalf("kafkaclient: %v\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond)
	if got := tl.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("with kafka_port %d counted %v, want still %v", port+1, got, want)
	}
}
