package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/procfs"
)

// fakeProc builds /proc/<pid> with stat, status and BPF fds (symlinks to
// the anon inode names, fdinfo beside them).
type fakeProc struct {
	pid, ppid            int
	utime, stime, cutime uint64
	rssKB                uint64
	fds                  map[int]string // fd -> fdinfo body
	kinds                map[int]string // fd -> link target
}

func writeProc(t *testing.T, root string, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, "proc", fmt.Sprint(p.pid))
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Fields after comm: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime ... (proc(5)).
	rest := []string{"S", fmt.Sprint(p.ppid), "1", "1", "0", "-1", "0", "0", "0", "0", "0",
		fmt.Sprint(p.utime), fmt.Sprint(p.stime), fmt.Sprint(p.cutime), "0"}
	for len(rest) < 41 {
		rest = append(rest, "0")
	}
	stat := fmt.Sprintf("%d (my agent) %s\n", p.pid, strings.Join(rest, " "))
	status := fmt.Sprintf("Name:\tagent\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\nVmRSS:\t%d kB\n", p.pid, p.pid, p.ppid, p.rssKB)
	for name, body := range map[string]string{"stat": stat, "status": status} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for fd, body := range p.fds {
		if err := os.Symlink(p.kinds[fd], filepath.Join(dir, "fd", fmt.Sprint(fd))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "fdinfo", fmt.Sprint(fd)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Real fdinfo bodies (Linux 6.18) with the ids and counters changed.
func progInfo(id, runNs, runs int) string {
	return fmt.Sprintf("pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\nprog_type:\t26\nprog_jited:\t1\nprog_tag:\t3c435ecf4c5a6be2\nmemlock:\t4096\nprog_id:\t%d\nrun_time_ns:\t%d\nrun_cnt:\t%d\n", id, runNs, runs)
}

func mapInfo(id, memlock int) string {
	return fmt.Sprintf("pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\nmap_type:\t27\nkey_size:\t0\nvalue_size:\t0\nmax_entries:\t262144\nmap_flags:\t0x0\nmap_extra:\t0x0\nmemlock:\t%d\nmap_id:\t%d\nfrozen:\t0\n", memlock, id)
}

func linkInfo(typ string, prog int) string {
	return fmt.Sprintf("pos:\t0\nflags:\t02000000\nmnt_id:\t17\nino:\t1038\nlink_type:\t%s\nlink_id:\t857\nprog_tag:\tbf9c900b4ce258c1\nprog_id:\t%d\ntarget_name:\ttcp\n", typ, prog)
}

const (
	kProg = "anon_inode:bpf-prog"
	kMap  = "anon_inode:bpf-map"
	kLink = "anon_inode:bpf_link"
)

// agentTree: agent 100 with child 101 (which shares a program and a map
// with it), grandchild 102, and an unrelated process 200 with its own BPF.
func agentTree(t *testing.T, hookNs, iterNs, runs int) string {
	root := t.TempDir()
	writeProc(t, root, fakeProc{pid: 100, ppid: 1, utime: 150, stime: 50, cutime: 20, rssKB: 30000,
		fds: map[int]string{
			3: progInfo(7, hookNs, runs), 4: progInfo(8, iterNs, 2), 5: mapInfo(11, 4096), 6: mapInfo(12, 8192),
			7: linkInfo("iter", 8), 8: linkInfo("raw_tracepoint", 7), 9: "pos:\t0\n",
		},
		kinds: map[int]string{3: kProg, 4: kProg, 5: kMap, 6: kMap, 7: kLink, 8: kLink, 9: "socket:[123]"}})
	writeProc(t, root, fakeProc{pid: 101, ppid: 100, utime: 10, stime: 5, rssKB: 1000,
		fds:   map[int]string{3: progInfo(7, hookNs, runs), 4: mapInfo(11, 4096), 5: mapInfo(13, 100)},
		kinds: map[int]string{3: kProg, 4: kMap, 5: kMap}})
	writeProc(t, root, fakeProc{pid: 102, ppid: 101, utime: 1, stime: 1, rssKB: 24})
	writeProc(t, root, fakeProc{pid: 200, ppid: 1, utime: 999, rssKB: 999,
		fds:   map[int]string{3: progInfo(99, 1e9, 1e6), 4: mapInfo(98, 1<<20)},
		kinds: map[int]string{3: kProg, 4: kMap}})
	return root
}

func TestSample(t *testing.T) {
	s := Sampler{FS: procfs.FS{Root: agentTree(t, 5000, 300, 10)}}
	cs, err := s.Sample(100)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cs.PIDs) != "[100 101 102]" {
		t.Errorf("tree %v", cs.PIDs)
	}
	// (150+50+20) + (10+5) + (1+1) ticks at USER_HZ 100.
	if !near(cs.CPUSeconds, 2.37) {
		t.Errorf("cpu %v s, want 2.37", cs.CPUSeconds)
	}
	if cs.RSSBytes != (30000+1000+24)*1024 {
		t.Errorf("rss %d", cs.RSSBytes)
	}
	// Maps 11 (shared), 12 and 13, each once.
	if cs.MapBytes != 4096+8192+100 || cs.Maps != 3 {
		t.Errorf("maps %d bytes in %d", cs.MapBytes, cs.Maps)
	}
	if len(cs.Programs) != 2 || cs.Programs[7] != (BPFProg{ID: 7, Type: "26", RunTimeNs: 5000, RunCount: 10, Memlock: 4096}) {
		t.Errorf("programs %+v", cs.Programs)
	}
	if len(cs.Iterators) != 1 || !cs.Iterators[8] {
		t.Errorf("iterators %v", cs.Iterators)
	}
	if _, err := s.Sample(300); err == nil {
		t.Error("a missing agent process sampled")
	}
}

func TestDiff(t *testing.T) {
	before, err := Sampler{FS: procfs.FS{Root: agentTree(t, 5000, 300, 10)}}.Sample(100)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Sampler{FS: procfs.FS{Root: agentTree(t, 2_005_000, 1_000_300, 4010)}}.Sample(100)
	if err != nil {
		t.Fatal(err)
	}
	after.CPUSeconds += 1.5
	after.Programs[9] = BPFProg{ID: 9, RunTimeNs: 250, RunCount: 5} // loaded in between
	c := Diff(before, after)
	want := Cost{CPUSeconds: 1.5, BPFSeconds: 0.002000250, BPFRuns: 4005, IterSeconds: 0.001, Programs: 3,
		RSSBytes: (30000 + 1000 + 24) * 1024, MapBytes: 4096 + 8192 + 100, Maps: 3}
	if !near(c.CPUSeconds, want.CPUSeconds) || !near(c.BPFSeconds, want.BPFSeconds) || c.BPFRuns != want.BPFRuns ||
		!near(c.IterSeconds, want.IterSeconds) || c.Programs != want.Programs || c.RSSBytes != want.RSSBytes ||
		c.MapBytes != want.MapBytes || c.Maps != want.Maps {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}

func TestParseFdinfo(t *testing.T) {
	f, err := parseFdinfo(strings.NewReader(progInfo(1554, 80486, 110)))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := f.uint("run_time_ns"); !ok || n != 80486 {
		t.Errorf("run_time_ns %d %v", n, ok)
	}
	if _, ok := f.uint("nothing"); ok {
		t.Error("a missing key found")
	}
	if _, err := parseFdinfo(strings.NewReader("no colon\n")); err == nil {
		t.Error("a line without colon parsed")
	}
}

// TestDiffPerProgram: with names, each non-iterator program's run time
// and count over the window, programs of one name summed; iterators and
// idle programs left out.
func TestDiffPerProgram(t *testing.T) {
	names := map[uint32]string{7: "on_data", 8: "dump_tcp", 9: "on_data", 10: "idle"}
	s := func(hookNs, iterNs, runs int) CostSample {
		cs, err := Sampler{FS: procfs.FS{Root: agentTree(t, hookNs, iterNs, runs)}, ProgName: func(id uint32) string { return names[id] }}.Sample(100)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	before, after := s(5000, 300, 10), s(2_005_000, 1_000_300, 4010)
	if before.Programs[7].Name != "on_data" || before.Programs[8].Name != "dump_tcp" {
		t.Fatalf("names %+v", before.Programs)
	}
	after.Programs[9] = BPFProg{ID: 9, Name: "on_data", RunTimeNs: 250, RunCount: 5} // loaded in between
	before.Programs[10] = BPFProg{ID: 10, Name: "idle", RunTimeNs: 40, RunCount: 2}  // did not run
	after.Programs[10] = before.Programs[10]
	c := Diff(before, after)
	want := map[string]ProgCost{"on_data": {RunTimeNs: 2_000_000 + 250, Runs: 4000 + 5}}
	if fmt.Sprint(c.PerProgram) != fmt.Sprint(want) {
		t.Errorf("per program %+v, want %+v", c.PerProgram, want)
	}
	if c.BPFRuns != 4005 {
		t.Errorf("runs %d, want 4005", c.BPFRuns)
	}
}
