package custom

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/output"
	"github.com/galago-project/galago/internal/output/kafkatest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

const logScript = `#!/bin/sh
printf '|log|1700000000123|"WARN"|13|{"thread.pid":12, "thread.tgid":12,"process.comm":"java"}|{"values":[{"event.name":"oncpu","start_time":1,"end_time":4,"duration":3,"count":1,"event.type":"oncpu"}]}|"thread profile"|\n'
printf '|log|1700000000124|"INFO"|9|{}|{"values":[]}|"a|b"|\n'
printf '|log|1700000000125|WARN|13|{}|{}|"severity text is not JSON"|\n'
printf '|event|custom_ent|alpha|value|123|myproc|10.0.0.1|cid1|pod1|eth0|WARN|13|too high value(42.5).|\n'
while IFS= read -r line; do :; done
`

// TestLogLinesToKafka runs a custom probe under the Manager whose |log|
// and |event| lines reach the event topic of a Kafka broker process, in
// gala-gopher's shapes, read back by franz-go and by kcat (librdkafka); a
// |log| line that is not JSON is dropped and counted.
func TestLogLinesToKafka(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Spec{})
	prod, err := output.NewKafkaProducer(output.KafkaOptions{
		Brokers: []string{b.Addr}, BatchNumMessages: 10, MaxMessages: 100, MaxBytes: 1 << 20,
		Linger: time.Millisecond, CloseTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	host := output.Host{UUID: "2c1c455d-24a5", IP: "10.0.0.9", Hostname: "node1"}
	pipe := output.NewPipeline(output.PipelineConfig{
		Store: table.NewStore(table.Limits{MaxTables: 8, MaxRecords: 8, MaxMetrics: 64}, nil, nil),
		// A custom probe's event keeps its own text in any language.
		Language: event.ZhCN,
	})
	pipe.AddEventSink("kafka", output.NewEventKafkaSink(prod, "gala_gopher_event", host, time.UTC))

	feat, p := writeProbe(t, logScript)
	m := probe.NewManager(context.Background(), slog.New(slog.DiscardHandler), pipe, nil)
	must(t, m.AddCustom(feat, func() probe.Probe {
		q := New(feat, p.list).(*Probe)
		q.checkBin = p.checkBin
		return q
	}))
	must(t, m.Put("myprobe", []byte(`{"cmd":{"probe":["sub1"]},"blacklist":{},"state":"running"}`)))
	defer m.StopAll()

	got := kafkatest.Consume(t, b.Addr, "gala_gopher_event", 3, 20*time.Second)
	want := []string{
		`{"Timestamp":1700000000123,"SeverityText":"WARN","SeverityNumber":13,` +
			`"Resource":{"thread.pid":12,"thread.tgid":12,"process.comm":"java","host.id":"2c1c455d-24a5","host.name":"node1","host.ip":"10.0.0.9"},` +
			`"Attributes":{"values":[{"event.name":"oncpu","start_time":1,"end_time":4,"duration":3,"count":1,"event.type":"oncpu"}]},"Body":"thread profile"}`,
		`{"Timestamp":1700000000124,"SeverityText":"INFO","SeverityNumber":9,` +
			`"Resource":{"host.id":"2c1c455d-24a5","host.name":"node1","host.ip":"10.0.0.9"},"Attributes":{"values":[]},"Body":"a|b"}`,
	}
	for i, w := range want {
		if string(got[i]) != w {
			t.Errorf("log record #%d:\n got %s\nwant %s", i, got[i], w)
		}
	}
	var ev struct {
		Attributes struct {
			EntityID string `json:"entity_id"`
		}
		Resource struct {
			Metric string
			Labels map[string]string
		}
		SeverityText string
		Body         string
	}
	if err := json.Unmarshal(got[2], &ev); err != nil {
		t.Fatalf("event %s: %v", got[2], err)
	}
	if ev.Attributes.EntityID != "2c1c455d-24a5-10.0.0.9_custom_ent_alpha" || ev.Resource.Metric != "gala_gopher_custom_ent_value" ||
		ev.Resource.Labels["PID"] != "123" || ev.Resource.Labels["Device"] != "eth0" || ev.SeverityText != "WARN" ||
		len(ev.Body) < 40 || ev.Body[len(ev.Body)-len(" WARN Entity(alpha) too high value(42.5)."):] != " WARN Entity(alpha) too high value(42.5)." {
		t.Errorf("event %s", got[2])
	}

	// librdkafka reads the same bytes.
	kc := kafkatest.Kcat(t, b.Addr, "gala_gopher_event", 3)
	for i := range kc {
		if kc[i] != string(got[i]) {
			t.Errorf("kcat #%d:\n got %s\nwant %s", i, kc[i], got[i])
		}
	}
	found := false
	for _, s := range m.Statuses() {
		if s.Name == "myprobe" {
			found = true
			if s.Errors != 1 {
				t.Errorf("probe errors %d, want 1 (the |log| line with a bad severity text)", s.Errors)
			}
		}
	}
	if !found {
		t.Error("no status for myprobe")
	}
}
