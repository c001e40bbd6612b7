package bpfrt_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfrttest"
	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

const (
	childEnv     = "GALAGO_BPFRT_TEST_GETPPID"
	childWaitEnv = "GALAGO_BPFRT_TEST_WAIT"
)

// TestMain doubles as the child process of the filter tests: it calls
// getppid the number of times in childEnv and exits; with childWaitEnv it
// first waits for a byte on stdin.
func TestMain(m *testing.M) {
	if n := os.Getenv(childEnv); n != "" {
		k, _ := strconv.Atoi(n)
		if os.Getenv(childWaitEnv) != "" {
			var b [1]byte
			_, _ = os.Stdin.Read(b[:])
		}
		for range k {
			unix.Getppid()
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// filterObjects are bpfrttest's GALAGO_FILTER maps and programs.
func filterObjects(objs *bpfrttest.Objects) bpfrt.FilterObjects {
	return bpfrt.FilterObjects{
		Mode: objs.GalagoFilterCfg, TGIDs: objs.FilterTgids, Cgroups: objs.FilterCgroups,
		Pending: objs.FilterPending, Decided: objs.FilterDecided, Lost: objs.FilterPendingLost,
		ForkProgram: objs.GalagoFilterFork, ExecProgram: objs.GalagoFilterExec,
	}
}

func newFilterSync(t *testing.T, objs *bpfrttest.Objects, onLost func(uint64)) *bpfrt.FilterSync {
	t.Helper()
	fs, err := bpfrt.NewFilterSync(filterObjects(objs), onLost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// load loads bpfrttest with a ring of ringSize bytes and the given wake-up
// threshold (bytes; 0 = kernel default).
func load(t *testing.T, ringSize uint32, wakeup uint64) *bpfrttest.Objects {
	t.Helper()
	spec, err := bpfrttest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps["events"].MaxEntries = ringSize
	// The filter maps as every galago object loads them.
	if err := bpfrt.AllocOnInsert(spec, bpfrt.FilterMaps...); err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables[bpfrt.WakeupBytesVar].Set(wakeup); err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables["target_syscall"].Set(uint64(unix.SYS_GETPPID)); err != nil {
		t.Fatal(err)
	}
	var objs bpfrttest.Objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

func emit(t *testing.T, objs *bpfrttest.Objects, n int) {
	t.Helper()
	for range n {
		if _, err := objs.TestEmit.Run(&ebpf.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// collector gathers decoded records from a Reader.
type collector struct {
	mu   sync.Mutex
	recs []bpfrttest.Event
	lost uint64
}

func (c *collector) handle(raw []byte) error {
	var e bpfrttest.Event
	if len(raw) != 56 {
		return fmt.Errorf("record of %d bytes", len(raw))
	}
	e.Seq = leU64(raw[0:])
	e.Tgid = uint32(leU64(raw[8:]))
	e.CgroupId = leU64(raw[16:])
	c.mu.Lock()
	c.recs = append(c.recs, e)
	c.mu.Unlock()
	return nil
}

func leU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

func newReader(t *testing.T, objs *bpfrttest.Objects, c *collector, flush time.Duration) *bpfrt.Reader {
	t.Helper()
	return newWakeReader(t, objs, c, flush, bpfrt.Wakeup{})
}

// wakeReader loads a 64 KiB ring that wakes its reader once records
// 56-byte records are pending, and a reader for it that no deadline wakes.
func wakeReader(t *testing.T, records int) (*bpfrttest.Objects, *collector, *bpfrt.Reader) {
	t.Helper()
	const size = 1 << 16
	wake := bpfrt.Wakeup{Records: records, RecordSize: 56}
	objs := load(t, size, wake.Bytes(size))
	var c collector
	return objs, &c, newWakeReader(t, objs, &c, time.Hour, wake)
}

// newWakeReader is newReader for a ring loaded with wake's threshold.
func newWakeReader(t *testing.T, objs *bpfrttest.Objects, c *collector, flush time.Duration, wake bpfrt.Wakeup) *bpfrt.Reader {
	t.Helper()
	rd, err := bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring: objs.Events, Lost: objs.LostEvents, Handle: c.handle, Wakeup: wake,
		OnLost:        func(n uint64) { c.lost += n },
		OnError:       func(err error) { t.Error(err) },
		FlushInterval: flush,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	return rd
}

// TestRingLossPrivileged fills a one-page ring without reading it: every
// record that did not fit must be counted lost, exactly.
func TestRingLossPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	page := os.Getpagesize()
	objs := load(t, uint32(page), 0)
	var c collector
	rd := newReader(t, objs, &c, time.Second)

	const triggered = 1000
	emit(t, objs, triggered)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains what is there and returns
	if err := rd.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// 56-byte records + 8-byte header; the kernel refuses a reservation
	// that would make the pending data reach the ring size (> mask).
	capacity := (page - 1) / 64
	if len(c.recs) != capacity {
		t.Errorf("delivered %d, want the ring's capacity %d", len(c.recs), capacity)
	}
	if c.lost != uint64(triggered-len(c.recs)) {
		t.Errorf("lost %d, want triggered %d - delivered %d = %d", c.lost, triggered, len(c.recs), triggered-len(c.recs))
	}
	total, err := rd.LostTotal()
	if err != nil || total != c.lost {
		t.Errorf("LostTotal %d (%v), reported %d", total, err, c.lost)
	}
	for i, r := range c.recs {
		if r.Seq != uint64(i+1) || r.Tgid != uint32(os.Getpid()) {
			t.Fatalf("record %d: seq %d tgid %d, want seq %d tgid %d", i, r.Seq, r.Tgid, i+1, os.Getpid())
		}
	}
	var runs uint64
	if err := objs.Runs.Lookup(uint32(0), &runs); err != nil || runs != triggered {
		t.Errorf("BPF saw %d runs (%v), want %d", runs, err, triggered)
	}

	// The space is free again: the next records are delivered, the loss
	// reported so far is not reported twice.
	c.lost, c.recs = 0, nil
	emit(t, objs, 3)
	if err := rd.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.recs) != 3 || c.lost != 0 {
		t.Errorf("after drain: delivered %d lost %d, want 3 and 0", len(c.recs), c.lost)
	}
}

// TestRingWakeupPrivileged: records pending when Run starts are read at
// once; below the threshold the BPF side does not wake a parked reader;
// reaching it does; and the deadline poll delivers what sits below it.
func TestRingWakeupPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs, c, rd := wakeReader(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	emit(t, objs, 4)
	done := startRun(rd, ctx)
	waitCount(t, c, 4)
	time.Sleep(50 * time.Millisecond) // parked

	emit(t, objs, 4)
	time.Sleep(300 * time.Millisecond)
	if n := c.count(); n != 4 {
		t.Errorf("reader woken below the threshold: %d records, want the 4 pending at start", n)
	}
	emit(t, objs, 1)
	waitCount(t, c, 9)
	cancel()
	endRun(t, done, "cancel")

	// Never woken, but polled every 20ms.
	objs = load(t, 1<<16, 1<<30)
	c = &collector{}
	rd = newReader(t, objs, c, 20*time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = startRun(rd, ctx)
	emit(t, objs, 7)
	waitCount(t, c, 7)
	cancel()
	endRun(t, done, "cancel")
}

// TestRingWakeupBeforeParkPrivileged: a wake-up that comes after a drain
// found the ring empty and before the reader parks is not lost (the
// network poller forgets readiness that came before a wait begins; the
// reader must see the records instead of waiting out its deadline).
func TestRingWakeupBeforeParkPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs, c, rd := wakeReader(t, 4)
	emitted := false
	emitErr := make(chan error, 1)
	bpfrt.SetBeforePark(rd, func() {
		if emitted || c.count() != 4 {
			return
		}
		emitted = true
		var err error
		for range 4 {
			if _, err = objs.TestEmit.Run(&ebpf.RunOptions{}); err != nil {
				break
			}
		}
		emitErr <- err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := startRun(rd, ctx)
	emit(t, objs, 4)
	waitCount(t, c, 8)
	if err := <-emitErr; err != nil {
		t.Fatal(err)
	}
	cancel()
	endRun(t, done, "cancel")
}

// TestRingParkedEndPrivileged: cancelling ctx ends a parked Run at once,
// after draining; so does Close.
func TestRingParkedEndPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs, c, rd := wakeReader(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := startRun(rd, ctx)
	time.Sleep(20 * time.Millisecond) // parked
	emit(t, objs, 3)
	cancel()
	endRun(t, done, "cancel, parked")
	if n := c.count(); n != 3 {
		t.Errorf("drained %d records on cancel, want 3", n)
	}
	done = startRun(rd, context.Background())
	time.Sleep(20 * time.Millisecond)
	rd.Close()
	endRun(t, done, "Close, parked")
}

// startRun runs rd.Run(ctx) on its own goroutine; endRun waits for it.
func startRun(rd *bpfrt.Reader, ctx context.Context) chan error {
	done := make(chan error, 1)
	go func() { done <- rd.Run(ctx) }()
	return done
}

// endRun fails the test unless Run returned nil within 5 s; what says
// what should have ended it.
func endRun(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Run did not return after %s", what)
	}
}

func waitCount(t *testing.T, c *collector, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.count() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.count(); n != want {
		t.Fatalf("delivered %d, want %d", n, want)
	}
}

// TestStatsPrivileged: the kernel's run count of a program equals the
// number of times the test ran it.
func TestStatsPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs := load(t, 1<<16, 0)
	s := bpfrt.NewStats()
	if err := s.Register("bpfrttest", map[string]*ebpf.Program{"test_emit": objs.TestEmit}); err != nil {
		t.Fatal(err)
	}
	defer s.Unregister("bpfrttest")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	emit(t, objs, 250)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["probe"] != "bpfrttest" || labels["program"] != "test_emit" {
				t.Errorf("%s has labels %v", mf.GetName(), labels)
			}
			got[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	if len(got) != 2 || got["galago_bpf_run_count_total"] != 250 {
		t.Errorf("metrics %v, want galago_bpf_run_count_total 250", got)
	}
	if secs := got["galago_bpf_run_seconds_total"]; secs <= 0 || secs > 1 {
		t.Errorf("run time %vs for 250 runs of a tiny program", secs)
	}
}

// targets is a snoop.Targets the test changes.
type targets struct {
	mu      sync.Mutex
	mode    snoop.Mode
	pids    []int
	cgroups []uint64
	ch      chan struct{}
}

func (t *targets) Mode() snoop.Mode { t.mu.Lock(); defer t.mu.Unlock(); return t.mode }
func (t *targets) Observed(pid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.pids, pid) == (t.mode == snoop.Whitelist)
}
func (t *targets) PIDs() []int { t.mu.Lock(); defer t.mu.Unlock(); return slices.Clone(t.pids) }
func (t *targets) CgroupIDs() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.cgroups)
}
func (t *targets) Labels(int) map[string]string { return nil }
func (t *targets) Changed() <-chan struct{}     { return t.ch }

func (t *targets) set(mode snoop.Mode, pids []int, cgroups []uint64) {
	t.mu.Lock()
	t.mode, t.pids, t.cgroups = mode, pids, cgroups
	t.mu.Unlock()
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// TestFilterPrivileged drives getppid from this process and from a child
// (alone in a new cgroup) under each filter setting, and counts what the
// BPF side let through per process.
func TestFilterPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs := load(t, 1<<16, 0)
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: objs.TestSysEnter})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fs := newFilterSync(t, objs, nil)

	mnt, err := bpfrt.HaveCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	cgDir := filepath.Join(mnt, fmt.Sprintf("galago-bpfrt-test-%d", os.Getpid()))
	if err := os.Mkdir(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(cgDir)
	var st unix.Stat_t
	if err := unix.Stat(cgDir, &st); err != nil {
		t.Fatal(err)
	}
	childCgroup := st.Ino
	self := os.Getpid()

	const calls = 20
	for _, tc := range []struct {
		name        string
		targets     snoop.Targets
		self, child int
	}{
		{"whitelist self", &targets{mode: snoop.Whitelist, pids: []int{self}}, calls, 0},
		{"blacklist self", &targets{mode: snoop.Blacklist, pids: []int{self}}, 0, calls},
		{"whitelist child cgroup", &targets{mode: snoop.Whitelist, cgroups: []uint64{childCgroup}}, 0, calls},
		{"blacklist child cgroup", &targets{mode: snoop.Blacklist, cgroups: []uint64{childCgroup}}, calls, 0},
		{"whitelist nothing", &targets{mode: snoop.Whitelist}, 0, 0},
		{"blacklist nothing", &targets{mode: snoop.Blacklist}, calls, calls}, // filter off: no lookups
		{"off", nil, calls, calls},
		{"whitelist both", &targets{mode: snoop.Whitelist, pids: []int{self}, cgroups: []uint64{childCgroup}}, calls, calls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := fs.Sync(tc.targets); err != nil {
				t.Fatal(err)
			}
			if tc.name == "blacklist nothing" {
				var mode uint32
				if err := objs.GalagoFilterCfg.Get(&mode); err != nil || mode != 0 {
					t.Errorf("filter mode %d (%v), want 0 (off) for an empty blacklist", mode, err)
				}
			}
			var c collector
			rd := newReader(t, objs, &c, 10*time.Millisecond)

			for range calls {
				unix.Getppid()
			}
			child := runChild(t, cgDir, calls)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := rd.Run(ctx); err != nil {
				t.Fatal(err)
			}
			rd.Close()
			got := map[uint32]int{}
			for _, r := range c.recs {
				got[r.Tgid]++
				if r.Tgid == uint32(child) && r.CgroupId != childCgroup {
					t.Errorf("child record in cgroup %d, want %d", r.CgroupId, childCgroup)
				}
			}
			if got[uint32(self)] != tc.self || got[uint32(child)] != tc.child {
				t.Errorf("self %d child %d records, want %d and %d", got[uint32(self)], got[uint32(child)], tc.self, tc.child)
			}
			if c.lost != 0 {
				t.Errorf("lost %d", c.lost)
			}
		})
	}
}

// runChild runs this test binary as a child in cgroup dir, calling getppid
// n times, and returns its pid once it has exited.
func runChild(t *testing.T, dir string, n int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, n))
	cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	return cmd.Process.Pid
}

// TestFilterSyncRunPrivileged: Run follows Changed, writing only the diff.
func TestFilterSyncRunPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs := load(t, 1<<16, 0)
	fs := newFilterSync(t, objs, nil)
	tg := &targets{mode: snoop.Whitelist, pids: []int{1, 2, 3}, cgroups: []uint64{7}, ch: make(chan struct{}, 1)}
	if err := fs.Sync(tg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fs.Run(ctx) }()
	waitMaps(t, objs, 1, []uint32{1, 2, 3}, []uint64{7})

	tg.set(snoop.Blacklist, []int{3, 4}, nil)
	waitMaps(t, objs, 2, []uint32{3, 4}, nil)
	tg.set(snoop.Whitelist, []int{4}, []uint64{8, 9})
	waitMaps(t, objs, 1, []uint32{4}, []uint64{8, 9})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitMaps(t *testing.T, objs *bpfrttest.Objects, mode uint32, tgids []uint32, cgroups []uint64) {
	t.Helper()
	var gotMode uint32
	var gotT []uint32
	var gotC []uint64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		gotT, gotC = keys[uint32](objs.FilterTgids), keys[uint64](objs.FilterCgroups)
		_ = objs.GalagoFilterCfg.Get(&gotMode)
		if gotMode == mode && slices.Equal(gotT, tgids) && slices.Equal(gotC, cgroups) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("maps: mode %d tgids %v cgroups %v; want %d %v %v", gotMode, gotT, gotC, mode, tgids, cgroups)
}

func keys[K uint32 | uint64](m *ebpf.Map) []K {
	var out []K
	var k K
	var v uint8
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// dynTargets is a whitelist that follows running processes (a Decider):
// the test says which processes it lists and when it classified them.
type dynTargets struct {
	targets
	dynamic bool
	decided map[int]uint64
}

func (d *dynTargets) Dynamic() bool { return d.dynamic }
func (d *dynTargets) DecidedAt(pid int) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.decided[pid]
}

func (d *dynTargets) decide(pid int, at uint64, listed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.decided == nil {
		d.decided = map[int]uint64{}
	}
	d.decided[pid] = at
	if listed {
		d.pids = append(d.pids, pid)
	}
}

// waitingChild starts this test binary as a child that calls getppid n
// times once it reads a byte on stdin.
type waitingChild struct{ *childtest.Child }

func startWaitingChild(t *testing.T, n int) *waitingChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, n), childWaitEnv+"=1")
	return &waitingChild{childtest.Start(t, cmd)}
}

func (c *waitingChild) pid() int { return c.Pid() }

func (c *waitingChild) run(t *testing.T) {
	t.Helper()
	c.Write(t, []byte{1})
	c.Exit(t)
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// TestFilterPendingPrivileged: under a whitelist that follows running
// processes, a process that forks and execs is observed from its first
// syscall, before user space has classified it; once classified it is
// observed only if listed; a classification older than its last exec does
// not count; without the dynamic flag nothing is pending; exited processes'
// entries are forgotten.
func TestFilterPendingPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs := load(t, 1<<16, 0)
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: objs.TestSysEnter})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var lost uint64
	fs := newFilterSync(t, objs, func(n uint64) { lost += n })
	const calls = 20
	count := func(t *testing.T, fn func()) map[uint32]int {
		t.Helper()
		var c collector
		rd := newReader(t, objs, &c, 10*time.Millisecond)
		fn()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := rd.Run(ctx); err != nil {
			t.Fatal(err)
		}
		rd.Close()
		got := map[uint32]int{}
		for _, r := range c.recs {
			got[r.Tgid]++
		}
		return got
	}
	tg := &dynTargets{targets: targets{mode: snoop.Whitelist}, dynamic: true}
	if err := fs.Sync(tg); err != nil {
		t.Fatal(err)
	}
	self := uint32(os.Getpid())

	// Not classified yet: observed from the start.
	c1 := startWaitingChild(t, calls)
	got := count(t, func() { c1.run(t) })
	if got[uint32(c1.pid())] != calls || got[self] != 0 {
		t.Errorf("pending child: %d records, self %d; want %d and 0", got[uint32(c1.pid())], got[self], calls)
	}

	// Classified after its exec and not listed: not observed.
	c2 := startWaitingChild(t, calls)
	time.Sleep(50 * time.Millisecond) // let its exec happen
	tg.decide(c2.pid(), monoNow(), false)
	// Classified and listed: observed.
	c3 := startWaitingChild(t, calls)
	time.Sleep(50 * time.Millisecond)
	tg.decide(c3.pid(), monoNow(), true)
	// Classified before its exec: still pending.
	c4 := startWaitingChild(t, calls)
	tg.decide(c4.pid(), 1, false)
	if err := fs.Sync(tg); err != nil {
		t.Fatal(err)
	}
	got = count(t, func() { c2.run(t); c3.run(t); c4.run(t) })
	if got[uint32(c2.pid())] != 0 || got[uint32(c3.pid())] != calls || got[uint32(c4.pid())] != calls {
		t.Errorf("classified-out %d, listed %d, stale classification %d records; want 0, %d, %d",
			got[uint32(c2.pid())], got[uint32(c3.pid())], got[uint32(c4.pid())], calls, calls)
	}

	// Exited: their entries go at the next sync.
	for _, c := range []*waitingChild{c1, c2, c3, c4} {
		tg.decide(c.pid(), math.MaxUint64, false)
	}
	if err := fs.Sync(tg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*waitingChild{c1, c2, c3, c4} {
		var v uint64
		if objs.FilterPending.Lookup(uint32(c.pid()), &v) == nil || objs.FilterDecided.Lookup(uint32(c.pid()), &v) == nil {
			t.Errorf("pid %d: pending entries left after exit", c.pid())
		}
	}

	// Not dynamic (e.g. proc_id only): a new process is not pending.
	tg.dynamic = false
	if err := fs.Sync(tg); err != nil {
		t.Fatal(err)
	}
	c5 := startWaitingChild(t, calls)
	got = count(t, func() { c5.run(t) })
	if got[uint32(c5.pid())] != 0 {
		t.Errorf("without the dynamic flag a new process is observed: %d records", got[uint32(c5.pid())])
	}
	if lost != 0 {
		t.Errorf("%d pending marks lost", lost)
	}
}

// TestBioSweepPrivileged: a LostCounter with a bio.h table deletes exactly
// the submissions older than BioStale, reports them lost with the
// counter's own growth, and keeps the bios still in flight.
func TestBioSweepPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	bios, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer bios.Close()
	counter, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	now, err := bpfrt.MonotonicNow()
	if err != nil {
		t.Fatal(err)
	}
	for bio, age := range map[uint64]time.Duration{1: 2 * bpfrt.BioStale, 2: bpfrt.BioStale + time.Second, 3: time.Second, 4: 0} {
		if err := bios.Put(bio, bpfrt.BioStart{TS: now - uint64(age), Owner: bio}); err != nil {
			t.Fatal(err)
		}
	}
	per := make([]uint64, ebpf.MustPossibleCPU())
	per[0] = 5
	if err := counter.Put(uint32(0), per); err != nil {
		t.Fatal(err)
	}
	var lost uint64
	c := bpfrt.LostCounter{Map: counter, Bios: bios, OnLost: func(n uint64) { lost += n }}
	if err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	if lost != 5+2 {
		t.Errorf("lost %d, want the counter's 5 and 2 stale bios", lost)
	}
	var left []uint64
	var k uint64
	var v bpfrt.BioStart
	for it := bios.Iterate(); it.Next(&k, &v); {
		left = append(left, k)
	}
	slices.Sort(left)
	if !slices.Equal(left, []uint64{3, 4}) {
		t.Errorf("bios left %v, want the two in flight [3 4]", left)
	}
}

// TestRingClosePrivileged: Close must not wait for a handler (a handler
// may wait for whoever closes: a probe's Stop holding the lock Handle
// takes); Run returns after the record it is handling, with no record
// handled after Close. Closing a waiting reader, and Run after Close,
// return at once.
func TestRingClosePrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	objs := load(t, 1<<16, 0)
	entered, release := make(chan []byte, 1), make(chan struct{})
	var handled int
	rd, err := bpfrt.NewReader(bpfrt.ReaderConfig{Ring: objs.Events, Lost: objs.LostEvents, FlushInterval: 5 * time.Millisecond,
		Handle: func(raw []byte) error {
			handled++
			if handled == 1 {
				entered <- raw
				<-release // the closer goes first
				if len(raw) != 56 || leU64(raw) != 1 {
					t.Errorf("record after Close: %d bytes, seq %d", len(raw), leU64(raw))
				}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := startRun(rd, context.Background())
	emit(t, objs, 3)
	<-entered
	closed := make(chan struct{})
	go func() { rd.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the handler")
	}
	close(release)
	endRun(t, done, "Close")
	if handled != 1 {
		t.Errorf("handled %d records after Close, want only the one in progress", handled)
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rd.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	idle := newReader(t, load(t, 1<<16, 0), &collector{}, time.Hour)
	done = startRun(idle, context.Background())
	time.Sleep(20 * time.Millisecond) // blocked in its wait
	idle.Close()
	endRun(t, done, "Close, waiting")
}
