package snoop

import (
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
)

// BenchmarkScan measures one re-scan of this host's /proc with a warm
// identity cache, the cost paid every ScanInterval while a proc_name,
// container or pod set is watched: "all" re-reads every process (a host
// where every process is young), "steady" is the usual case where old
// processes are only re-read every recheckEvery.
func BenchmarkScan(b *testing.B) {
	for _, bc := range []struct {
		name    string
		young   time.Duration
		recheck time.Duration
	}{
		{"all", time.Hour, 0},
		{"steady", 0, recheckEvery},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewResolver("/", identity.NewResolver("/"), 0, nil)
			defer r.Close()
			r.young, r.recheck = bc.young, bc.recheck
			r.mu.Lock()
			defer r.mu.Unlock()
			r.scanLocked()
			b.ReportMetric(float64(len(r.procs)), "procs")
			b.ResetTimer()
			defer reportCPU(b)()
			for i := 0; i < b.N; i++ {
				r.scanLocked()
			}
		})
	}
}

// BenchmarkUpdate measures recomputing one set with ten proc_name
// selectors over 2000 processes, the work done per set after each scan.
func BenchmarkUpdate(b *testing.B) {
	r := NewResolver("/", identity.NewResolver("/"), 0, nil)
	defer r.Close()
	comms := []string{"bash", "sshd", "nginx", "postgres", "redis-server", "java", "python3", "kworker/0:1", "containerd-shim", "sleep"}
	for pid := 1; pid <= 2000; pid++ {
		c := comms[pid%len(comms)]
		r.procs[pid] = &proc{Process: identity.Process{PID: pid, PPID: 1, Comm: c, Cmdline: "/usr/bin/" + c + " --flag value"}}
	}
	var sel Selectors
	for _, re := range []string{"^java$", "redis", "^nginx", "mysqld", "mongod", "^kafka", "memcached", "^envoy$", "haproxy", "^node$"} {
		sel.ProcName = append(sel.ProcName, ProcName{Comm: re})
	}
	s := &Set{r: r, sel: compile(sel), ch: make(chan struct{}, 1)}
	s.snap.Store(&snapshot{})
	r.mu.Lock()
	defer r.mu.Unlock()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := 0; i < b.N; i++ {
		s.updateLocked(r)
	}
}

// reportCPU adds the process CPU time (user + system) per op, which a busy
// shared machine inflates less than wall time.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
	}
}
