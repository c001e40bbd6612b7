package conntrack

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCT is conntrack in every namespace, as a map of original tuple ->
// reply source per namespace fd (-1: the agent's own namespace).
type fakeCT struct {
	mu      sync.Mutex
	entries map[netip.AddrPort]netip.AddrPort // dst -> backend, any src
	fail    error                             // returned by every dnat
	dialErr error
	dials   []int
	gets    int
	closes  int
}

type fakeTable struct{ f *fakeCT }

func (f *fakeCT) dial(nsFD int) (table, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials = append(f.dials, nsFD)
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	return fakeTable{f}, nil
}

func (t fakeTable) dnat(src, dst netip.AddrPort) (netip.AddrPort, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.gets++
	if t.f.fail != nil {
		return netip.AddrPort{}, t.f.fail
	}
	if b, ok := t.f.entries[dst]; ok {
		return b, nil
	}
	return netip.AddrPort{}, errNoEntry
}

func (t fakeTable) close() error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.closes++
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var (
	svc     = netip.MustParseAddrPort("10.96.0.10:80")
	backend = netip.MustParseAddrPort("10.200.0.2:8080")
	plain   = netip.MustParseAddrPort("10.1.1.1:443")
)

func client(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.5"), port)
}

func newFake(t *testing.T, o Options) (*Resolver, *fakeCT, *clock, *bytes.Buffer) {
	t.Helper()
	f := &fakeCT{entries: map[netip.AddrPort]netip.AddrPort{svc: backend}}
	c := &clock{time.Unix(1000, 0)}
	var logs bytes.Buffer
	o.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.dial, o.now = f.dial, c.now
	if o.present == nil {
		o.present = func() bool { return true }
	}
	r := New(o)
	t.Cleanup(func() { _ = r.Close() })
	return r, f, c, &logs
}

// self is a tuple of the agent's own namespace.
func self(r *Resolver, src, dst netip.AddrPort) Tuple {
	return Tuple{Netns: r.selfNS, PID: uint32(os.Getpid()), Src: src, Dst: dst}
}

func TestBackendNATedAndCached(t *testing.T) {
	r, f, c, _ := newFake(t, Options{})
	if r.selfNS == 0 {
		t.Fatal("own network namespace unknown")
	}
	if got := r.Backend(self(r, client(40000), svc)); got != backend {
		t.Fatalf("Backend = %v, want %v", got, backend)
	}
	if got := r.Backend(self(r, client(40000), svc)); got != backend {
		t.Fatalf("cached Backend = %v, want %v", got, backend)
	}
	if f.gets != 1 || len(f.dials) != 1 || f.dials[0] < 0 {
		t.Fatalf("gets %d dials %v: want one lookup on one socket opened in the namespace", f.gets, f.dials)
	}
	// Another client port is another tuple (another backend may serve it).
	r.Backend(self(r, client(40001), svc))
	if f.gets != 2 || len(f.dials) != 1 {
		t.Fatalf("gets %d dials %v: want a second lookup on the same socket", f.gets, f.dials)
	}
	// Expired answers are asked again.
	c.t = c.t.Add(DefaultTTL)
	r.Backend(self(r, client(40000), svc))
	if f.gets != 3 {
		t.Fatalf("gets %d after TTL, want 3", f.gets)
	}
	st := r.Stats()
	if st.Lookups != 3 || st.Hits != 1 || st.NATed != 3 || st.Failures != 0 || st.Evictions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBackendNoEntryKeepsOriginal(t *testing.T) {
	r, f, _, _ := newFake(t, Options{})
	for range 2 {
		if got := r.Backend(self(r, client(40000), plain)); got != plain {
			t.Fatalf("Backend = %v, want %v (not NATed)", got, plain)
		}
	}
	if f.gets != 1 {
		t.Fatalf("gets %d: a tuple without entry must be cached too", f.gets)
	}
	if st := r.Stats(); st.NoEntry != 1 || st.Hits != 1 || st.NATed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBackendIPv4Mapped(t *testing.T) {
	r, _, _, _ := newFake(t, Options{})
	mapped := func(a netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
	}
	if got := r.Backend(self(r, mapped(client(40000)), mapped(svc))); got != backend {
		t.Fatalf("Backend = %v, want %v", got, backend)
	}
	// Not NATed: the caller's own form comes back, cached or not.
	for range 2 {
		if got := r.Backend(self(r, mapped(client(40000)), mapped(plain))); got != mapped(plain) {
			t.Fatalf("Backend = %v, want %v", got, mapped(plain))
		}
	}
	// Mixed families cannot be a conntrack tuple: no lookup.
	v6 := netip.MustParseAddrPort("[fd00::1]:80")
	if got := r.Backend(self(r, client(40000), v6)); got != v6 {
		t.Fatalf("Backend = %v, want %v", got, v6)
	}
}

func TestBackendFailureCountedNotCached(t *testing.T) {
	errs := 0
	r, f, _, logs := newFake(t, Options{OnError: func() { errs++ }})
	f.fail = errors.New("netlink broke")
	if got := r.Backend(self(r, client(40000), svc)); got != svc {
		t.Fatalf("Backend = %v, want the service address on failure", got)
	}
	if errs != 1 || r.Stats().Failures != 1 {
		t.Fatalf("errors %d, stats %+v: want one failure counted", errs, r.Stats())
	}
	if f.closes != 1 {
		t.Fatalf("closes %d: the socket that failed must be dropped", f.closes)
	}
	if !strings.Contains(logs.String(), "lookup failed") {
		t.Fatalf("no debug line for the failure: %s", logs)
	}
	f.fail = nil
	if got := r.Backend(self(r, client(40000), svc)); got != backend {
		t.Fatalf("Backend = %v after recovery, want %v (failures are not cached)", got, backend)
	}
	if len(f.dials) != 2 {
		t.Fatalf("dials %v: want a new socket after the failure", f.dials)
	}
}

func TestBackendBoundEvicts(t *testing.T) {
	r, f, _, logs := newFake(t, Options{MaxEntries: 2})
	r.Backend(self(r, client(1), svc))
	r.Backend(self(r, client(2), svc))
	r.Backend(self(r, client(1), svc)) // hit: 1 becomes the most recent
	r.Backend(self(r, client(3), svc)) // evicts 2
	if r.lru.Len() != 2 || len(r.byKey) != 2 {
		t.Fatalf("cache holds %d/%d answers, bound 2", r.lru.Len(), len(r.byKey))
	}
	gets := f.gets
	r.Backend(self(r, client(1), svc))
	if f.gets != gets {
		t.Fatal("the recently used answer was evicted")
	}
	r.Backend(self(r, client(2), svc))
	if f.gets != gets+1 {
		t.Fatal("the least recently used answer was kept")
	}
	if st := r.Stats(); st.Evictions != 2 {
		t.Fatalf("evictions %d, want 2 (client 2, then client 3)", st.Evictions)
	}
	if !strings.Contains(logs.String(), "evicted") {
		t.Fatalf("no debug line for evictions: %s", logs)
	}
}

func TestBackendAbsentConntrack(t *testing.T) {
	present := false
	r, f, c, logs := newFake(t, Options{present: func() bool { return present }})
	for port := range uint16(3) {
		if got := r.Backend(self(r, client(40000+port), svc)); got != svc {
			t.Fatalf("Backend = %v, want the service address without conntrack", got)
		}
	}
	if len(f.dials) != 0 || f.gets != 0 {
		t.Fatalf("dials %v gets %d: nothing must be opened without conntrack", f.dials, f.gets)
	}
	if n := strings.Count(logs.String(), "keeps service addresses"); n != 1 {
		t.Fatalf("%d 'not available' lines, want 1: %s", n, logs)
	}
	// Loaded later (kube-proxy started after the agent): found at the recheck.
	present = true
	if got := r.Backend(self(r, client(41000), svc)); got != svc {
		t.Fatalf("Backend = %v before the recheck, want the service address", got)
	}
	c.t = c.t.Add(absentRecheck)
	if got := r.Backend(self(r, client(41000), svc)); got != backend {
		t.Fatalf("Backend = %v after the recheck, want %v", got, backend)
	}
}

func TestBackendAbsentAtDial(t *testing.T) {
	r, f, _, logs := newFake(t, Options{})
	f.dialErr = errAbsent
	errs := 0
	r.o.OnError = func() { errs++ }
	r.Backend(self(r, client(40000), svc))
	r.Backend(self(r, client(40001), svc))
	if len(f.dials) != 1 || errs != 0 {
		t.Fatalf("dials %v errors %d: an absent ctnetlink is not an error, and is not asked again at once", f.dials, errs)
	}
	if n := strings.Count(logs.String(), "keeps service addresses"); n != 1 {
		t.Fatalf("%d 'not available' lines, want 1", n)
	}
}

func TestBackendOtherNetns(t *testing.T) {
	r, f, _, _ := newFake(t, Options{})
	// An inode no process has: the pid's namespace does not match.
	tp := Tuple{Netns: 1, PID: uint32(os.Getpid()), Src: client(40000), Dst: svc}
	if got := r.Backend(tp); got != svc {
		t.Fatalf("Backend = %v, want the service address", got)
	}
	if len(f.dials) != 0 || r.Stats().Failures != 1 {
		t.Fatalf("dials %v stats %+v: a namespace not entered is one failure", f.dials, r.Stats())
	}
	tp.PID = 0
	r.Backend(tp)
	if r.Stats().Failures != 2 {
		t.Fatalf("stats %+v: no process, no namespace", r.Stats())
	}
	// The agent's own namespace needs no process.
	if got := r.Backend(Tuple{Netns: r.selfNS, Src: client(40000), Dst: svc}); got != backend {
		t.Fatalf("Backend in the agent's namespace without a pid = %v, want %v", got, backend)
	}
}

func TestOpenNetnsThroughProcess(t *testing.T) {
	r, _, _, _ := newFake(t, Options{})
	f, err := r.openNetns(r.selfNS, uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := r.openNetns(r.selfNS+1, 0); err == nil {
		t.Fatal("pid 0 opened a namespace other than the agent's")
	}
}

func TestNetnsSocketsIdleClosed(t *testing.T) {
	r, f, c, _ := newFake(t, Options{NetnsIdle: time.Minute})
	r.Backend(self(r, client(1), svc))
	c.t = c.t.Add(time.Minute)
	r.Backend(self(r, client(2), svc))
	if f.closes != 1 || len(f.dials) != 2 {
		t.Fatalf("closes %d dials %v: an idle namespace socket must be closed and reopened", f.closes, f.dials)
	}
}

func TestForParam(t *testing.T) {
	var logs bytes.Buffer
	o := Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), present: func() bool { return true }}
	if r := ForParam(nil, 0, o); r != nil {
		t.Fatal("cluster_ip_backend=0 made a resolver")
	}
	r := ForParam(nil, 1, o)
	if r == nil || ForParam(r, 1, o) != r {
		t.Fatal("cluster_ip_backend=1 must make one resolver and keep it")
	}
	if strings.Contains(logs.String(), "flowtracer") {
		t.Fatal("1 logged the flowtracer line")
	}
	for range 2 {
		if ForParam(r, 2, o) != r {
			t.Fatal("2 must keep the resolver")
		}
	}
	if n := strings.Count(logs.String(), "cluster_ip_backend=2 behaves as 1 (ctnetlink lookups) on the client side"); n != 1 {
		t.Fatalf("%d flowtracer lines, want 1: %s", n, logs.String())
	}
	if ForParam(r, 0, o) != nil {
		t.Fatal("0 must drop the resolver")
	}
	if got := r.Backend(self(r, client(1), svc)); got != svc || r.Stats().Lookups != 0 {
		t.Fatal("a closed resolver looked up")
	}
}

func TestScanNetnsFindsAnyProcess(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"77/ns", "self/ns", "88/ns"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// 88 is in another namespace (a regular file, never an nsfs inode).
	if err := os.WriteFile(root+"/88/ns/net", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/ns/net", root+"/77/ns/net"); err != nil {
		t.Fatal(err)
	}
	r, _, c, _ := newFake(t, Options{ProcRoot: root})
	f := r.scanNetns(r.selfNS)
	if f == nil {
		t.Fatal("the process of the namespace was not found")
	}
	f.Close()
	if f := r.scanNetns(r.selfNS + 1); f != nil {
		t.Fatal("a namespace without process was found")
	}
	// Found empty: not scanned again before absentRecheck, even once a
	// process is in it.
	if err := os.Remove(root + "/77/ns/net"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.noHolder[r.selfNS+1]; !ok {
		t.Fatal("the empty namespace was not remembered")
	}
	c.t = c.t.Add(absentRecheck)
	if f := r.scanNetns(r.selfNS); f != nil {
		t.Fatal("a removed process was found")
	}
}

func TestLogworthy(t *testing.T) {
	var got []uint64
	for n := uint64(1); n <= 20; n++ {
		if logworthy(n) {
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != "[1 2 4 8 16]" {
		t.Fatalf("logged occurrences %v", got)
	}
}
