package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/output/kafkatest"
)

// awaitMessage reads topic from its start until match accepts a message,
// which it returns.
func awaitMessage(t *testing.T, addr, topic string, timeout time.Duration, match func(map[string]json.RawMessage) bool) (map[string]json.RawMessage, []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("topic %s: no matching message within %v (%d others)", topic, timeout, seen)
		}
		var found map[string]json.RawMessage
		var raw []byte
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			var m map[string]json.RawMessage
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Errorf("topic %s: not a JSON object: %s", topic, r.Value)
				return
			}
			if found == nil && match(m) {
				found, raw = m, r.Value
			}
		})
		if found != nil {
			return found, raw
		}
	}
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: not a string", raw)
	}
	return s
}

// memTotalKB is MemTotal of /proc/meminfo.
func memTotalKB(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			return f[1]
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return ""
}

// TestKafkaChannels starts galago with metric, event and meta out_channel
// kafka, the broker given by GOPHER_KAFKA_SERVER (which overrides the
// file's kafka_broker), and baseinfo's mem collector with a 1% threshold:
// its records, its metadata and its mem-utilisation event arrive on their
// topics in gala-gopher's shapes, with the host's values.
func TestKafkaChannels(t *testing.T) {
	requireE2E(t)
	addr := kafkatest.Start(t, kafkatest.Spec{}).Addr // the three topics
	d := startDaemon(t, daemonOpts{
		metricChannel: "kafka", eventChannel: "kafka", metaChannel: "kafka",
		extraConf: `kafka = { kafka_broker = "no-such-broker.invalid:9092"; batch_num_messages = 100; compression_codec = "lz4";
    queue_buffering_max_messages = 10000; queue_buffering_max_kbytes = 10240; queue_buffering_max_ms = 5; };`,
		env:        []string{"GOPHER_KAFKA_SERVER=" + addr},
		probesInit: `baseinfo {"cmd":{"probe":["mem"]},"blacklist":{},"params":{"report_period":5,"res_upper_thr":1,"report_event":1},"state":"running"}` + "\n",
	})
	host, err := identity.Host("/")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	// Metrics: one record per message, every field of system_meminfo in
	// meta order as strings, machine_id without the -<ip>.
	m, raw := awaitMessage(t, addr, "gala_gopher", 30*time.Second, func(m map[string]json.RawMessage) bool {
		_, ok := m["total_kB"]
		return ok
	})
	if got := str(t, m["machine_id"]); got != host.UUID {
		t.Errorf("machine_id %q, host uuid %q", got, host.UUID)
	}
	if got := str(t, m["entity_name"]); got != "mem" {
		t.Errorf("entity_name %q", got)
	}
	if got, want := str(t, m["total_kB"]), memTotalKB(t); got != want {
		t.Errorf("total_kB %s, /proc/meminfo MemTotal %s", got, want)
	}
	if got := str(t, m["infos"]); got == "" {
		t.Error("empty infos key")
	}
	var ts int64
	if err := json.Unmarshal(m["timestamp"], &ts); err != nil || time.UnixMilli(ts).Before(start.Add(-time.Minute)) || time.UnixMilli(ts).After(time.Now()) {
		t.Errorf("timestamp %s (%v), test started %v", m["timestamp"], time.UnixMilli(ts), start)
	}
	if !bytes.HasPrefix(raw, []byte(`{"timestamp":`)) || !bytes.Contains(raw, []byte(`,"machine_id":"`+host.UUID+`","entity_name":"mem","infos":`)) {
		t.Errorf("key order: %s", raw)
	}
	if _, ok := m["table_name"]; ok {
		t.Error("table_name in a kafka metric message (gala-gopher has none)")
	}

	// Metadata: the table definition, as the meta log has it.
	meta, _ := awaitMessage(t, addr, "gala_gopher_metadata", 30*time.Second, func(m map[string]json.RawMessage) bool {
		return string(m["meta_name"]) == `"system_meminfo"`
	})
	var keys, metrics []string
	_ = json.Unmarshal(meta["keys"], &keys)
	_ = json.Unmarshal(meta["metrics"], &metrics)
	if strings.Join(keys, ",") != "machine_id,infos" || len(metrics) == 0 || metrics[0] != "total_kB" {
		t.Errorf("system_meminfo metadata: keys %v, metrics %v", keys, metrics)
	}
	if str(t, meta["entity_name"]) != "mem" {
		t.Errorf("metadata entity_name %s", meta["entity_name"])
	}

	// Event: memory utilisation above 1%.
	ev, _ := awaitMessage(t, addr, "gala_gopher_event", 30*time.Second, func(m map[string]json.RawMessage) bool {
		return bytes.Contains(m["Resource"], []byte(`"gala_gopher_mem_util"`))
	})
	var attrs struct {
		EntityID  string `json:"entity_id"`
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(ev["Attributes"], &attrs)
	if want := host.MachineID() + "_mem_:proc:meminfo"; attrs.EntityID != want || attrs.EventType != "sys" {
		t.Errorf("event Attributes %+v, want entity_id %s", attrs, want)
	}
	if body := str(t, ev["Body"]); !strings.Contains(body, "WARN Entity(/proc/meminfo) Too high mem utilization(") {
		t.Errorf("event Body %q", body)
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
