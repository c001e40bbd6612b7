package snoop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
)

// fakeHost is a host root with a /proc tree, runtime state and a cgroup2
// tree that tests change while a Resolver watches it.
type fakeHost struct {
	t       *testing.T
	root    string
	cgroup2 string
	ids     *identity.CachingResolver
}

type fakeProc struct {
	pid, ppid     int
	comm, cmdline string
	cgroup        string // cgroup2 path
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), cgroup2: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(h.root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.ids = identity.NewResolver(h.root, identity.WithCgroup2Mount(h.cgroup2))
	return h
}

func (h *fakeHost) write(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) add(p fakeProc) {
	h.t.Helper()
	if p.cgroup == "" {
		p.cgroup = "/"
	}
	dir := fmt.Sprintf("proc/%d/", p.pid)
	h.write(dir+"stat", fmt.Sprintf("%d (%s) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", p.pid, p.comm, p.ppid, p.pid, p.pid, 1000+p.pid))
	h.write(dir+"cmdline", strings.ReplaceAll(p.cmdline, " ", "\x00")+"\x00")
	h.write(dir+"cgroup", "0::"+p.cgroup+"\n")
	if err := os.MkdirAll(filepath.Join(h.cgroup2, p.cgroup), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) remove(pid int) {
	h.t.Helper()
	if err := os.RemoveAll(filepath.Join(h.root, "proc", fmt.Sprint(pid))); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) cgroupID(path string) uint64 {
	h.t.Helper()
	fi, err := os.Stat(filepath.Join(h.cgroup2, path))
	if err != nil {
		h.t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// runcState writes a runc state.json with CRI annotations.
func (h *fakeHost) runcState(id string, ann map[string]string) {
	h.t.Helper()
	var labels []string
	for k, v := range ann {
		labels = append(labels, k+"="+v)
	}
	b, err := json.Marshal(map[string]any{"id": id, "config": map[string]any{"labels": labels}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.write("run/runc/"+id+"/state.json", string(b))
}

func (h *fakeHost) resolver(self int, log *slog.Logger) *Resolver {
	r := NewResolver(h.root, h.ids, self, log)
	h.t.Cleanup(r.Close)
	return r
}

// waitFor polls cond until it holds or a second has passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 1s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func changed(s *Set) bool {
	select {
	case <-s.Changed():
		return true
	default:
		return false
	}
}

const (
	cidA = "aaaa000000000000000000000000000000000000000000000000000000000001"
	cidB = "bbbb000000000000000000000000000000000000000000000000000000000002"
	cidC = "cccc000000000000000000000000000000000000000000000000000000000003"
	podX = "0f9c2a3e-1111-2222-3333-444455556666"
)

func TestWatchProcName(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "/sbin/init"})
	h.add(fakeProc{pid: 10, ppid: 1, comm: "galago", cmdline: "galago -c x"})
	h.add(fakeProc{pid: 11, ppid: 10, comm: "redis-server", cmdline: "redis-server :1"})   // galago's child
	h.add(fakeProc{pid: 12, ppid: 11, comm: "redis-server", cmdline: "redis-server :2"})   // and grandchild
	h.add(fakeProc{pid: 20, ppid: 1, comm: "redis-server", cmdline: "redis-server :6379"}) // match
	h.add(fakeProc{pid: 21, ppid: 1, comm: "redis-cli", cmdline: "redis-cli -p 6379"})     // comm match, no cmdline match
	h.add(fakeProc{pid: 22, ppid: 1, comm: "java", cmdline: "java -cp x org.kafka.Kafka"})
	h.add(fakeProc{pid: 23, ppid: 1, comm: "java", cmdline: "java -cp x org.Other"})

	r := h.resolver(10, nil)
	s := r.Watch(Selectors{ProcName: []ProcName{
		{Comm: "redis", Cmdline: "server", Label: map[string]string{"app": "redis"}},
		{Comm: "^java$", Cmdline: "kafka", Label: map[string]string{"app": "kafka"}},
		{Comm: "java"}, // unlabelled, after the kafka one
	}}, Whitelist)
	defer s.Close()

	if got := s.PIDs(); !slices.Equal(got, []int{20, 22, 23}) {
		t.Errorf("PIDs = %v, want [20 22 23] (galago and its descendants excluded)", got)
	}
	if got := s.Labels(20)["app"]; got != "redis" {
		t.Errorf("Labels(20) = %v", s.Labels(20))
	}
	if got := s.Labels(22)["app"]; got != "kafka" {
		t.Errorf("Labels(22) = %v, the first matching selector's label", s.Labels(22))
	}
	if l := s.Labels(23); l != nil {
		t.Errorf("Labels(23) = %v, want none", l)
	}
	if !s.Observed(20) || s.Observed(21) || s.Observed(11) {
		t.Error("Observed disagrees with PIDs")
	}
	if got := s.CgroupIDs(); len(got) != 0 {
		t.Errorf("CgroupIDs = %v for a proc_name set", got)
	}

	// A process that starts after Watch is picked up by the next scan.
	changed(s)
	h.add(fakeProc{pid: 30, ppid: 1, comm: "redis-server", cmdline: "redis-server :7000"})
	waitFor(t, "new process observed", func() bool { return s.Observed(30) })
	if !changed(s) {
		t.Error("Changed not signalled for a new process")
	}
	// A process that exec's into a matching comm is picked up too.
	h.add(fakeProc{pid: 31, ppid: 1, comm: "bash", cmdline: "bash"})
	time.Sleep(2 * ScanInterval)
	if s.Observed(31) {
		t.Fatal("bash observed")
	}
	h.add(fakeProc{pid: 31, ppid: 1, comm: "redis-server", cmdline: "redis-server :7001"})
	waitFor(t, "exec'd process observed", func() bool { return s.Observed(31) })
}

// TestExitedMembers: a member that exits stays observed (with its label)
// for ExitGrace and in PIDs for KernelExitGrace, so what it leaves behind
// is still attributed; a member that stops matching (exec into another
// program) leaves at once; a blacklisted process that exits stays
// excluded.
func TestExitedMembers(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	h.add(fakeProc{pid: 30, ppid: 1, comm: "redis-server", cmdline: "redis-server :7000"})
	h.add(fakeProc{pid: 31, ppid: 1, comm: "redis-server", cmdline: "redis-server :7001"})
	r := h.resolver(0, nil)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r.now.Store(&clock)
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "redis", Label: map[string]string{"app": "r"}}}}, Whitelist)
	defer s.Close()
	black := r.Watch(Selectors{ProcName: []ProcName{{Comm: "redis"}}}, Blacklist)
	defer black.Close()
	if !slices.Equal(s.PIDs(), []int{30, 31}) {
		t.Fatalf("PIDs %v", s.PIDs())
	}

	h.remove(30)
	r.NotifyExit(30)
	if !s.Observed(30) || s.Labels(30)["app"] != "r" || !slices.Equal(s.PIDs(), []int{30, 31}) {
		t.Errorf("just exited: observed %v labels %v PIDs %v", s.Observed(30), s.Labels(30), s.PIDs())
	}
	if black.Observed(30) {
		t.Error("an exited blacklisted process is observed")
	}
	// Exec into something else: no longer a member, at once.
	h.add(fakeProc{pid: 31, ppid: 1, comm: "bash", cmdline: "bash"})
	r.Notify(identity.Process{PID: 31})
	if s.Observed(31) || slices.Contains(s.PIDs(), 31) {
		t.Error("a process that stopped matching is still a member")
	}

	// Past KernelExitGrace it leaves PIDs (at the next update), past
	// ExitGrace it is not observed any more.
	advance(KernelExitGrace + time.Second)
	h.add(fakeProc{pid: 40, ppid: 1, comm: "redis-server", cmdline: "redis-server"})
	r.Notify(identity.Process{PID: 40})
	if !slices.Equal(s.PIDs(), []int{40}) || !s.Observed(30) {
		t.Errorf("after KernelExitGrace: PIDs %v, observed(30) %v", s.PIDs(), s.Observed(30))
	}
	advance(ExitGrace)
	if s.Observed(30) || s.Labels(30) != nil || !black.Observed(30) {
		t.Error("still a member after ExitGrace")
	}
}

// TestNotifyGoneProcess: a process that exited before the resolver read
// /proc is classified from what its exec event carried (comm, cmdline):
// a match becomes an exited member, and DecidedAt says it has exited.
func TestNotifyGoneProcess(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	r := h.resolver(0, nil)
	r.interval = time.Hour // only Notify can change the set
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^curl$", Cmdline: "example"}}}, Whitelist)
	defer s.Close()
	before := monoNow()
	if r.DecidedAt(77) != 0 {
		t.Error("an unseen pid counts as decided")
	}
	r.Notify(identity.Process{PID: 77, PPID: 1, Comm: "curl", Cmdline: "curl -s http://example", StartTime: 9})
	r.Notify(identity.Process{PID: 78, PPID: 1, Comm: "curl", Cmdline: "curl -s http://other", StartTime: 9})
	r.NotifyExit(77)
	r.NotifyExit(78)
	if !s.Observed(77) || s.Observed(78) || !slices.Equal(s.PIDs(), []int{77}) {
		t.Errorf("observed 77 %v 78 %v, PIDs %v", s.Observed(77), s.Observed(78), s.PIDs())
	}
	if r.DecidedAt(77) != math.MaxUint64 || s.DecidedAt(78) != math.MaxUint64 {
		t.Error("gone processes not reported exited")
	}
	// A live process is decided as of its last read.
	h.add(fakeProc{pid: 80, ppid: 1, comm: "curl", cmdline: "curl example"})
	r.Notify(identity.Process{PID: 80})
	if at, after := r.DecidedAt(80), monoNow(); at < before || at > after {
		t.Errorf("DecidedAt of a live process %d, not within [%d, %d]", at, before, after)
	}
}

// curlSet is a whitelist of curl processes on a host running init, whose
// resolver changes only on Notify.
func curlSet(t *testing.T) (*fakeHost, *Resolver, *Set) {
	t.Helper()
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	r := h.resolver(0, nil)
	r.interval = time.Hour
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^curl$"}}}, Whitelist)
	t.Cleanup(s.Close)
	return h, r, s
}

// TestSettled: a dynamic set's answers are final for data up to a time
// once every lifecycle event before that time is handled, not when the
// process was classified after it (from what may be its parent's
// identity); without a lifecycle source, and for a set of listed pids,
// they always are.
func TestSettled(t *testing.T) {
	h, r, s := curlSet(t)
	static := r.Watch(Selectors{ProcID: []int{1}}, Whitelist)
	defer static.Close()
	if !s.Settled(math.MaxUint64 - 1) {
		t.Error("not settled without a lifecycle source")
	}
	var handled atomic.Uint64
	r.SetHandledThrough(handled.Load)
	handled.Store(1000)
	if !s.Settled(1000) || s.Settled(1001) {
		t.Error("settled must follow the events handled")
	}
	if !static.Settled(5000) {
		t.Error("a set of listed pids is always settled")
	}
	h.add(fakeProc{pid: 90, ppid: 1, comm: "curl", cmdline: "curl x"})
	r.Notify(identity.Process{PID: 90})
	if at := r.DecidedAt(90); s.Settled(at) || !s.Observed(90) {
		t.Errorf("classified at %d: settled %v, observed %v; want not settled until the events are handled", at, s.Settled(at), s.Observed(90))
	}
}

func TestWatchContainersAndPods(t *testing.T) {
	h := newFakeHost(t)
	podCg := "/kubepods/burstable/pod" + podX
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	h.add(fakeProc{pid: 100, ppid: 1, comm: "redis-server", cmdline: "redis-server", cgroup: podCg + "/" + cidA})
	h.add(fakeProc{pid: 101, ppid: 100, comm: "redis-check", cmdline: "redis-check", cgroup: podCg + "/" + cidA})
	h.add(fakeProc{pid: 110, ppid: 1, comm: "pause", cmdline: "/pause", cgroup: podCg + "/" + cidB})
	h.add(fakeProc{pid: 200, ppid: 1, comm: "nginx", cmdline: "nginx", cgroup: "/docker/" + cidC})
	h.add(fakeProc{pid: 201, ppid: 200, comm: "nginx", cmdline: "nginx worker", cgroup: "/docker/" + cidC + "/sub"})
	h.runcState(cidC, map[string]string{"io.kubernetes.cri.container-name": "web"})
	r := h.resolver(0, nil)

	byID := r.Watch(Selectors{ContainerID: []string{cidA[:12]}}, Whitelist)
	defer byID.Close()
	if got := byID.PIDs(); !slices.Equal(got, []int{100, 101}) {
		t.Errorf("container_id: PIDs = %v, want [100 101]", got)
	}
	if got, want := byID.CgroupIDs(), []uint64{h.cgroupID(podCg + "/" + cidA)}; !slices.Equal(got, want) {
		t.Errorf("container_id: CgroupIDs = %v, want %v", got, want)
	}

	pod := r.Watch(Selectors{PodID: []string{strings.ToUpper(podX)}}, Whitelist)
	defer pod.Close()
	if got := pod.PIDs(); !slices.Equal(got, []int{100, 101, 110}) {
		t.Errorf("pod_id: PIDs = %v, want [100 101 110]", got)
	}
	wantCg := []uint64{h.cgroupID(podCg + "/" + cidA), h.cgroupID(podCg + "/" + cidB)}
	slices.Sort(wantCg)
	if got := pod.CgroupIDs(); !slices.Equal(got, wantCg) {
		t.Errorf("pod_id: CgroupIDs = %v, want %v", got, wantCg)
	}

	byName := r.Watch(Selectors{ContainerName: []string{"web"}}, Whitelist)
	defer byName.Close()
	if got := byName.PIDs(); !slices.Equal(got, []int{200, 201}) {
		t.Errorf("container_name: PIDs = %v, want [200 201]", got)
	}
	wantCg = []uint64{h.cgroupID("/docker/" + cidC), h.cgroupID("/docker/" + cidC + "/sub")}
	slices.Sort(wantCg)
	if got := byName.CgroupIDs(); !slices.Equal(got, wantCg) {
		t.Errorf("container_name: CgroupIDs = %v, want every cgroup of the container %v", got, wantCg)
	}

	// A new process in the selected container joins the set.
	changed(byID)
	h.add(fakeProc{pid: 102, ppid: 100, comm: "sh", cmdline: "sh", cgroup: podCg + "/" + cidA})
	waitFor(t, "new container process observed", func() bool { return byID.Observed(102) })
	if !changed(byID) {
		t.Error("Changed not signalled")
	}
}

func TestBlacklist(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	h.add(fakeProc{pid: 5, ppid: 1, comm: "sshd", cmdline: "sshd"})
	h.add(fakeProc{pid: 6, ppid: 1, comm: "redis-server", cmdline: "redis-server", cgroup: "/docker/" + cidC})
	r := h.resolver(0, nil)
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^sshd$"}}, ContainerID: []string{cidC}, ProcID: []int{1}}, Blacklist)
	defer s.Close()
	if s.Mode() != Blacklist {
		t.Fatal("mode")
	}
	if got := s.PIDs(); !slices.Equal(got, []int{1, 5, 6}) {
		t.Errorf("PIDs = %v, want the listed [1 5 6]", got)
	}
	if s.Observed(1) || s.Observed(5) || s.Observed(6) || !s.Observed(7) || !s.Observed(12345) {
		t.Error("blacklist: listed processes observed or others not")
	}
	if got := s.CgroupIDs(); !slices.Equal(got, []uint64{h.cgroupID("/docker/" + cidC)}) {
		t.Errorf("CgroupIDs = %v", got)
	}
	// An empty blacklist observes everything and needs no scan.
	all := r.Watch(Selectors{}, Blacklist)
	defer all.Close()
	if !all.Observed(5) || len(all.PIDs()) != 0 {
		t.Error("empty blacklist")
	}
}

func TestProcIDOnly(t *testing.T) {
	h := newFakeHost(t)
	r := h.resolver(0, nil)
	s := r.Watch(Selectors{ProcID: []int{42, 7, 42}}, Whitelist)
	defer s.Close()
	if got := s.PIDs(); !slices.Equal(got, []int{7, 42}) {
		t.Errorf("PIDs = %v", got)
	}
	if !s.Observed(42) || s.Observed(43) {
		t.Error("Observed")
	}
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running {
		t.Error("a proc_id-only set started the /proc scan")
	}
}

// lockedBuffer is a log sink safe for the scan goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestCap(t *testing.T) {
	h := newFakeHost(t)
	for pid := 2; pid < 2+MaxObjects+100; pid++ {
		h.add(fakeProc{pid: pid, ppid: 1, comm: "worker", cmdline: "worker"})
	}
	var logs lockedBuffer
	r := h.resolver(0, slog.New(slog.NewTextHandler(&logs, nil)))
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "worker"}}, ProcID: []int{99999}}, Whitelist)
	defer s.Close()
	pids := s.PIDs()
	if len(pids) != MaxObjects {
		t.Fatalf("%d pids, want the cap %d", len(pids), MaxObjects)
	}
	// The listed pid first, then the matches by pid.
	if !s.Observed(99999) || !s.Observed(2) || !s.Observed(MaxObjects) || s.Observed(MaxObjects+1) {
		t.Error("capped set does not keep the listed pid and the lowest matches")
	}
	time.Sleep(3 * ScanInterval) // more scans, still capped
	if n := strings.Count(logs.String(), "more objects than allowed"); n != 1 {
		t.Errorf("cap logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestNotify(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	h.add(fakeProc{pid: 10, ppid: 1, comm: "galago", cmdline: "galago"})
	r := h.resolver(10, nil)
	r.interval = time.Hour // only Notify can change the set
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^nginx$"}}}, Whitelist)
	defer s.Close()
	changed(s)

	h.add(fakeProc{pid: 50, ppid: 1, comm: "nginx", cmdline: "nginx"})
	r.Notify(identity.Process{PID: 50})
	if !s.Observed(50) || !changed(s) {
		t.Error("Notify: process not added at once")
	}
	h.add(fakeProc{pid: 51, ppid: 10, comm: "nginx", cmdline: "nginx"})
	r.Notify(identity.Process{PID: 51})
	if s.Observed(51) {
		t.Error("Notify: galago's child added")
	}
	// An exit keeps the member (exited) but changes nothing else.
	h.remove(50)
	r.NotifyExit(50)
	if !s.Observed(50) {
		t.Error("NotifyExit: an exited member is dropped at once")
	}
}

func TestOldProcessExec(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	h.add(fakeProc{pid: 40, ppid: 1, comm: "sh", cmdline: "sh"})
	r := h.resolver(0, nil)
	r.young = 0 // every process is old at once
	r.recheck = time.Hour
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "^redis"}}}, Whitelist)
	defer s.Close()

	// An old process is not re-read every scan...
	h.add(fakeProc{pid: 40, ppid: 1, comm: "redis-server", cmdline: "redis-server"})
	time.Sleep(3 * ScanInterval)
	if s.Observed(40) {
		t.Fatal("old process re-read before its recheck")
	}
	// ...but at once on Notify (the exec tracepoint)...
	r.Notify(identity.Process{PID: 40})
	if !s.Observed(40) {
		t.Fatal("Notify did not re-read the process")
	}
	// ...and by the periodic recheck.
	h.add(fakeProc{pid: 41, ppid: 1, comm: "sh", cmdline: "sh"})
	time.Sleep(2 * ScanInterval)
	r.mu.Lock()
	r.recheck = 300 * time.Millisecond
	r.mu.Unlock()
	h.add(fakeProc{pid: 41, ppid: 1, comm: "redis-server", cmdline: "redis-server"})
	waitFor(t, "recheck of an old process", func() bool { return s.Observed(41) })
}

func TestCloseStopsUpdates(t *testing.T) {
	h := newFakeHost(t)
	h.add(fakeProc{pid: 1, comm: "init", cmdline: "init"})
	r := h.resolver(0, nil)
	s := r.Watch(Selectors{ProcName: []ProcName{{Comm: "nginx"}}}, Whitelist)
	s.Close()
	h.add(fakeProc{pid: 50, ppid: 1, comm: "nginx", cmdline: "nginx"})
	time.Sleep(2 * ScanInterval)
	if s.Observed(50) {
		t.Error("closed set still updated")
	}
	r.Close()
	r.Close() // idempotent
}

// TestLateNotifyOfExitedMember: a member that has exited (seen by a scan
// or Notify while alive) stays observed, and listed for the kernel's
// filter, when its fork/exec events are handled after its exit. (The set
// once dropped it: the late Notify made it a live member again in pids
// only, which snapshot.equal did not compare.)
func TestLateNotifyOfExitedMember(t *testing.T) {
	h, r, s := curlSet(t)
	h.add(fakeProc{pid: 50, ppid: 1, comm: "curl", cmdline: "curl x"})
	r.Notify(identity.Process{PID: 50}) // (or a scan) sees it alive
	h.remove(50)
	r.NotifyExit(50)
	if !s.Observed(50) {
		t.Fatal("exited member not observed")
	}
	// Another change stores a snapshot where 50 is only an exited member.
	h.add(fakeProc{pid: 51, ppid: 1, comm: "curl", cmdline: "curl y"})
	r.Notify(identity.Process{PID: 51})
	// Its exec event, handled late (the process is gone).
	r.Notify(identity.Process{PID: 50, PPID: 1, Comm: "curl", Cmdline: "curl x", StartTime: 1050})
	if !s.Observed(50) || !slices.Contains(s.PIDs(), 50) {
		t.Errorf("an exited member is forgotten after a late Notify: observed %v, pids %v", s.Observed(50), s.PIDs())
	}
}
