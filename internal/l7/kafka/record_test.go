package kafka

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// The fixtures are recorded from real Kafka-protocol software: franz-go's
// kfake broker, run as its own process (this test binary re-executed, see
// TestKfakeBroker), in front of which l7test's recorder proxies every
// connection; franz-go's kgo client and kcat (librdkafka) drive it.
//
//	GALAGO_L7_RECORD=1 go test -run TestRecord ./internal/l7/kafka/
//
// rewrites testdata/*.chunks (kcat comes from Debian: apt-get install kcat).

const brokerEnv = "GALAGO_KFAKE_BROKER" // "<listen addr> <advertised addr>"

// TestKfakeBroker is the broker process of the recordings: it only runs
// when the recording test starts it.
func TestKfakeBroker(t *testing.T) {
	spec := os.Getenv(brokerEnv)
	if spec == "" {
		t.Skip("the broker process of TestRecord")
	}
	listen, advertise, _ := strings.Cut(spec, " ")
	_, port, _ := net.SplitHostPort(listen)
	var p int
	fmt.Sscan(port, &p)
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(p),
		kfake.SeedTopics(1, "orders", "audit.events"),
		kfake.ClusterID("galago-fixtures"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			return advertised{ln, advertise}, err
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Println("ready")
	// run until the recording test closes our stdin
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// advertised makes kfake advertise the recorder's address in Metadata, so
// that clients reach the broker through the recorder only.
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr {
	ad, _ := net.ResolveTCPAddr("tcp", a.addr)
	return ad
}

type recording struct {
	t    *testing.T
	rec  *l7test.Recorder
	stop func()
}

// startBroker starts the broker process behind a recorder.
func startBroker(t *testing.T) *recording {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	brokerAddr := ln.Addr().String()
	ln.Close()
	rec := l7test.Record(t, brokerAddr)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKfakeBroker$", "-test.v")
	cmd.Env = append(os.Environ(), brokerEnv+"="+brokerAddr+" "+rec.Addr())
	cmd.Stderr = os.Stderr
	broker := childtest.Start(t, cmd, childtest.Name("kfake broker"))
	broker.Await(t, "ready") // after -test.v's lines
	return &recording{t: t, rec: rec, stop: func() { _ = broker.Wait(t) }}
}

func TestRecord(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record the fixtures from kfake, kgo and kcat")
	}
	t.Run("kgo", recordKgo)
	t.Run("kcat", recordKcat)
}

func recordKgo(t *testing.T) {
	r := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// acks=all producer, idempotent (InitProducerId), snappy batches; then
	// four 64 KiB random records, so that the fetch response is big
	prod, err := kgo.NewClient(kgo.SeedBrokers(r.rec.Addr()), kgo.ClientID("galago-producer"),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf(`{"order":%d}`, i))}
		if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		v := make([]byte, 64<<10)
		_, _ = rand.Read(v)
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// a produce to a topic that does not exist, auto-creation off: the
	// metadata answers UNKNOWN_TOPIC_OR_PARTITION until the client gives up
	short, cancelShort := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = prod.ProduceSync(short, &kgo.Record{Topic: "missing", Value: []byte("x")}).FirstErr()
	cancelShort()
	if err == nil {
		t.Fatal("produce to a missing topic succeeded")
	}
	prod.Close()

	// acks=0 producer: no responses to its Produce requests
	noack, err := kgo.NewClient(kgo.SeedBrokers(r.rec.Addr()), kgo.ClientID("galago-noack"),
		kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := noack.ProduceSync(ctx, &kgo.Record{Topic: "audit.events", Value: []byte(fmt.Sprint("event ", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	noack.Flush(ctx)
	time.Sleep(200 * time.Millisecond) // let the broker read them before the close
	noack.Close()

	// a consumer group: find coordinator, join, sync, heartbeat, fetch,
	// commit, leave
	cons, err := kgo.NewClient(kgo.SeedBrokers(r.rec.Addr()), kgo.ClientID("galago-consumer"),
		kgo.ConsumerGroup("galago-group"), kgo.ConsumeTopics("orders", "audit.events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 9 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("fetched %d records: %v", got, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	time.Sleep(time.Second) // heartbeats
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	r.stop()
	writeConns(t, "kgo", r.rec.Connections(),
		"kfake (franz-go pkg/kfake %s, one broker, topics orders and audit.events) recorded through l7test.Record;\n"+
			"client franz-go kgo %s: ProduceSync acks=all (3 small records, 4 random 64 KiB records), produce to the\n"+
			"missing topic \"missing\" (no auto-creation), acks=0 produce of 2 records, consumer group galago-group\n"+
			"(join, sync, heartbeats, fetches, commit, leave)")
}

func recordKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat)")
	}
	r := startBroker(t)
	run := func(stdin string, args ...string) {
		cmd := exec.Command("kcat", append([]string{"-b", r.rec.Addr()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		t.Logf("kcat %s: %s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("kcat %v: %v", args, err)
		}
	}
	run("first\nsecond\nthird\n", "-P", "-t", "orders", "-X", "client.id=kcat-producer")
	run("", "-C", "-t", "orders", "-o", "beginning", "-e", "-X", "client.id=kcat-consumer")
	r.stop()
	out, _ := exec.Command("kcat", "-V").CombinedOutput()
	writeConns(t, "kcat", r.rec.Connections(),
		"kfake (franz-go pkg/kfake %s, one broker, topics orders and audit.events) recorded through l7test.Record;\n"+
			"client %s: kcat -P -t orders (3 lines), then kcat -C -t orders -o beginning -e")
	_ = out
}

// writeConns writes each non-empty recorded connection to
// testdata/<name>-<n>.chunks.
func writeConns(t *testing.T, name string, conns [][]l7test.Segment, comment string) {
	old, _ := filepath.Glob(filepath.Join("testdata", name+"-*.chunks"))
	for _, f := range old {
		os.Remove(f)
	}
	kfakeVer, kgoVer, kcatVer := moduleVersion("github.com/twmb/franz-go/pkg/kfake"), moduleVersion("github.com/twmb/franz-go"), kcatVersion()
	var c string
	if name == "kcat" {
		c = fmt.Sprintf(comment, kfakeVer, kcatVer)
	} else {
		c = fmt.Sprintf(comment, kfakeVer, kgoVer)
	}
	n := 0
	for _, segs := range conns {
		if len(segs) == 0 {
			continue
		}
		path := filepath.Join("testdata", fmt.Sprintf("%s-%d.chunks", name, n))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := l7test.Write(f, c+fmt.Sprintf("\nconnection %d of the recording", n), segs); err != nil {
			t.Fatal(err)
		}
		f.Close()
		n++
	}
	if n == 0 {
		t.Fatal(errors.New("nothing recorded"))
	}
}

func kcatVersion() string {
	out, _ := exec.Command("kcat", "-V").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

func moduleVersion(path string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
