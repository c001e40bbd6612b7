package proc

import (
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/syscap"
)

// BenchmarkSyscallCost: the cost the syscall statistics add to each
// syscall of an observed process, on the worst case, a 1-byte read of
// /dev/zero in a loop (this process observed): ns/op is one read with
// the programs attached for the sub-items named, bpf-ns/syscall the
// kernel's run time of the programs per syscall (BPF statistics on, as
// galago runs). Compare with the "off" case: the same loop, detached.
func BenchmarkSyscallCost(b *testing.B) {
	probetest.RequirePrivileged(b)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	f, err := os.Open("/dev/zero")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	all := []string{"proc_syscall", "proc_io", "proc_net", "proc_fs", "proc_ioctl"}
	for _, c := range []struct {
		name  string
		items []string
		mode  snoop.Mode // whitelist: this process; blacklist: nothing (every process)
	}{
		{"off", nil, snoop.Whitelist},
		{"proc_syscall", []string{"proc_syscall"}, snoop.Whitelist},
		{"proc_io", []string{"proc_io"}, snoop.Whitelist},
		{"all", all, snoop.Whitelist},
		{"all-blacklist-empty", all, snoop.Blacklist},
	} {
		b.Run(c.name, func(b *testing.B) {
			pids := []int{os.Getpid()}
			if c.mode == snoop.Blacklist {
				pids = nil
			}
			sc, err := syscap.OpenStats(probetest.NewTargets(c.mode, pids...), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			has := map[string]bool{}
			for _, i := range c.items {
				has[i] = true
			}
			fs, classes := classesFor(func(item string) bool { return has[item] })
			if err := sc.SetClasses(fs, classes...); err != nil {
				b.Fatal(err)
			}
			var buf [1]byte
			runtime0 := map[string]time.Duration{}
			count0 := map[string]uint64{}
			progs := sc.Programs()
			for n, p := range progs {
				if st, err := p.Stats(); err == nil {
					runtime0[n], count0[n] = st.Runtime, st.RunCount
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := unix.Read(fd, buf[:]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var rt time.Duration
			for n, p := range progs {
				if st, err := p.Stats(); err == nil {
					rt += st.Runtime - runtime0[n]
					if d := st.RunCount - count0[n]; d > 0 {
						b.ReportMetric(float64(st.Runtime-runtime0[n])/float64(d), n+"-ns/run")
					}
				}
			}
			b.ReportMetric(float64(rt)/float64(b.N), "bpf-ns/syscall")
			if _, err := sc.Drain(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
