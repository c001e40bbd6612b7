package flamegraph

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
)

func bits(t *testing.T, names ...string) uint32 {
	t.Helper()
	f := probe.LookupBuiltin(Name)
	var b uint32
	for _, n := range names {
		bit, ok := f.SubItemBit(n)
		if !ok {
			t.Fatalf("no sub-item %s", n)
		}
		b |= bit
	}
	return b
}

// TestUnbuiltSubItems: only unbuilt sub-items (io) are refused before
// anything is loaded; alongside a built one they are named in one warning.
func TestUnbuiltSubItems(t *testing.T) {
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	p := New()
	err := p.Start(rt.Context(), probe.Config{SubItems: bits(t, "io")}, rt)
	if !errors.Is(err, probe.ErrNotImplemented) || err.Error() != "flamegraph: sub-items io: not supported in the current version" {
		t.Fatalf("Start(io) = %v", err)
	}
	for _, built := range [][]string{{"oncpu"}, {"offcpu"}, {"mem"}, {"mem_glibc"}, {"oncpu", "offcpu", "mem", "mem_glibc"}} {
		if err := p.checkSubItems(bits(t, built...)); err != nil {
			t.Errorf("%v: %v", built, err)
		}
	}
	if len(rt.LogEntries()) != 0 {
		t.Errorf("built sub-items logged: %v", rt.LogEntries())
	}
	if err := p.checkSubItems(bits(t, "mem_glibc", "io")); err != nil {
		t.Fatal(err)
	}
	var warned []probetest.LogEntry
	for _, e := range rt.LogEntries() {
		if e.Msg == "flamegraph: sub-items not built in this version, ignored" {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 || warned[0].Attrs["sub_items"] != "io" {
		t.Errorf("warnings %+v", warned)
	}
	if err := p.checkSubItems(0); err == nil {
		t.Error("no sub-item accepted")
	}
}

type fakeIDs map[int]identity.Process

func (f fakeIDs) Process(pid int) (identity.Process, bool) { p, ok := f[pid]; return p, ok }
func (f fakeIDs) Container(id string) (identity.Container, bool) {
	if id == "c0ffee0000000000000000000000000000000000000000000000000000000001" {
		return identity.Container{ID: id, Name: "web", PodName: "shop-7f9"}, true
	}
	return identity.Container{}, false
}

// TestContainerFrames: processes in containers get gala-gopher's
// [Pod]/[Con] bottom frames and pprof labels; a container the resolver
// does not know is named by its short id.
func TestContainerFrames(t *testing.T) {
	self := os.Getpid()
	p := New(WithIdentity(fakeIDs{
		self: {PID: self, ContainerID: "c0ffee0000000000000000000000000000000000000000000000000000000001"},
		-1:   {PID: -1, ContainerID: "abcdef0123456789abcdef"},
	}))
	pp := p.newProc(self)
	pp.stacks["main;f"] = 2
	comm := readComm("/proc", self)
	want := []string{"[Pod]shop-7f9", "[Con]web", "[" + strconv.Itoa(self) + "]" + comm, "main", "f"}
	if l := pp.lines(); len(l) != 1 || !reflect.DeepEqual(l[0].frames, want) {
		t.Errorf("lines %v, want %v", l, want)
	}
	prof := toPprof(onCPU, []*procProfile{pp}, time.Millisecond, time.Now(), time.Second)
	s := prof.Sample[0]
	if len(s.Location) != 2 || s.Label["container"][0] != "web" || s.Label["pod"][0] != "shop-7f9" {
		t.Errorf("sample %d locations, labels %v", len(s.Location), s.Label)
	}
	if q := p.newProc(-1); q.con != "abcdef012345" || q.pod != "" {
		t.Errorf("unknown container: con %q pod %q", q.con, q.pod)
	}
	if q := New().newProc(self); q.con != "" || len(q.base()) != 1 {
		t.Errorf("without identity: %+v", q)
	}
}
