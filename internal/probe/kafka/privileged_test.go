package kafkaprobe

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
)

// The broker's topics and how many records the client produces to each:
// orders one record per Produce request, payments in batches of
// paymentsBatch records per request, bulk all in one snappy-compressed
// request (tens of KB, as is the Fetch response that returns them: the
// batch headers after the first 4 KiB are read from the whole capture).
const (
	nOrders, nPayments, paymentsBatch, nBulk = 30, 40, 8, 2000
)

// kafkaBroker runs franz-go's kfake as a broker process on a loopback
// port with the three topics, prints "port <n>" and serves until killed.
// On SIGUSR1 it prints its own count of the records on its connections
// (realsrv.KafkaWire: every Produce request received, every Fetch
// response sent, retries included) as "wire <Producer|Consumer> <topic>
// <n>" lines, then "end". With TLS, the count reads the plaintext under
// the broker's crypto/tls.
func kafkaBroker() error {
	var tc *tls.Config
	if certFile := os.Getenv("GALAGO_KAFKA_TLS_CERT"); certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, os.Getenv("GALAGO_KAFKA_TLS_KEY"))
		if err != nil {
			return err
		}
		tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	wire := realsrv.NewKafkaWire()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "payments", "bulk"), kfake.ListenFn(wire.Listen(tc)))
	if err != nil {
		return err
	}
	defer c.Close()
	_, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err != nil {
		return err
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	fmt.Printf("port %s\n", port)
	for range usr1 {
		counts, err := wire.Counts()
		if err != nil {
			fmt.Printf("error %v\n", err)
		}
		for k, n := range counts {
			fmt.Printf("wire %s %d\n", k, n)
		}
		fmt.Println("end")
	}
	return nil
}

// kafkaClient produces nOrders records to orders one by one and
// nPayments to payments in batches, each acknowledged, then with a second
// client (so that no fetch runs while the topics fill) consumes both
// topics back, and prints what the broker acknowledged and what was
// fetched: "count <Producer|Consumer> <topic> <n>" lines.
func kafkaClient() error {
	seed := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:" + os.Getenv("GALAGO_KAFKA_PORT"))}
	if caFile := os.Getenv("GALAGO_KAFKA_TLS_CA"); caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificate in %s", caFile)
		}
		seed = append(seed, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts := map[string]int{}
	prod, err := kgo.NewClient(append(seed, kgo.ProducerBatchCompression(kgo.SnappyCompression()))...)
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
	var bulk []*kgo.Record
	for i := range nBulk {
		// Random hex: snappy keeps the batch tens of KB.
		v := make([]byte, 6)
		_, _ = rand.Read(v)
		bulk = append(bulk, &kgo.Record{Topic: "bulk", Value: []byte(hex.EncodeToString(v) + strconv.Itoa(i))})
	}
	res := prod.ProduceSync(ctx, bulk...)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	counts["Producer bulk"] += len(res)
	cons, err := kgo.NewClient(append(seed, kgo.ConsumeTopics("orders", "payments", "bulk"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cons.Close()
	for counts["Consumer orders"]+counts["Consumer payments"]+counts["Consumer bulk"] < nOrders+nPayments+nBulk {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) { counts["Consumer "+r.Topic]++ })
	}
	cons.PauseFetchTopics("orders", "payments", "bulk")
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

// kafkaEnv is a kfake broker process and the means to run clients.
type kafkaEnv struct {
	ctx    context.Context
	procs  *realsrv.Procs
	helper func(name string, env ...string) *exec.Cmd
	broker *realsrv.Proc
	port   int
}

// startKafka starts the broker (env: its TLS settings, if any).
func startKafka(t *testing.T, env ...string) *kafkaEnv {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sys_exit"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	k := &kafkaEnv{ctx: ctx, procs: realsrv.NewProcs()}
	t.Cleanup(k.procs.StopAll)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	k.helper = func(name string, env ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, self, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), helperEnv+"="+name), env...)
		return cmd
	}
	if k.broker, err = k.procs.Start("kafkabroker", k.helper("kafkabroker", env...)); err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, "the broker's port", func() bool {
		out := k.broker.Output.String()
		if i := strings.Index(out, "port "); i >= 0 {
			if j := strings.IndexByte(out[i:], '\n'); j > 0 {
				k.port, _ = strconv.Atoi(out[i+5 : i+j])
			}
		}
		return k.port > 0
	})
	return k
}

// startProbe starts the feature on the broker's port, its rows tallied.
// Its TLS scan looks at this process only: the broker and the clients run
// the same executable.
func (k *kafkaEnv) startProbe(t *testing.T, cfg probe.Config) (*Probe, *tally, *probetest.Runtime) {
	p := New(WithShared(testShared))
	p.reportEvery = 100 * time.Millisecond
	self := os.Getpid()
	p.tlsScope = func(pid int) bool { return pid == self }
	tl := &tally{port: uint16(k.port), n: map[string]uint64{}}
	p.onFlush = tl.add
	rt := probetest.NewRuntime(t, probetest.ProbeName(p.Name()))
	cfg.Params.KafkaPort = k.port
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	return p, tl, rt
}

// client runs kafkaClient and returns what it counted.
func (k *kafkaEnv) client(t *testing.T, env ...string) map[string]uint64 {
	t.Helper()
	out, err := k.procs.Run(k.ctx, k.helper("kafkaclient", append(env, "GALAGO_KAFKA_PORT="+strconv.Itoa(k.port))...))
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
	return want
}

// wire asks the broker for its count of the records on its connections
// (SIGUSR1) and parses the block it prints.
func (k *kafkaEnv) wire(t *testing.T) map[string]uint64 {
	t.Helper()
	before := strings.Count(k.broker.Output.String(), "end\n")
	if err := k.broker.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var out string
	probetest.WaitFor(t, "the broker's wire counts", func() bool {
		out = k.broker.Output.String()
		return strings.Count(out, "end\n") > before
	})
	out = out[:strings.LastIndex(out, "end\n")]
	if i := strings.LastIndex(out, "end\n"); i >= 0 {
		out = out[i+4:]
	}
	counts := map[string]uint64{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "error ") {
			t.Fatalf("broker's wire count: %s", l)
		}
		if f := strings.Fields(l); len(f) == 4 && f[0] == "wire" {
			n, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil {
				t.Fatalf("broker's wire count: %q: %v", l, err)
			}
			counts[f[1]+" "+f[2]] = n
		}
	}
	return counts
}

// exchange runs a client, checks its counts, and returns the broker's
// count of the records on the wire, which the probe must equal: every
// record the client had acknowledged or fetched was on the wire at least
// once (a retried Produce request, or a Fetch response the client dropped,
// puts more there).
func (k *kafkaEnv) exchange(t *testing.T, env ...string) map[string]uint64 {
	t.Helper()
	client := k.client(t, env...)
	checkClient(t, client)
	wire := k.wire(t)
	t.Logf("broker's wire counts %v, client's %v", wire, client)
	if len(wire) != len(client) {
		t.Fatalf("broker's wire counts %v, client's %v: not the same topics", wire, client)
	}
	for k, n := range client {
		if wire[k] < n {
			t.Fatalf("broker's wire counts %v, client's %v: %s below the client's", wire, client, k)
		}
	}
	return wire
}

// checkClient checks a client's first counts against what it was told to
// produce.
func checkClient(t *testing.T, want map[string]uint64) {
	t.Helper()
	if want["Producer orders"] != nOrders || want["Producer payments"] != nPayments || want["Producer bulk"] != nBulk ||
		want["Consumer orders"] != nOrders || want["Consumer payments"] != nPayments || want["Consumer bulk"] != nBulk {
		t.Fatalf("client counted %v, want %d orders, %d payments and %d bulk each way", want, nOrders, nPayments, nBulk)
	}
}

// expectCounts waits for the tally to equal want, checks that later
// periods add nothing, that nothing was lost and that the table's records
// say the same.
func expectCounts(t *testing.T, k *kafkaEnv, tl *tally, rt *probetest.Runtime, want map[string]uint64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !maps.Equal(tl.snapshot(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("counted %v, want the broker's wire count %v (%d lost)", tl.snapshot(), want, rt.LostCount())
		}
	}
	// Later periods add nothing: each record was counted once.
	time.Sleep(300 * time.Millisecond)
	if got := tl.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("counted %v, want the broker's wire count %v", got, want)
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("%d lost", n)
	}
	fromRecs := map[string]uint64{}
	for _, r := range rt.Records() {
		if r.Table != table.Kafkaprobe {
			t.Fatalf("record of table %s", r.Table.Name)
		}
		if r.Str("server_port") == strconv.Itoa(k.port) && r.Str("server_ip") == "127.0.0.1" && r.Str("client_ip") == "127.0.0.1" {
			fromRecs[r.Str("msg_type")+" "+r.Str("topic")] += uint64(r.Values[table.Kafkaprobe.MustIndex("num")].Num)
		}
	}
	if !maps.Equal(fromRecs, want) {
		t.Errorf("kafkaprobe records sum to %v, want %v", fromRecs, want)
	}
}

// TestKafkaProbePrivileged: a franz-go client produces to three topics of
// a kfake broker (one record per request to one, batches of eight to
// another, 2000 snappy-compressed records in one request to the third,
// fetched back in a response of tens of KB) and consumes them back, both
// processes on loopback, so both ends of every connection are traced.
// The records per msg_type and topic equal the broker's own count of the
// records on its connections (Produce requests received, Fetch responses
// sent), each counted once, and that count is at least what the client had
// acknowledged and fetched; with kafka_port another port nothing is
// counted.
func TestKafkaProbePrivileged(t *testing.T) {
	k := startKafka(t)
	cfg := probe.Config{Params: probe.DefaultParams()}
	p, tl, rt := k.startProbe(t, cfg)
	want := k.exchange(t)
	expectCounts(t, k, tl, rt, want)

	// Another kafka_port: the same traffic is not this feature's.
	cfg.Params.KafkaPort = k.port + 1
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	k.client(t)
	time.Sleep(300 * time.Millisecond)
	if got := tl.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("with kafka_port %d counted %v, want still %v", k.port+1, got, want)
	}
}

// TestKafkaProbeTLSPrivileged: the same exchange over TLS (kfake and
// franz-go with Go's crypto/tls), read from the plaintext the Go TLS
// uprobes capture once support_ssl is 1: counted exactly as plain.
func TestKafkaProbeTLSPrivileged(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "galago kafka test CA")
	certFile, keyFile := testcert.WriteFiles(t, dir, "broker", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	caFile := ca.WriteCA(t, dir, "ca")
	k := startKafka(t, "GALAGO_KAFKA_TLS_CERT="+certFile, "GALAGO_KAFKA_TLS_KEY="+keyFile)
	cfg := probe.Config{Params: probe.DefaultParams()}
	cfg.Params.SupportSSL = 1
	_, tl, rt := k.startProbe(t, cfg)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The broker and the client are this test binary: its Go TLS uprobes.
	start := time.Now()
	probetest.WaitFor(t, "Go TLS uprobes on the test binary", func() bool {
		for _, l := range rt.LogEntries() {
			if l.Msg == "kafka: TLS uprobes attached" && l.Attrs["library"] == "go crypto/tls" && strings.HasSuffix(l.Attrs["file"], self) {
				return true
			}
		}
		return false
	})
	t.Logf("Go TLS uprobes attached in %v", time.Since(start))
	start = time.Now()
	want := k.exchange(t, "GALAGO_KAFKA_TLS_CA="+caFile)
	expectCounts(t, k, tl, rt, want)
	t.Logf("client and counts in %v", time.Since(start))
}
