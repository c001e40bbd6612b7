package output

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/output/kafkatest"
	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
)

// kafkaRecords are sinkRecords with testHost's machine_id label, as the
// store's enrichment sets it.
func kafkaRecords() []*table.Record {
	recs := sinkRecords()
	for _, r := range recs {
		for i, l := range r.Extra {
			if l.Name == "machine_id" {
				r.Extra[i].Value = testHost.MachineID()
			}
		}
	}
	return recs
}

func kafkaEvents() []event.Event {
	return []event.Event{
		{Time: t0, Entity: "cpu", EntityID: "cpu", Metric: "total_used_per", Severity: event.SeverityWarn,
			Message: "Too high cpu utilization(93.20%)."},
		{Time: t0.Add(time.Second), Entity: "fs", EntityID: "/boot/efi", Metric: "UsePer",
			Message: "Too many Blocks used(91%)."},
		{Time: t0.Add(2 * time.Second), Entity: "tcp_link", EntityID: "1234_client_10.0.0.1_10.0.0.2_8080_2",
			Metric: "sk_drops", PID: 1234, Comm: "java", IP: "CIP(10.0.0.1), SIP(10.0.0.2:8080)",
			ContainerID: "0123456789ab", PodID: "pod-uid-1", Device: "eth0", Severity: event.SeverityError,
			Message: "Number of lost packets in the TCP protocol stack(12) <&>."},
	}
}

func TestMarshalRecordKafka(t *testing.T) {
	var buf []byte
	for _, r := range kafkaRecords() {
		b, err := MarshalRecordKafka(r, testHost.UUID)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(append(buf, b...), '\n')
	}
	golden(t, "metrics.kafka", buf)

	first, _, _ := bytes.Cut(buf, []byte{'\n'})
	want := `{"timestamp":1793610307000,"machine_id":"2c1c455d-24a5-897c-ea11-bc08f2d510da","entity_name":"link",` +
		`"tgid":"1","role":"client","comm":"we\"ird\\na\nme","rx_bytes":"100","rtt":"30.5","zero_win":"0.25",` +
		`"latency":"3 10 1 50 2 100 2 225 200","unset":"(null)"}`
	if string(first) != want {
		t.Errorf("first record\n got %s\nwant %s", first, want)
	}
}

// orderedJSON decodes a JSON object into its keys in order and its values.
func orderedJSON(t *testing.T, b []byte) ([]string, map[string]json.RawMessage) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, dup := vals[k]; dup {
			t.Errorf("key %q twice in %s", k, b)
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

func unquote(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string: %v", raw, err)
	}
	return s
}

// checkMetricMessage compares a kafka metric message, field by field, with
// the json channel's line for the same record.
func checkMetricMessage(t *testing.T, msg, jsonLine []byte, tables map[string]*table.Table) {
	t.Helper()
	_, j := orderedJSON(t, jsonLine)
	var jTable, jEntity string
	var jTS int64
	_ = json.Unmarshal(j["table_name"], &jTable)
	_ = json.Unmarshal(j["entity_name"], &jEntity)
	_ = json.Unmarshal(j["timestamp"], &jTS)
	tbl := tables[jTable]
	if tbl == nil {
		t.Fatalf("json line of unknown table %q", jTable)
	}
	_, labels := orderedJSON(t, j["labels"])
	_, metrics := orderedJSON(t, j["metrics"])
	_, histos := orderedJSON(t, j["histos"])

	keys, k := orderedJSON(t, msg)
	wantKeys := []string{"timestamp", "machine_id", "entity_name"}
	for _, f := range tbl.Fields {
		wantKeys = append(wantKeys, f.Name)
	}
	if strings.Join(keys, ",") != strings.Join(wantKeys, ",") {
		t.Errorf("%s: keys %v, want %v", tbl.Name, keys, wantKeys)
	}
	var ts int64
	if err := json.Unmarshal(k["timestamp"], &ts); err != nil || ts != jTS {
		t.Errorf("%s: timestamp %s, json channel %d", tbl.Name, k["timestamp"], jTS)
	}
	if got := unquote(t, k["entity_name"]); got != jEntity {
		t.Errorf("%s: entity_name %q, json channel %q", tbl.Name, got, jEntity)
	}
	// gala-gopher's kafka machine_id is the uuid without the -<ip> of the label.
	mid := unquote(t, k["machine_id"])
	if jm := unquote(t, labels["machine_id"]); mid != testHost.UUID || jm != mid+"-"+testHost.IP {
		t.Errorf("%s: machine_id %q, json channel's label %q", tbl.Name, mid, jm)
	}
	for _, f := range tbl.Fields {
		got := unquote(t, k[f.Name])
		var want string
		switch f.Kind {
		case table.KindKey, table.KindLabel:
			want = "(null)"
			if raw, ok := labels[f.Name]; ok {
				want = unquote(t, raw)
			}
		case table.KindHistogram:
			want = "(null)"
			if raw, ok := histos[f.Name]; ok {
				want = histoFromJSON(t, raw)
			}
		default:
			want = "(null)"
			if raw, ok := metrics[f.Name]; ok {
				want = unquote(t, raw)
			}
		}
		if got != want {
			t.Errorf("%s.%s: kafka %q, json channel %q", tbl.Name, f.Name, got, want)
		}
	}
}

// histoFromJSON writes a json-channel histogram ({"<le>":<cum>,...,
// "count":N,"sum":S,"max":M}) in gala-gopher's raw notation.
func histoFromJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	keys, vals := orderedJSON(t, raw)
	var buckets []string
	for _, k := range keys {
		if k == "count" || k == "sum" || k == "max" {
			continue
		}
		buckets = append(buckets, k+" "+string(vals[k]))
	}
	return strconv.Itoa(len(buckets)) + " " + strings.Join(buckets, " ") + " " + string(vals["sum"]) + " " + string(vals["max"])
}

func lines(b []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
}

// TestKafkaChannels sends metrics, events and metadata through the pipeline
// to the kafka channels and, for the same data, to the json metric channel
// and the event and meta logs; a franz-go consumer and kcat (librdkafka)
// read the topics of a broker process back.
func TestKafkaChannels(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Spec{})
	dir := t.TempDir()
	p, _, _ := newTestPipeline(t, table.Limits{MaxTables: 8, MaxRecords: 64, MaxMetrics: 64})

	prod, err := NewKafkaProducer(KafkaOptions{
		Brokers: []string{b.Addr}, Compression: "zstd", BatchNumMessages: 100,
		MaxMessages: 1000, MaxBytes: 1 << 20, Linger: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	jsonSink, err := NewMetricJSONSink(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	eventLog, err := NewEventLogSink(dir, testHost, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	metaLog, err := NewMetaLogSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	p.AddMetricSink("json", jsonSink)
	p.AddMetricSink("kafka", NewMetricKafkaSink(prod, "gala_gopher", testHost.UUID))
	p.AddEventSink("logs", eventLog)
	p.AddEventSink("kafka", NewEventKafkaSink(prod, "gala_gopher_event", testHost, time.UTC))
	p.AddMetaSink("logs", metaLog)
	p.AddMetaSink("kafka", NewMetaKafkaSink(prod, "gala_gopher_metadata"))

	recs := kafkaRecords()
	for _, r := range recs {
		p.Record(r, nil)
	}
	events := kafkaEvents()
	for _, e := range events {
		p.Event(e)
	}
	tables := []*table.Table{table.TcpMetric, table.SystemProc, table.ContainerCpu, table.SystemCpu, linkTable, linkExtraTable}
	p.WriteMeta(tables)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	jsonLines := lines(readFile(t, filepath.Join(dir, MetricJSONFile)))
	eventLines := lines(readFile(t, filepath.Join(dir, EventLogFile)))
	metaLines := lines(readFile(t, filepath.Join(dir, MetaLogFile)))
	if len(jsonLines) != len(recs) || len(eventLines) != len(events) || len(metaLines) != len(tables) {
		t.Fatalf("files: %d json lines, %d event lines, %d meta lines", len(jsonLines), len(eventLines), len(metaLines))
	}

	metrics := kafkatest.Consume(t, b.Addr, "gala_gopher", len(recs), 20*time.Second)
	byName := map[string]*table.Table{linkTable.Name: linkTable, linkExtraTable.Name: linkExtraTable}
	for i := range recs {
		checkMetricMessage(t, metrics[i], jsonLines[i], byName)
	}

	// Events and metadata are the very lines of the logs, field by field.
	for topic, want := range map[string][][]byte{"gala_gopher_event": eventLines, "gala_gopher_metadata": metaLines} {
		got := kafkatest.Consume(t, b.Addr, topic, len(want), 20*time.Second)
		for i := range want {
			gk, gv := orderedJSON(t, got[i])
			wk, wv := orderedJSON(t, want[i])
			if strings.Join(gk, ",") != strings.Join(wk, ",") {
				t.Errorf("%s #%d: keys %v, log %v", topic, i, gk, wk)
			}
			for _, k := range wk {
				if !bytes.Equal(gv[k], wv[k]) {
					t.Errorf("%s #%d: %s = %s, log %s", topic, i, k, gv[k], wv[k])
				}
			}
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s #%d:\n kafka %s\n   log %s", topic, i, got[i], want[i])
			}
		}
	}

	// librdkafka reads the same bytes (zstd batches from franz-go).
	for topic, want := range map[string][][]byte{"gala_gopher": metrics, "gala_gopher_event": eventLines, "gala_gopher_metadata": metaLines} {
		got := kafkatest.Kcat(t, b.Addr, topic, len(want))
		if len(got) != len(want) {
			t.Fatalf("kcat %s: %d messages, want %d", topic, len(got), len(want))
		}
		for i := range want {
			if got[i] != string(want[i]) {
				t.Errorf("kcat %s #%d:\n got %s\nwant %s", topic, i, got[i], want[i])
			}
		}
	}

	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	total := uint64(len(recs) + len(events) + len(tables))
	if enq := checkKafkaAccounting(t, prod, "after close"); enq != float64(total) {
		t.Errorf("enqueued %v, want %d", enq, total)
	}
	if prod.Sent() != total {
		t.Errorf("sent %d, want %d", prod.Sent(), total)
	}
	for _, r := range kafkaDropReasons {
		if n := prod.Dropped(r); n != 0 {
			t.Errorf("dropped{%s} = %d", r, n)
		}
	}
}

// TestKafkaQueueDropsOldest fills the queue of a producer whose broker does
// not answer: Enqueue returns at once, the queue stays within its limits,
// the oldest messages go first and each drop is counted.
func TestKafkaQueueDropsOldest(t *testing.T) {
	prod, err := NewKafkaProducer(KafkaOptions{
		Brokers: []string{fmt.Sprintf("127.0.0.1:%d", kafkatest.FreePort(t))}, BatchNumMessages: 10,
		MaxMessages: 100, MaxBytes: 1 << 20, CloseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		if err := prod.Enqueue("t", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	queued, _ := prod.Queued()
	if queued > 100 {
		t.Errorf("%d messages queued, limit 100", queued)
	}
	// The client holds the first ones it took; the queue holds the newest.
	prod.mu.Lock()
	q := prod.queue[prod.head:]
	last := string(q[len(q)-1].value)
	for i := 1; i < len(q); i++ {
		a, _ := strconv.Atoi(string(q[i-1].value))
		b, _ := strconv.Atoi(string(q[i].value))
		if b != a+1 {
			t.Errorf("queue not contiguous at %d: %d then %d", i, a, b)
		}
	}
	prod.mu.Unlock()
	if last != strconv.Itoa(n-1) {
		t.Errorf("newest queued message %s, want %d", last, n-1)
	}
	if got := prod.Dropped(KafkaDropQueueFull) + uint64(queued); got != n {
		t.Errorf("dropped %d + queued %d = %d, want %d", prod.Dropped(KafkaDropQueueFull), queued, got, n)
	}
	if enq := checkKafkaAccounting(t, prod, "queue full"); enq != n {
		t.Errorf("enqueued %v, want %d", enq, n)
	}

	// Bytes bound the queue too.
	small, err := NewKafkaProducer(KafkaOptions{
		Brokers: []string{fmt.Sprintf("127.0.0.1:%d", kafkatest.FreePort(t))}, BatchNumMessages: 1,
		MaxMessages: 1000, MaxBytes: 1000, CloseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		_ = small.Enqueue("t", bytes.Repeat([]byte{'x'}, 100))
	}
	if _, b := small.Queued(); b > 1000 {
		t.Errorf("%d bytes queued, limit 1000", b)
	}
	if small.Dropped(KafkaDropQueueFull) < 90 {
		t.Errorf("dropped %d of 100 messages of 100 bytes with a 1000-byte limit", small.Dropped(KafkaDropQueueFull))
	}
	small.Close()
	prod.Close()
	if err := prod.Enqueue("t", []byte("late")); err == nil {
		t.Error("Enqueue after Close succeeded")
	}
	// The client reports what it held through its promises, which may run
	// just after Close returns.
	deadline := time.Now().Add(5 * time.Second)
	for prod.Dropped(KafkaDropShutdown)+prod.Dropped(KafkaDropDeliveryFailed) < uint64(queued) {
		if time.Now().After(deadline) {
			t.Fatalf("shutdown drops %d, delivery failures %d; want the %d queued", prod.Dropped(KafkaDropShutdown),
				prod.Dropped(KafkaDropDeliveryFailed), queued)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if prod.Sent() != 0 {
		t.Errorf("sent %d without a broker", prod.Sent())
	}
	// The refused late message counts as enqueued and dropped.
	if enq := checkKafkaAccounting(t, prod, "after close"); enq != n+1 {
		t.Errorf("enqueued %v, want %d", enq, n+1)
	}
}

// TestKafkaBrokerOutage kills the broker process while records flow, keeps
// it down for a minute (the issue's outage) and restarts it on the same
// port. The pipeline must never block, /metrics keep answering, the queue
// and the heap stay within their limits, the drops be counted and delivery
// resume by itself.
func TestKafkaBrokerOutage(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Spec{})
	p, exp, _ := newTestPipeline(t, table.Limits{MaxTables: 8, MaxRecords: 1024, MaxMetrics: 64})
	const maxMsgs, maxBytes = 500, 100 << 10
	prod, err := NewKafkaProducer(KafkaOptions{
		Brokers: []string{b.Addr}, BatchNumMessages: 50, MaxMessages: maxMsgs, MaxBytes: maxBytes,
		Linger: 5 * time.Millisecond, DeliveryTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	p.AddMetricSink("kafka", NewMetricKafkaSink(prod, "gala_gopher", testHost.UUID))
	if err := exp.Register(prod); err != nil {
		t.Fatal(err)
	}

	// The writer: 5 records every 5 ms, comm = sequence number.
	var (
		seq          atomic.Int64
		slowest      atomic.Int64 // ns of the slowest Record call
		stop         = make(chan struct{})
		stopped      sync.WaitGroup
		maxQueue     atomic.Int64
		maxBytesSeen atomic.Int64
	)
	stopped.Add(1)
	go func() {
		defer stopped.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range 5 {
				n := seq.Add(1)
				r := linkRecord(t0, strconv.FormatInt(n%50, 10), "client", strconv.FormatInt(n, 10), float64(n), 1, 5)
				start := time.Now()
				p.Record(r, nil)
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
			q, qb := prod.Queued()
			if q > maxQueue.Load() {
				maxQueue.Store(q)
			}
			if qb > maxBytesSeen.Load() {
				maxBytesSeen.Store(qb)
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		stopped.Wait()
	}()

	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v (sent %d, dropped queue_full %d, delivery_failed %d)", what, timeout,
					prod.Sent(), prod.Dropped(KafkaDropQueueFull), prod.Dropped(KafkaDropDeliveryFailed))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("delivery before the outage", 10*time.Second, func() bool { return prod.Sent() >= 200 })
	if d := prod.Dropped(KafkaDropQueueFull); d != 0 {
		t.Fatalf("%d dropped while the broker was up", d)
	}

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapAtKill := ms.HeapAlloc
	b.Kill()
	outageStart, seqAtKill := time.Now(), seq.Load()
	sentAtKill := prod.Sent()
	scrape := func() string {
		rec := httptest.NewRecorder()
		exp.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("/metrics answered %d during the outage", rec.Code)
		}
		return rec.Body.String()
	}
	const outage = 60 * time.Second
	for time.Since(outageStart) < outage {
		time.Sleep(time.Second)
		body := scrape()
		if !strings.Contains(body, `gala_gopher_link_rtt{`) || !strings.Contains(body, "galago_kafka_queue_messages") {
			t.Fatalf("/metrics during the outage lacks the records or the kafka self-metrics:\n%s", body)
		}
		checkKafkaAccounting(t, prod, fmt.Sprintf("%v into the outage", time.Since(outageStart).Round(time.Second)))
	}
	// A sink that blocked once full would stop the writer at about what the
	// queue and the client hold; the writer goes on at its own pace (its
	// rate depends on the machine, so it is not asserted).
	written := seq.Load() - seqAtKill
	if written < 3*maxMsgs {
		t.Errorf("only %d records accepted in the %v outage (queue limit %d): the pipeline stalled", written, outage, maxMsgs)
	}
	// Memory stays bounded: after a minute of records with nowhere to go,
	// the heap holds the queue (maxBytes), the client's own buffers and
	// the store, not the minute's records.
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapAlloc) - int64(heapAtKill); grown > 16<<20 {
		t.Errorf("heap grew by %d bytes over the outage (%d records written): not bounded", grown, written)
	}
	t.Logf("heap %d -> %d bytes over the outage", heapAtKill, ms.HeapAlloc)
	if d := prod.Dropped(KafkaDropQueueFull); d == 0 {
		t.Errorf("no queue_full drop after %d records with the broker down", written)
	}
	t.Logf("outage: %d records accepted, sent %d -> %d, dropped queue_full %d, delivery_failed %d, max queue %d msgs / %d bytes, slowest Record %v",
		written, sentAtKill, prod.Sent(), prod.Dropped(KafkaDropQueueFull), prod.Dropped(KafkaDropDeliveryFailed),
		maxQueue.Load(), maxBytesSeen.Load(), time.Duration(slowest.Load()))

	b.Restart()
	restarted, sentAtRestart := time.Now(), prod.Sent()
	restartSeq := seq.Load()
	// Delivery resumes: a record written after the restart arrives.
	waitFor("records written after the restart", 10*time.Second, func() bool { return seq.Load() > restartSeq+500 })
	waitFor("delivery after the restart", 15*time.Second, func() bool { return prod.Sent() > sentAtRestart })
	resumedAfter := time.Since(restarted)
	target := seq.Load()
	got := kafkatest.ConsumeUntil(t, b.Addr, "gala_gopher", 20*time.Second, func(m []byte) bool {
		var v struct{ Comm string }
		_ = json.Unmarshal(m, &v)
		n, _ := strconv.ParseInt(v.Comm, 10, 64)
		return n >= target
	})
	close(stop)
	stopped.Wait()

	// What arrived after the restart is in production order.
	prev := int64(0)
	for _, m := range got {
		var v struct{ Comm string }
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(v.Comm, 10, 64)
		if n <= prev {
			t.Errorf("record %d after %d", n, prev)
		}
		prev = n
	}
	if q := maxQueue.Load(); q > maxMsgs {
		t.Errorf("queue reached %d messages, limit %d", q, maxMsgs)
	}
	if qb := maxBytesSeen.Load(); qb > maxBytes+1024 {
		t.Errorf("queue reached %d bytes, limit %d", qb, maxBytes)
	}
	// A blocking sink would hold a call for most of the outage; the bound is
	// loose because a loaded CI machine can pause the writer for a moment.
	if s := time.Duration(slowest.Load()); s > 2*time.Second {
		t.Errorf("a Record call took %v: the kafka sink blocked the pipeline", s)
	}
	checkKafkaAccounting(t, prod, "after the restart")
	body := scrape()
	for _, want := range []string{
		fmt.Sprintf(`galago_kafka_messages_dropped_total{reason="queue_full"} %d`, prod.Dropped(KafkaDropQueueFull)),
		"galago_kafka_messages_sent_total ",
		`galago_sink_errors_total{sink="kafka"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	t.Logf("after restart: delivery resumed within %v; %d records consumed up to #%d; sent %d, dropped queue_full %d, delivery_failed %d",
		resumedAfter.Round(10*time.Millisecond), len(got), target, prod.Sent(), prod.Dropped(KafkaDropQueueFull), prod.Dropped(KafkaDropDeliveryFailed))
}

// TestKafkaSASLTLS delivers over TLS with SCRAM-SHA-512 to a broker that
// requires both; with a wrong password nothing is delivered.
func TestKafkaSASLTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "kafka CA")
	caFile := ca.WriteCA(t, dir, "ca")
	certFile, keyFile := testcert.WriteFiles(t, dir, "broker", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	b := kafkatest.Start(t, kafkatest.Spec{SASL: "SCRAM-SHA-512:galago:s3cret", CertFile: certFile, KeyFile: keyFile})

	tlsCfg, err := ClientTLSConfig(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	produce := func(pass string) *KafkaProducer {
		mech, err := KafkaSASL("scram-sha-512", "galago", pass)
		if err != nil {
			t.Fatal(err)
		}
		prod, err := NewKafkaProducer(KafkaOptions{
			Brokers: []string{b.Addr}, BatchNumMessages: 10, MaxMessages: 100, MaxBytes: 1 << 20,
			Linger: time.Millisecond, DeliveryTimeout: 3 * time.Second, TLS: tlsCfg, SASL: mech,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := prod.Enqueue("gala_gopher_event", []byte(pass)); err != nil {
			t.Fatal(err)
		}
		return prod
	}
	good := produce("s3cret")
	bad := produce("wrong")
	deadline := time.Now().Add(15 * time.Second)
	for good.Sent() == 0 || bad.Dropped(KafkaDropDeliveryFailed) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("good producer sent %d; bad producer sent %d, failed %d", good.Sent(), bad.Sent(), bad.Dropped(KafkaDropDeliveryFailed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	good.Close()
	bad.Close()
	if bad.Sent() != 0 {
		t.Errorf("sent %d with a wrong password", bad.Sent())
	}
	got := kafkatest.Consume(t, b.Addr, "gala_gopher_event", 1, 10*time.Second,
		kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: "galago", Pass: "s3cret"}.AsSha512Mechanism()))
	if string(got[0]) != "s3cret" {
		t.Errorf("consumed %q", got[0])
	}

	if _, err := KafkaSASL("GSSAPI", "u", "p"); err == nil {
		t.Error("GSSAPI accepted")
	}
	if _, err := ClientTLSConfig(filepath.Join(dir, "missing.pem"), "", ""); err == nil {
		t.Error("missing CA file accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.pem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientTLSConfig(filepath.Join(dir, "empty.pem"), "", ""); err == nil {
		t.Error("CA file without a certificate accepted")
	}
}

// appendJSONString must write what encoding/json (marshalCompact) writes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uo\te`, "nl\n cr\r tab\t bs\b ff\f nul\x00 us\x1f del\x7f",
		"<&>", "héllo 世界", "bad\xffutf8\xc3", "line\u2028sep\u2029", "\xed\xa0\x80", "emoji 😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := marshalCompact(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}

// checkKafkaAccounting gathers the producer's self-metrics in one scrape
// and checks that every message handed to it is accounted for exactly:
// enqueued = sent + dropped (all reasons) + queued.
func checkKafkaAccounting(t *testing.T, prod *KafkaProducer, when string) (enqueued float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(prod); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			sum[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	enq, sent := sum["galago_kafka_messages_enqueued_total"], sum["galago_kafka_messages_sent_total"]
	dropped, queued := sum["galago_kafka_messages_dropped_total"], sum["galago_kafka_queue_messages"]
	if enq != sent+dropped+queued {
		t.Errorf("%s: enqueued %v != sent %v + dropped %v + queued %v", when, enq, sent, dropped, queued)
	}
	return enq
}
