package ioprobe

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// BenchmarkDecodeFailure is one ring buffer record (a failed completion,
// the only record type).
func BenchmarkDecodeFailure(b *testing.B) {
	raw := rawRec(4000, 7<<20|3, 42, 16384, opWrite, uint8(ioIoReqFlagIO_F_SYNC), 10, "postgres")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeFailure(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergeLat is one disk's per-CPU latency statistics merged, as
// every report does for every disk with requests.
func BenchmarkMergeLat(b *testing.B) {
	per := make([]ioIoLat, 64)
	for i := range per {
		per[i] = cpuLat([]uint64{1000, 3000, 2000}, []uint64{1, 2, 3}, "fio")
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = mergeLat(per)
	}
}

// BenchmarkHooksPrivileged is the kernel-side cost per request: b.N
// O_DIRECT 4 KiB writes to a loop device with every sub-item on, and the
// BPF run time the kernel measured for each hook (<hook>-ns/run: per
// invocation; the hooks see every device's activity, filtered inside, so
// run counts include other disks'). request-path-ns is the sum of the
// per-run times of the three hooks every request and bio pass through.
func BenchmarkHooksPrivileged(b *testing.B) {
	probetest.RequirePrivileged(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	dir := b.TempDir()
	ld := newLoop(b, filepath.Join(dir, "backing"), 64<<20)
	params := probe.DefaultParams()
	params.DevName = ld.name
	rt := probetest.NewRuntime(b)
	p := New(withInterval(time.Second))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitTrace | bitErr | bitCount | bitPage, Params: params}, rt); err != nil {
		b.Fatal(err)
	}
	defer rt.Shutdown(b, p)
	fd, err := unix.Open(ld.node, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	buf := alignedBuf(b, 4096, 1)
	before := progStats(b, p)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := unix.Pwrite(fd, buf, int64(i%4096)*4096); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := progStats(b, p)
	var path float64
	for name, a := range after {
		d := a.Runtime - before[name].Runtime
		n := a.RunCount - before[name].RunCount
		if n == 0 {
			continue
		}
		perRun := float64(d.Nanoseconds()) / float64(n)
		b.ReportMetric(perRun, name+"-ns/run")
		if name == "io_rq_issue" || name == "io_rq_complete" || name == "io_bio_queue" {
			path += perRun
		}
	}
	b.ReportMetric(path, "request-path-ns")
}

func progStats(b *testing.B, p *Probe) map[string]*ebpf.ProgramStats {
	b.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]*ebpf.ProgramStats{}
	for name, prog := range p.coll.Programs {
		st, err := prog.Stats()
		if err != nil {
			b.Fatal(err)
		}
		out[name] = st
	}
	return out
}
