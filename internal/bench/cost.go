package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/procfs"
)

// userHZ is the unit of utime/stime in /proc/<pid>/stat: USER_HZ is 100 on
// every Linux architecture galago builds for (the ABI fixes it, whatever
// CONFIG_HZ is).
const userHZ = 100

// CostSample is one reading of an agent's footprint, taken from /proc only
// (never from the agent's own self-report), over the agent's process and
// all its descendants.
type CostSample struct {
	// CPUSeconds is utime+stime of every live process of the tree plus
	// cutime+cstime (its reaped children), at USER_HZ resolution (10 ms).
	CPUSeconds float64
	// RSSBytes is VmRSS summed over the tree, HWMBytes VmHWM (each
	// process's peak RSS).
	RSSBytes, HWMBytes uint64
	// Programs are the BPF programs the tree holds a file descriptor of,
	// by program id.
	Programs map[uint32]BPFProg
	// MapBytes is the kernel's memory accounting (fdinfo memlock) of the
	// BPF maps the tree holds, each map counted once.
	MapBytes uint64
	// Maps is how many distinct maps that is.
	Maps int
	// Iterators are the ids of programs attached as BPF iterators (a link
	// of type iter held by the tree): they run inside the agent's own
	// read() calls, so their run time is already in CPUSeconds.
	Iterators map[uint32]bool
	// PIDs is the process tree that was read.
	PIDs []int
}

// BPFProg is what fdinfo tells of one BPF program.
type BPFProg struct {
	ID        uint32
	Name      string // from the kernel's program info when the Sampler has ProgName
	Type      string
	RunTimeNs uint64
	RunCount  uint64
	Memlock   uint64
}

// Sampler reads CostSamples from a /proc tree.
type Sampler struct {
	FS procfs.FS
	// ProgName names a BPF program by id (fdinfo does not); nil leaves
	// names empty.
	ProgName func(id uint32) string
}

// Tree lists root and its descendants (by PPid), root first.
func (s Sampler) Tree(root int) ([]int, error) {
	pids, err := s.FS.PIDs()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, pid := range pids {
		st, err := s.FS.PIDStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		children[st.PPID] = append(children[st.PPID], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// Sample reads the footprint of root's process tree. root itself must be
// alive; descendants that exit during the reading are skipped.
func (s Sampler) Sample(root int) (CostSample, error) {
	tree, err := s.Tree(root)
	if err != nil {
		return CostSample{}, err
	}
	cs := CostSample{Programs: map[uint32]BPFProg{}, Iterators: map[uint32]bool{}, PIDs: tree}
	maps := map[uint32]uint64{}
	for i, pid := range tree {
		st, err := s.FS.PIDStat(pid)
		if err != nil {
			if i == 0 {
				return CostSample{}, fmt.Errorf("agent process %d: %w", pid, err)
			}
			continue
		}
		cs.CPUSeconds += float64(st.UTime+st.STime+st.CUTime+st.CSTime) / userHZ
		if status, err := s.FS.PIDStatus(pid); err == nil {
			cs.RSSBytes += status.VmRSS * 1024
			cs.HWMBytes += status.VmHWM * 1024
		}
		if err := s.readBPFFds(pid, &cs, maps); err != nil && i == 0 {
			return CostSample{}, err
		}
	}
	for _, m := range maps {
		cs.MapBytes += m
	}
	cs.Maps = len(maps)
	return cs, nil
}

// ResetPeak resets the peak RSS (VmHWM) of the processes pids
// (/proc/<pid>/clear_refs), so that a later Sample's HWMBytes is the
// peak since then.
func (s Sampler) ResetPeak(pids []int) error {
	for i, pid := range pids {
		err := os.WriteFile(s.FS.Path(fmt.Sprintf("/proc/%d/clear_refs", pid)), []byte("5"), 0o200)
		if err != nil && i == 0 {
			return fmt.Errorf("reset the peak RSS of %d: %w", pid, err)
		}
	}
	return nil
}

// readBPFFds reads the fdinfo of every BPF program, map and link fd of pid.
func (s Sampler) readBPFFds(pid int, cs *CostSample, maps map[uint32]uint64) error {
	fdDir := s.FS.Path(fmt.Sprintf("/proc/%d/fd", pid))
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return fmt.Errorf("list %s: %w", fdDir, err)
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue
		}
		var kind string
		switch target {
		case "anon_inode:bpf-prog":
			kind = "prog"
		case "anon_inode:bpf-map":
			kind = "map"
		case "anon_inode:bpf_link":
			kind = "link"
		default:
			continue
		}
		f, err := os.Open(s.FS.Path(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name())))
		if err != nil {
			continue // closed meanwhile
		}
		info, err := parseFdinfo(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("fdinfo %d/%s: %w", pid, e.Name(), err)
		}
		switch kind {
		case "prog":
			id, ok := info.uint("prog_id")
			if !ok {
				return fmt.Errorf("fdinfo %d/%s: BPF program without prog_id", pid, e.Name())
			}
			p := BPFProg{ID: uint32(id), Type: info["prog_type"]}
			p.RunTimeNs, _ = info.uint("run_time_ns")
			p.RunCount, _ = info.uint("run_cnt")
			p.Memlock, _ = info.uint("memlock")
			if s.ProgName != nil {
				p.Name = s.ProgName(p.ID)
			}
			cs.Programs[p.ID] = p
		case "map":
			id, ok := info.uint("map_id")
			if !ok {
				return fmt.Errorf("fdinfo %d/%s: BPF map without map_id", pid, e.Name())
			}
			maps[uint32(id)], _ = info.uint("memlock")
		case "link":
			if info["link_type"] == "iter" {
				if id, ok := info.uint("prog_id"); ok {
					cs.Iterators[uint32(id)] = true
				}
			}
		}
	}
	return nil
}

// fdinfo is one /proc/<pid>/fdinfo/<fd>: "key:\tvalue" lines.
type fdinfo map[string]string

func (f fdinfo) uint(key string) (uint64, bool) {
	v, ok := f[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

func parseFdinfo(r io.Reader) (fdinfo, error) {
	out := fdinfo{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("fdinfo line %q: no colon", line)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}

// Cost is an agent's cost over a measured window: the difference of two
// samples, with the state at the end.
type Cost struct {
	// CPUSeconds: the agent's own processes (user+system), including BPF
	// iterators it runs in its read() calls.
	CPUSeconds float64 `json:"cpu_seconds"`
	// BPFSeconds: run time of its BPF programs other than iterators:
	// hooks that run in the context of the observed applications
	// (tracepoints, cgroup programs), charged to them, not to the agent.
	BPFSeconds float64 `json:"bpf_seconds"`
	// BPFRuns is the run count of those programs.
	BPFRuns uint64 `json:"bpf_runs"`
	// IterSeconds: run time of its iterator programs (already in
	// CPUSeconds).
	IterSeconds float64 `json:"iter_seconds"`
	// Programs is the number of programs held at the end.
	Programs int `json:"programs"`
	// RSSBytes, MapBytes and Maps: at the end of the window.
	RSSBytes uint64 `json:"rss_bytes"`
	// HWMBytes is the tree's peak RSS (VmHWM) over the window (the
	// harness resets it at the window's start: Sampler.ResetPeak).
	HWMBytes uint64 `json:"hwm_bytes"`
	MapBytes uint64 `json:"map_bytes"`
	Maps     int    `json:"maps"`
	// PerProgram is the run time and count of each non-iterator program
	// over the window, by program name (programs of one name summed),
	// for finding where the BPF time goes; empty without names.
	PerProgram map[string]ProgCost `json:"per_program,omitempty"`
}

// ProgCost is one program's (or one name's) share of Cost.BPFSeconds.
type ProgCost struct {
	RunTimeNs uint64 `json:"run_time_ns"`
	Runs      uint64 `json:"runs"`
}

// Diff is the cost between two samples of one agent. A program that
// appeared in between counts from zero; one that vanished is lost (its
// run time cannot be read any more), which the harness avoids by taking
// both samples while the agent runs unchanged.
func Diff(before, after CostSample) Cost {
	c := Cost{
		CPUSeconds: after.CPUSeconds - before.CPUSeconds,
		Programs:   len(after.Programs),
		RSSBytes:   after.RSSBytes,
		HWMBytes:   after.HWMBytes,
		MapBytes:   after.MapBytes,
		Maps:       after.Maps,
	}
	for id, p := range after.Programs {
		b := before.Programs[id]
		dt := float64(p.RunTimeNs-min(b.RunTimeNs, p.RunTimeNs)) / 1e9
		dn := p.RunCount - min(b.RunCount, p.RunCount)
		if after.Iterators[id] {
			c.IterSeconds += dt
			continue
		}
		c.BPFSeconds += dt
		c.BPFRuns += dn
		if p.Name != "" && dn > 0 {
			if c.PerProgram == nil {
				c.PerProgram = map[string]ProgCost{}
			}
			pc := c.PerProgram[p.Name]
			pc.RunTimeNs += p.RunTimeNs - min(b.RunTimeNs, p.RunTimeNs)
			pc.Runs += dn
			c.PerProgram[p.Name] = pc
		}
	}
	return c
}
