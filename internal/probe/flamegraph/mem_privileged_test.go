package flamegraph

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

// Sizes of the target's alloc command (testdata/burn.c).
const (
	block   = 4000 // alloc_a's malloc, alloc_b's calloc
	grown   = 5000 // grow's realloc of a malloc(100)
	aligned = 4032 // align's aligned_alloc (and a posix_memalign of block)
)

// TestMemGlibcPrivileged: the C target allocates from five functions
// through malloc, calloc, realloc, posix_memalign and aligned_alloc, then
// frees a known part. The
// allocated bytes per function are exact (3:1 between alloc_a and
// alloc_b; renew's realloc(NULL) counted once, not again for the malloc
// it calls), and so are the live bytes: the first half of alloc_a's
// blocks and all of alloc_b's were freed, grow's malloc(100) blocks were
// freed by realloc. A second process running the same program on the
// same libc, not observed, is not profiled.
func TestMemGlibcPrivileged(t *testing.T) {
	bin := buildC(t)
	tg, other := startTarget(t, bin), startTarget(t, bin)
	pid := tg.Pid()
	const n = 2000
	outDir, flameDir := profiled(t, []string{"mem_glibc"}, pid, 10, func() {
		tg.run(t, fmt.Sprintf("alloc %d", n))
		other.run(t, fmt.Sprintf("alloc %d", n))
	})
	if ents, err := os.ReadDir(filepath.Join(flameDir, memGlibc.String())); err != nil || len(ents) != 2 {
		t.Errorf("folded files %v (%v), want the observed process's two", ents, err)
	}

	lines := readFoldedFile(t, flameDir, memGlibc, pid)
	want := map[string]uint64{"alloc_a": 3 * n * block, "alloc_b": n * block, "grow": n * (100 + grown), "renew": n * block, "align": n * (block + aligned)}
	got := map[string]uint64{}
	for f, w := range want {
		got[f], _ = weight(lines, f)
		if got[f] != w {
			t.Errorf("%s: %d bytes allocated, want %d", f, got[f], w)
		}
	}
	within(t, "alloc_a/alloc_b bytes", float64(got["alloc_a"])/float64(got["alloc_b"]), 3, 0.05)

	liveLines := readFolded(t, filepath.Join(flameDir, memGlibc.String(), "tmp_"+strconv.Itoa(pid)+liveSuffix))
	wantLive := map[string]uint64{"alloc_a": 3 * n / 2 * block, "alloc_b": 0, "grow": n * grown, "renew": n * block, "align": n * (block + aligned)}
	for f, w := range wantLive {
		if l, _ := weight(liveLines, f); l != w {
			t.Errorf("%s: %d bytes live, want %d", f, l, w)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("allocated:\n%v\nlive:\n%v", lines, liveLines)
	}

	// pprof: Go's heap sample types, the same bytes, and the objects.
	prof := readPprof(t, outDir, memGlibc, pid)
	types := ""
	for _, st := range prof.SampleType {
		types += st.Type + "/" + st.Unit + " "
	}
	if types != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes " || prof.DefaultSampleType != "inuse_space" {
		t.Errorf("sample types %q, default %q", types, prof.DefaultSampleType)
	}
	for f, w := range map[string][4]int64{
		"alloc_a": {3 * n, 3 * n * block, 3 * n / 2, 3 * n / 2 * block},
		"alloc_b": {n, n * block, 0, 0},
		"grow":    {2 * n, n * (100 + grown), n, n * grown},
		"renew":   {n, n * block, n, n * block},
		"align":   {2 * n, n * (block + aligned), 2 * n, n * (block + aligned)},
	} {
		if v := pprofValues(prof, f); v != w {
			t.Errorf("pprof %s: %v, want %v", f, v, w)
		}
	}
	checkSVG(t, outDir, memGlibc, pid, ".svg", "alloc_a")
	checkSVG(t, outDir, memGlibc, pid, liveSuffix+".svg", "grow")
}

// TestMemGlibcBoundPrivileged: with room for 1000 live blocks, the
// blocks beyond are counted as lost, exactly: alloc_a's 6000 mallocs fill
// the map with its first 1000, so its other 5000, alloc_b's 2000, grow's
// 2000 mallocs and 2000 reallocs, renew's 2000 and align's 4000 are not
// tracked; the 1000 tracked are
// among the alloc_a blocks freed, so nothing is live. The bytes allocated
// are all counted.
func TestMemGlibcBoundPrivileged(t *testing.T) {
	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	const n = 2000
	_, flameDir, lost := profiledWith(t, []string{"mem_glibc"}, pid, 10, func() { tg.run(t, fmt.Sprintf("alloc %d", n)) }, withMaxAllocs(1000))
	if want := uint64(5000 + 2000 + 2*2000 + 2000 + 2*2000); lost != want {
		t.Errorf("lost %d, want %d", lost, want)
	}
	lines := readFoldedFile(t, flameDir, memGlibc, pid)
	if a, _ := weight(lines, "alloc_a"); a != 3*n*block {
		t.Errorf("alloc_a: %d bytes allocated, want %d", a, 3*n*block)
	}
	if _, err := os.Stat(filepath.Join(flameDir, memGlibc.String(), "tmp_"+strconv.Itoa(pid)+liveSuffix)); err == nil {
		t.Errorf("live blocks written: %v", readFolded(t, filepath.Join(flameDir, memGlibc.String(), "tmp_"+strconv.Itoa(pid)+liveSuffix)))
	}
}

// TestMemPrivileged: the C target writes to 3n fresh pages from fault_a
// and n from fault_b; the mem profile counts a page size per fault.
func TestMemPrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("page_fault_user"))
	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	const n = 2000
	outDir, flameDir := profiled(t, []string{"mem"}, pid, 10, func() { tg.run(t, fmt.Sprintf("fault %d", n)) })
	lines := readFoldedFile(t, flameDir, mem, pid)
	pg := uint64(os.Getpagesize())
	a, total := weight(lines, "fault_a")
	b, _ := weight(lines, "fault_b")
	// Each page is one fault; the kernel may fault a page again (NUMA
	// balancing, reclaim), never less.
	if a < 3*n*pg || a > 3*n*pg*101/100 || b < n*pg || b > n*pg*101/100 {
		t.Errorf("fault_a %d bytes, want %d; fault_b %d, want %d (of %d):\n%v", a, 3*n*pg, b, n*pg, total, lines)
	}
	within(t, "fault_a/fault_b bytes", float64(a)/float64(b), 3, 0.05)
	prof := readPprof(t, outDir, mem, pid)
	if len(prof.SampleType) != 2 || prof.SampleType[0].Type != "alloc_objects" || prof.SampleType[1].Type != "alloc_space" {
		t.Errorf("sample types %v", prof.SampleType)
	}
	if v := pprofValues(prof, "fault_a"); uint64(v[0])*pg != a || uint64(v[1]) != a {
		t.Errorf("pprof fault_a %v, folded %d bytes", v, a)
	}
	checkSVG(t, outDir, mem, pid, ".svg", "fault_a")
}

func readFolded(t *testing.T, name string) []foldedLine {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := parseFolded(f)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func readPprof(t *testing.T, outDir string, k kind, pid int) *profile.Profile {
	t.Helper()
	pbs, _ := filepath.Glob(filepath.Join(outDir, k.String(), "*", "*-"+strconv.Itoa(pid)+".pb.gz"))
	if len(pbs) != 1 {
		t.Fatalf("pprof files %v, want one", pbs)
	}
	f, err := os.Open(pbs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("pprof: %v", err)
	}
	return prof
}

// pprofValues sums the values (up to four) of the samples through frame.
func pprofValues(p *profile.Profile, frame string) (sum [4]int64) {
	for _, s := range p.Sample {
		for _, l := range s.Location {
			if l.Line[0].Function.Name == frame {
				for i, v := range s.Value {
					sum[i] += v
				}
				break
			}
		}
	}
	return sum
}

// checkSVG: the one SVG named *-<pid><suffix> parses and has a frame.
func checkSVG(t *testing.T, outDir string, k kind, pid int, suffix, frame string) {
	t.Helper()
	svgs, _ := filepath.Glob(filepath.Join(outDir, k.String(), "*", "*-"+strconv.Itoa(pid)+suffix))
	if len(svgs) != 1 {
		t.Fatalf("svg files %v, want one", svgs)
	}
	b, err := os.ReadFile(svgs[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
		Titles  []string `xml:"g>g>title"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("svg: %v", err)
	}
	for _, ti := range doc.Titles {
		if strings.HasPrefix(ti, frame+" (") && doc.XMLName.Local == "svg" {
			return
		}
	}
	t.Errorf("%s: root %q, no frame %s among %d", svgs[0], doc.XMLName.Local, frame, len(doc.Titles))
}

// TestMemReconfigurePrivileged: mem and mem_glibc come and go while the
// probe runs: their hooks are attached and removed, and the live blocks
// are forgotten with mem_glibc.
func TestMemReconfigurePrivileged(t *testing.T) {
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("sched_switch"), bpfrt.HaveTPBTF("page_fault_user"))
	tg := startTarget(t, buildC(t))
	pid := tg.Pid()
	params := probe.DefaultParams()
	params.OutputDir, params.FlameDir = t.TempDir(), t.TempDir()
	cfg := probe.Config{SubItems: bitOffCPU, Params: params, Targets: probetest.NewTargets(snoop.Whitelist, pid)}
	p := New(withPeriods(200*time.Millisecond, time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	state := func() (memLinks, libcFiles, liveBlocks int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.glibc != nil {
			libcFiles = p.glibc.set.Files()
		}
		keys, _, err := readAllocs(p.coll.Maps["glibc_allocs"])
		if err != nil {
			t.Fatal(err)
		}
		return len(p.memLinks), libcFiles, len(keys)
	}
	cfg.SubItems = bitMem | bitGlibc
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	tg.run(t, "alloc 100")
	if m, f, l := state(); m != 2 || f == 0 || l != 3*100/2+100+100+2*100 {
		t.Errorf("mem and mem_glibc on: %d fault links, %d libc files, %d live blocks (want 2, >0, 550)", m, f, l)
	}
	probetest.WaitFor(t, "the live blocks drained", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.live[pid] != nil
	})
	cfg.SubItems = bitOffCPU
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if m, f, l := state(); m != 0 || f != 0 || l != 0 {
		t.Errorf("mem and mem_glibc off: %d fault links, %d libc files, %d live blocks", m, f, l)
	}
	p.mu.Lock()
	if p.glibc != nil || len(p.live) != 0 {
		t.Errorf("mem_glibc off: hooks %v, live %v", p.glibc, p.live)
	}
	p.mu.Unlock()
	rt.Shutdown(t, p)
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors: %s", n, rt.Logs())
	}
}
