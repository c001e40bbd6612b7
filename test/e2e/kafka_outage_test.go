package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/galago-project/galago/internal/output/kafkatest"
)

// TestMain lets kafkatest re-execute this test binary as a kfake broker
// process (TestKafkaBrokerOutage kills and restarts one).
func TestMain(m *testing.M) {
	kafkatest.ServeIfBroker()
	os.Exit(m.Run())
}

// kafkaOutageQueue is the test's queue_buffering_max_messages: small, so
// that the outage overflows it.
const kafkaOutageQueue = 20

// TestKafkaBrokerOutage runs the real daemon with metrics (web_server and
// kafka), events and metadata on Kafka, kills the broker process for 60 s
// and starts it again on the same port, empty. Throughout the outage the
// REST API keeps taking changes and reading them back, /metrics keeps
// answering, nothing is acknowledged, the queue stays within its limit and
// the overflow is counted; after the restart delivery resumes by itself,
// and what the new broker holds matches galago's sent counter.
func TestKafkaBrokerOutage(t *testing.T) {
	requireE2E(t)
	br := kafkatest.Start(t, kafkatest.Spec{})
	d := startDaemon(t, daemonOpts{
		metricChannel: "web_server,kafka", eventChannel: "kafka", metaChannel: "kafka",
		extraConf: fmt.Sprintf(`kafka = { kafka_broker = "%s"; batch_num_messages = 10; compression_codec = "none";
    queue_buffering_max_messages = %d; queue_buffering_max_kbytes = 10240; queue_buffering_max_ms = 5; };`, br.Addr, kafkaOutageQueue),
		probesInit: `baseinfo {"cmd":{"probe":["cpu","mem","nic","fs"]},"blacklist":{},"params":{"report_period":5},"state":"running"}` + "\n",
	})
	metric := func(name string) float64 {
		t.Helper()
		return sumSamples(t, d.scrape(), name)
	}

	// Delivery works before the outage.
	kafkatest.ConsumeUntil(t, br.Addr, "gala_gopher", 30*time.Second, isMemRecord)
	waitFor(t, 10*time.Second, "sent counter", func() bool { return metric("galago_kafka_messages_sent_total") > 0 })

	br.Kill()
	killed := time.Now()
	// An acknowledgement read just before the kill is counted a moment
	// later; none can come after it.
	time.Sleep(500 * time.Millisecond)
	sentAtKill := metric("galago_kafka_messages_sent_total")
	rssAtKill := rssKiB(t, d.cmd.Process.Pid)
	for i := 0; time.Since(killed) < 60*time.Second; i++ {
		// A change through the REST API, read back at once.
		state := []string{"running", "stopped"}[i%2]
		period := 5 + i
		body := fmt.Sprintf(`{"params":{"report_period":%d},"state":"%s"}`, period, state)
		if code, reply := d.put("virt", body); code != http.StatusOK || reply != successReply {
			t.Fatalf("%v into the outage: PUT /virt %s: %d %s", time.Since(killed).Round(time.Second), body, code, reply)
		}
		code, got := d.get("virt")
		if code != http.StatusOK || !strings.Contains(got, fmt.Sprintf(`"report_period":%d,`, period)) || !strings.Contains(got, `"state":"`+state+`"`) {
			t.Fatalf("%v into the outage: GET /virt after PUT %s: %d %s", time.Since(killed).Round(time.Second), body, code, got)
		}
		// /metrics answers (scrape fails the test otherwise); nothing is
		// acknowledged; the queue holds at most its limit.
		expo := d.scrape()
		if sent := sumSamples(t, expo, "galago_kafka_messages_sent_total"); sent != sentAtKill {
			t.Fatalf("sent counter %v during the outage, %v at the kill", sent, sentAtKill)
		}
		if q := sumSamples(t, expo, "galago_kafka_queue_messages"); q > kafkaOutageQueue {
			t.Fatalf("%v messages queued, limit %d", q, kafkaOutageQueue)
		}
		checkKafkaAccounting(t, expo, fmt.Sprintf("%v into the outage", time.Since(killed).Round(time.Second)))
		time.Sleep(3 * time.Second)
	}
	dropped := metric("galago_kafka_messages_dropped_total")
	// baseinfo writes about 10 records every 5 s: 60 s of them do not fit
	// in 20.
	if dropped < 60 {
		t.Errorf("%v messages counted as dropped after 60 s without a broker, queue of %d", dropped, kafkaOutageQueue)
	}
	t.Logf("outage: %v dropped, %v queued; galago's RSS %.0f KiB at the kill, %.0f KiB after 60 s", dropped,
		metric("galago_kafka_queue_messages"), rssAtKill, rssKiB(t, d.cmd.Process.Pid))

	br.Restart()
	restarted := time.Now()
	msgs := kafkatest.ConsumeUntil(t, br.Addr, "gala_gopher", 30*time.Second, isMemRecord)
	t.Logf("delivery resumed %v after the restart", time.Since(restarted).Round(100*time.Millisecond))
	checkKafkaAccounting(t, d.scrape(), "after the restart")
	// The new broker started empty: every message it holds was
	// acknowledged after the restart, so the messages on its topics lie
	// between the sent counter's growth before and after reading them.
	before := metric("galago_kafka_messages_sent_total") - sentAtKill
	held := countMessages(t, br.Addr, kafkatest.Topics, int(before))
	after := metric("galago_kafka_messages_sent_total") - sentAtKill
	if float64(held) < before || float64(held) > after {
		t.Errorf("the restarted broker holds %d messages; galago counted %v to %v sent since the restart", held, before, after)
	}
	if len(msgs) == 0 || held == 0 {
		t.Errorf("nothing delivered after the restart")
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// checkKafkaAccounting checks in one scrape that every message handed to
// the Kafka producer is accounted for exactly: enqueued = sent + dropped
// (all reasons) + queued.
func checkKafkaAccounting(t *testing.T, expo, when string) {
	t.Helper()
	enq := sumSamples(t, expo, "galago_kafka_messages_enqueued_total")
	sent := sumSamples(t, expo, "galago_kafka_messages_sent_total")
	dropped := sumSamples(t, expo, "galago_kafka_messages_dropped_total")
	queued := sumSamples(t, expo, "galago_kafka_queue_messages")
	if enq != sent+dropped+queued {
		t.Errorf("%s: enqueued %v != sent %v + dropped %v + queued %v", when, enq, sent, dropped, queued)
	}
}

func isMemRecord(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m["total_kB"]
	return ok
}

// countMessages reads topics from their start until at least min messages
// arrived and then until none arrived for a second; it returns how many.
func countMessages(t *testing.T, addr string, topics []string, min int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(20 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		got := fs.NumRecords()
		n += got
		if got == 0 && n >= min {
			return n
		}
	}
	t.Fatalf("topics %v: %d messages after 20 s, galago counted %d sent", topics, n, min)
	return n
}

// sumSamples is the sum of the values of metric name's samples in expo.
func sumSamples(t *testing.T, expo, name string) float64 {
	t.Helper()
	lines := samples(expo, name)
	if len(lines) == 0 {
		t.Fatalf("/metrics has no %s", name)
	}
	sum := 0.0
	for _, l := range lines {
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		sum += v
	}
	return sum
}
