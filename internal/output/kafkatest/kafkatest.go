// Package kafkatest runs franz-go's kfake Kafka broker as its own process
// for tests and benchmarks (the test binary re-executed: see ServeIfBroker),
// so that records cross real loopback sockets and an outage is a killed
// process; and reads topics back with franz-go and with kcat (librdkafka).
// Only tests import it.
package kafkatest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const brokerEnv = "GALAGO_TEST_KFAKE_BROKER" // JSON brokerSpec

// Topics are the topics the broker serves (one partition each, so a
// consumer sees a topic in production order).
var Topics = []string{"gala_gopher", "gala_gopher_event", "gala_gopher_metadata"}

// Spec is a broker's settings.
type Spec struct {
	Port     int
	SASL     string // "<mechanism>:<user>:<pass>"
	CertFile string // TLS when set
	KeyFile  string
}

// ServeIfBroker must be called first in the TestMain of a package that
// starts brokers: in the broker process it serves until its stdin closes,
// then exits; in the test process it returns at once.
func ServeIfBroker() {
	spec := os.Getenv(brokerEnv)
	if spec == "" {
		return
	}
	if err := runBroker(spec); err != nil {
		fmt.Fprintln(os.Stderr, "kfake broker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runBroker serves until its stdin closes (or it is killed).
func runBroker(specJSON string) error {
	var spec Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(spec.Port),
		kfake.SeedTopics(1, Topics...),
		kfake.AllowAutoTopicCreation(),
		kfake.ClusterID("galago-test"),
	}
	if spec.SASL != "" {
		parts := strings.SplitN(spec.SASL, ":", 3)
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(parts[0], parts[1], parts[2]))
	}
	if spec.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(spec.CertFile, spec.KeyFile)
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}

// Broker is a running broker process.
type Broker struct {
	// Addr is the broker's host:port on loopback.
	Addr string
	t    testing.TB
	spec Spec
	cmd  *exec.Cmd
	stop func() // closes stdin and waits
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts a broker process on spec.Port (a free port when 0) and waits
// until it listens; it is stopped at the end of the test.
func Start(t testing.TB, spec Spec) *Broker {
	t.Helper()
	if spec.Port == 0 {
		spec.Port = FreePort(t)
	}
	b := &Broker{t: t, spec: spec, Addr: fmt.Sprintf("127.0.0.1:%d", spec.Port)}
	b.start()
	t.Cleanup(func() {
		if b.cmd != nil {
			b.stop()
		}
	})
	return b
}

// Restart starts the broker again on its port after Kill (with no data).
func (b *Broker) Restart() { b.start() }

func (b *Broker) start() {
	b.t.Helper()
	specJSON, _ := json.Marshal(b.spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), brokerEnv+"="+string(specJSON))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && sc.Text() == "ready" {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			b.t.Fatalf("kfake broker on %s did not start", b.Addr)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.t.Fatalf("kfake broker on %s: not ready after 20 s", b.Addr)
	}
	b.cmd = cmd
	b.stop = func() {
		stdin.Close()
		_ = cmd.Wait()
		b.cmd = nil
	}
}

// Kill ends the broker process at once, as a crash would; its data is gone.
func (b *Broker) Kill() {
	b.t.Helper()
	if err := b.cmd.Process.Kill(); err != nil {
		b.t.Fatal(err)
	}
	_ = b.cmd.Wait()
	b.cmd = nil
}

// Consume reads n messages of topic from its start, in order, failing the
// test when they do not all arrive within timeout.
func Consume(t testing.TB, addr, topic string, n int, timeout time.Duration, opts ...kgo.Opt) [][]byte {
	t.Helper()
	out := read(t, addr, topic, timeout, func(out [][]byte, _ []byte) bool { return len(out) >= n }, opts...)
	if len(out) < n {
		t.Fatalf("topic %s: %d of %d messages after %v", topic, len(out), n, timeout)
	}
	return out[:n]
}

// ConsumeUntil reads topic from its start until stop accepts a message.
func ConsumeUntil(t testing.TB, addr, topic string, timeout time.Duration, stop func([]byte) bool) [][]byte {
	t.Helper()
	done := false
	out := read(t, addr, topic, timeout, func(_ [][]byte, last []byte) bool {
		done = done || stop(last)
		return done
	})
	if !done {
		t.Fatalf("topic %s: the awaited message did not arrive within %v (%d others did)", topic, timeout, len(out))
	}
	return out
}

// read reads topic from its start until enough, called after each message
// with those read so far and the last one, says so, or timeout passes.
func read(t testing.TB, addr, topic string, timeout time.Duration, enough func(out [][]byte, last []byte) bool, opts ...kgo.Opt) [][]byte {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out [][]byte
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		})
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if !done {
				out = append(out, r.Value)
				done = enough(out, r.Value)
			}
		})
		if done {
			return out
		}
	}
}

// Kcat reads n messages of topic with kcat (librdkafka), one per line.
// kcat is a test dependency (make test-deps): missing, the test fails.
func Kcat(t testing.TB, addr, topic string, n int) []string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat (Debian package kcat, installed by make test-deps) is required to check wire compatibility with librdkafka: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-C", "-b", addr, "-t", topic, "-o", "beginning",
		"-c", fmt.Sprint(n), "-e", "-q", "-f", "%s\n").Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("kcat %s: %v\n%s", topic, err, stderr)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}
