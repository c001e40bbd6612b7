package logpattern

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: steadier than wall time
// on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportLines reports lines/s of wall time and lines per CPU-second of the
// whole process (GC included): with one goroutine working, the latter is
// lines per second per core.
func reportLines(b *testing.B, lines int, cpu0 time.Duration) {
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(lines)/cpu.Seconds(), "lines/cpu-s")
	}
}

// benchLines is a mix of the shapes of real logs: access-log lines, key=value
// lines, JSON lines, klog lines and a Java trace, with varying values.
func benchLines(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, 0, n)
	for len(out) < n {
		id := r.Uint32()
		switch r.IntN(6) {
		case 0:
			out = append(out, fmt.Appendf(nil, "2024-05-01T12:%02d:%02d.%06dZ INFO [http-%d] GET /api/users/%d/orders 200 %dms from 10.0.%d.%d:%d",
				r.IntN(60), r.IntN(60), r.IntN(1e6), r.IntN(8), id, r.IntN(900), r.IntN(255), r.IntN(255), 1024+r.IntN(60000)))
		case 1:
			out = append(out, fmt.Appendf(nil, `time="2024-05-01T12:00:%02dZ" level=warning msg="slow query" duration=%d.%03ds table=orders user_id=%d`,
				r.IntN(60), r.IntN(5), r.IntN(1000), id))
		case 2:
			out = append(out, fmt.Appendf(nil, `{"ts":%d.%d,"level":"error","msg":"upstream connect failed","upstream":"10.1.%d.%d:8080","attempt":%d,"request_id":"%08x-%04x"}`,
				1714564800+r.IntN(1000), r.IntN(1000), r.IntN(255), r.IntN(255), r.IntN(5), id, id>>16))
		case 3:
			out = append(out, fmt.Appendf(nil, "E0501 12:00:%02d.%06d   %d reflector.go:%d] failed to list *v1.Pod: Get \"https://10.96.0.1:443/api/v1/pods?limit=500\": dial tcp 10.96.0.1:443: i/o timeout",
				r.IntN(60), r.IntN(1e6), 1000+r.IntN(9000), 100+r.IntN(100)))
		case 4:
			out = append(out, fmt.Appendf(nil, "2024-05-01 12:00:%02d DEBUG cache %s hit for key session:%x", r.IntN(60), []string{"L1", "L2"}[r.IntN(2)], id))
		case 5:
			out = append(out,
				fmt.Appendf(nil, "2024-05-01 12:00:%02d ERROR [worker-%d] c.e.Jobs - job %d failed", r.IntN(60), r.IntN(16), id),
				[]byte("java.lang.IllegalStateException: queue closed"),
				[]byte("\tat com.example.Jobs.run(Jobs.java:42)"),
				[]byte("\tat java.base/java.lang.Thread.run(Thread.java:833)"))
		}
	}
	return out[:n]
}

// BenchmarkExtract is the whole per-line path of the applog probe after
// reading: multi-line grouping, level detection, masking and clustering.
// Its lines/s metric is the figure in BENCHMARKS.md.
func BenchmarkExtract(b *testing.B) {
	lines := benchLines(10000)
	c := NewClusterer(256)
	var g Grouper
	counts := map[[2]any]uint64{}
	b.ResetTimer()
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for i := 0; i < b.N; i++ {
		line := lines[i%len(lines)]
		if m, ok := g.Add(line, int64(i)); ok {
			lvl := DetectLevel(m.First)
			counts[[2]any{lvl, c.Add(m.First)}]++
		}
		n++
	}
	reportLines(b, n, cpu0)
	if b.N > 1000 && (c.Len() == 0 || c.Len() > 20) {
		b.Fatalf("%d patterns from the mix", c.Len())
	}
}

func BenchmarkParseCRI(b *testing.B) {
	line := []byte("2024-05-01T12:00:00.123456789Z stdout F 2024-05-01 12:00:00 INFO [main] request served in 12ms")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, _, ok := ParseCRI(line); !ok {
			b.Fatal("bad line")
		}
	}
}
