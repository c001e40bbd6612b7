package output

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/output/kafkatest"
	"github.com/galago-project/galago/internal/table"
)

// BenchmarkKafkaBrokerOutage is the kafka metric channel with gala-gopher's
// default kafka section (batch_num_messages 10000,
// queue_buffering_max_messages 100000, queue_buffering_max_kbytes 1 GiB,
// queue_buffering_max_ms 5) under a high metric rate, through a broker
// process that is killed for 60 s and restarted:
//
//   - throughput: records written as fast as the pipeline takes them for
//     3 s with the broker up; messages delivered per second and per second
//     of this process's CPU (the broker is another process);
//   - outage: 20 000 records/s (a store of 1 000 tcp_link-like rows) for
//     60 s with the broker gone: this process's peak RSS (VmHWM, reset
//     before the outage) against its RSS before, what was dropped and why;
//   - recovery: how long after the restart delivery resumes.
//
// It takes about 70 s; BENCHMARKS.md records a run.
func BenchmarkKafkaBrokerOutage(b *testing.B) {
	for range b.N {
		kafkaOutage(b, 60*time.Second)
	}
}

func kafkaOutage(b *testing.B, outage time.Duration) {
	br := kafkatest.Start(b, kafkatest.Spec{})
	p, _, _ := newTestPipeline(b, table.Limits{MaxTables: 8, MaxRecords: 1024, MaxMetrics: 64})
	prod, err := NewKafkaProducer(KafkaOptions{
		Brokers: []string{br.Addr}, BatchNumMessages: 10000, MaxMessages: 100000, MaxBytes: 1048576 * 1024,
		Linger: 5 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	p.AddMetricSink("kafka", NewMetricKafkaSink(prod, "gala_gopher", testHost.UUID))

	var seq atomic.Int64
	record := func() {
		n := seq.Add(1)
		p.Record(linkRecord(t0, strconv.FormatInt(n%1000, 10), "client", strconv.FormatInt(n, 10), float64(n), 1, 5, 70), nil)
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("%s: not within %v", what, timeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Throughput with the broker up.
	cpu0, start := cpuTime(b), time.Now()
	for time.Since(start) < 3*time.Second {
		for range 100 {
			record()
		}
		if q, _ := prod.Queued(); q > 50000 {
			time.Sleep(time.Millisecond) // let the client catch up rather than drop
		}
	}
	written := uint64(seq.Load())
	waitFor("throughput phase delivered", 60*time.Second, func() bool {
		return prod.Sent()+prod.Dropped(KafkaDropQueueFull) >= written
	})
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	b.ReportMetric(float64(prod.Sent())/elapsed.Seconds(), "sent_msgs/s")
	b.ReportMetric(float64(prod.Sent())/cpu.Seconds(), "msgs/cpu_s")

	// The outage at a fixed rate.
	runtime.GC()
	rssBefore := procStatusKB(b, "VmRSS")
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("reset VmHWM: %v", err)
	}
	sentBefore, seqBefore := prod.Sent(), seq.Load()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var slowest atomic.Int64
	wg.Add(1)
	go func() { // 200 records every 10 ms
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s := time.Now()
			for range 200 {
				record()
			}
			if d := int64(time.Since(s)); d > slowest.Load() {
				slowest.Store(d)
			}
		}
	}()
	br.Kill()
	killed := time.Now()
	var maxQueued, maxQueuedBytes int64
	for time.Since(killed) < outage {
		time.Sleep(100 * time.Millisecond)
		q, qb := prod.Queued()
		maxQueued, maxQueuedBytes = max(maxQueued, q), max(maxQueuedBytes, qb)
	}
	outageWritten := seq.Load() - seqBefore
	peak := procStatusKB(b, "VmHWM")
	rssEnd := procStatusKB(b, "VmRSS")
	queueFull, failed := prod.Dropped(KafkaDropQueueFull), prod.Dropped(KafkaDropDeliveryFailed)

	br.Restart()
	restarted, sentAtRestart := time.Now(), prod.Sent()
	waitFor("delivery after the restart", 60*time.Second, func() bool { return prod.Sent() > sentAtRestart })
	resumed := time.Since(restarted)
	close(stop)
	wg.Wait()

	b.ReportMetric(float64(outageWritten)/outage.Seconds(), "outage_records/s")
	b.ReportMetric(float64(rssBefore)/1024, "rss_before_MiB")
	b.ReportMetric(float64(peak)/1024, "peak_rss_MiB")
	b.ReportMetric(float64(rssEnd)/1024, "rss_end_MiB")
	b.ReportMetric(float64(maxQueued), "max_queued_msgs")
	b.ReportMetric(float64(queueFull), "dropped_queue_full")
	b.ReportMetric(float64(failed), "dropped_delivery_failed")
	b.ReportMetric(resumed.Seconds(), "resume_s")
	b.Logf("outage %v: %d records written (%d sent before the kill), max queue %d msgs / %.1f MiB, slowest 200-record burst %v; "+
		"RSS %.1f MiB before, peak %.1f MiB, %.1f MiB at the end; dropped queue_full %d, delivery_failed %d; delivery resumed %v after the restart",
		outage, outageWritten, sentBefore, maxQueued, float64(maxQueuedBytes)/(1<<20), time.Duration(slowest.Load()),
		float64(rssBefore)/1024, float64(peak)/1024, float64(rssEnd)/1024, queueFull, failed, resumed.Round(time.Millisecond))
}

// cpuTime is this process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusKB reads a kB field of /proc/self/status.
func procStatusKB(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field+":")); ok {
			var kb int64
			if _, err := fmt.Sscanf(string(rest), "%d kB", &kb); err != nil {
				b.Fatalf("%s: %v", field, err)
			}
			return kb
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
