package l7

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
)

// kafkaTopic is the broker's one topic (one partition).
const kafkaTopic = "orders"

// kafkaBroker runs franz-go's kfake as a broker process on a loopback
// port and counts every request it receives, by API name: its own
// counters, printed as "count <api> <n>" lines and "end" on SIGUSR1.
func kafkaBroker() error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, kafkaTopic))
	if err != nil {
		return err
	}
	defer c.Close()
	var mu sync.Mutex
	counts := map[string]int{}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		counts[kmsg.NameForKey(req.Key())]++
		mu.Unlock()
		return nil, nil, false
	})
	_, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err != nil {
		return err
	}
	fmt.Printf("port %s\n", port)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for range usr1 {
		mu.Lock()
		printCounts(counts)
		mu.Unlock()
		fmt.Println("end")
	}
	return nil
}

// kafkaClient produces GALAGO_L7_N records one by one (each acknowledged)
// to 127.0.0.1:GALAGO_L7_PORT, consumes them back, stops fetching, and
// asks GALAGO_L7_ERRS times for the metadata of a topic that does not
// exist. It prints its counts: records produced and consumed, and
// "unknown_topic" answers.
func kafkaClient() error {
	n, errs := envInt("GALAGO_L7_N"), envInt("GALAGO_L7_ERRS")
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:"+os.Getenv("GALAGO_L7_PORT")),
		kgo.DefaultProduceTopic(kafkaTopic), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts := map[string]int{}
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("order " + strconv.Itoa(i))}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		counts["produced"]++
	}
	for counts["consumed"] < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		counts["consumed"] += fs.NumRecords()
	}
	// No fetch in flight when the client closes: each would be a request
	// without a response on both ends.
	cl.PauseFetchTopics(kafkaTopic)
	time.Sleep(600 * time.Millisecond)
	for range errs {
		req := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr("no-such-topic")
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if len(resp.Topics) != 1 || !errors.Is(kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("metadata of no-such-topic: %+v", resp.Topics)
		}
		counts["unknown_topic"]++
	}
	printCounts(counts)
	return nil
}

// brokerCounts asks the broker helper for its counts (SIGUSR1) and parses
// the block it prints.
func brokerCounts(t *testing.T, p *realsrv.Proc) map[string]float64 {
	t.Helper()
	before := strings.Count(p.Output.String(), "end\n")
	if err := p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var out string
	probetest.WaitFor(t, "the broker's counts", func() bool {
		out = p.Output.String()
		return strings.Count(out, "end\n") > before
	})
	out = out[:strings.LastIndex(out, "end\n")]
	if i := strings.LastIndex(out, "end\n"); i >= 0 {
		out = out[i+4:]
	}
	counts := map[string]float64{}
	for _, l := range lines([]byte(out)) {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "count" {
			counts[f[1]], _ = strconv.ParseFloat(f[2], 64)
		}
	}
	return counts
}

// testKafka: franz-go's kfake as a broker process and a franz-go client
// (both this test binary, re-executed): on both ends the requests per API
// (Produce and Fetch of the topic, Metadata, ApiVersions, ...) equal the
// broker's own count of what it received, every one answered, and the
// Metadata requests for a topic that does not exist are client errors
// (UNKNOWN_TOPIC_OR_PARTITION), as many as the client got.
func testKafka(t *testing.T, e *env) {
	const n, errs = 50, 5
	broker, port := e.startHelper("kafkabroker")
	got := e.runHelper("kafkaclient", "GALAGO_L7_N="+strconv.Itoa(n), "GALAGO_L7_ERRS="+strconv.Itoa(errs), "GALAGO_L7_PORT="+strconv.Itoa(port))
	if got["produced"] != n || got["consumed"] != n || got["unknown_topic"] != errs {
		t.Fatalf("client counts %v, want %d produced and consumed, %d unknown topic", got, n, errs)
	}
	byAPI := brokerCounts(t, broker)
	t.Logf("broker counted: %v", byAPI)
	var total float64
	for _, c := range byAPI {
		total += c
	}
	recs, tallies := e.check(map[string]expect{
		"broker (server)": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: port, protocol: "kafka"}, n: total},
		"client":          {m: rowMatch{tbl: table.L7Rpc, role: "client", port: port, protocol: "kafka"}, n: total},
	})
	for role, s := range tallies {
		if s.errs != errs {
			t.Errorf("%s l7_rpc err_count %v, want %v", role, s.errs, float64(errs))
		}
	}
	for _, role := range []string{"server", "client"} {
		// The rows' API is the request's name (Apache Kafka's: kmsg spells
		// a few otherwise, InitProducerID), and for Produce and Fetch its
		// topic.
		rows := map[string]tally{}
		for _, api := range apis(recs, port, role) {
			name, _, _ := strings.Cut(api, " ")
			name = strings.ToLower(name)
			s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: port, protocol: "kafka", api: api})
			r := rows[name]
			r.req, r.resp, r.clientErr, r.serverEr = r.req+s.req, r.resp+s.resp, r.clientErr+s.clientErr, r.serverEr+s.serverEr
			rows[name] = r
		}
		for name, want := range byAPI {
			var wantErr float64
			if name == "Metadata" {
				wantErr = errs
			}
			if r := rows[strings.ToLower(name)]; r.req != want || r.resp != want || r.clientErr != wantErr || r.serverEr != 0 {
				t.Errorf("%s l7_rpc_api %s: %v requests, %v responses, %v client and %v server errors; want %v, %v client errors",
					role, name, r.req, r.resp, r.clientErr, r.serverEr, want, wantErr)
			}
		}
		if s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: port, protocol: "kafka", api: "Produce " + kafkaTopic}); s.req != byAPI["Produce"] {
			t.Errorf("%s l7_rpc_api \"Produce %s\": %v, want %v", role, kafkaTopic, s, byAPI["Produce"])
		}
	}
}
