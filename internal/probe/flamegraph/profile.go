package flamegraph

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// kind is a profile type: a sub-item and its output directory name.
type kind int

const (
	onCPU kind = iota
	offCPU
	mem      // page faults, in bytes
	memGlibc // malloc family, in bytes; with the live bytes
	nKinds
)

func (k kind) String() string { return [...]string{"oncpu", "offcpu", "mem", "mem_glibc"}[k] }

// parseKind is the inverse of String.
func parseKind(s string) (kind, bool) {
	for k := range nKinds {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// title and unit are the SVG's title and count name, as gala-gopher's
// flamegraph.pl invocations name them.
func (k kind) title() string {
	return [...]string{"On-CPU Time Flame Graph", "Off-CPU Time Flame Graph", "Memory Flame Graph", "Memory (glibc) Flame Graph"}[k]
}

func (k kind) unit() string { return [...]string{"samples", "us", "bytes", "bytes"}[k] }

// isMem tells the kinds counted in bytes, with an object count.
func (k kind) isMem() bool { return k == mem || k == memGlibc }

// live is one stack's blocks not yet freed (mem_glibc).
type live struct{ bytes, objects uint64 }

// procProfile is one process's stacks of one kind over a window: folded
// stack (frames root to leaf, joined by ";", without the process frame) to
// count (samples for oncpu, µs off CPU for offcpu, bytes for the memory
// kinds).
type procProfile struct {
	pid    int
	comm   string
	con    string // container name ("" outside containers)
	pod    string // pod name
	stacks map[string]uint64
	objs   map[string]uint64 // memory kinds: page faults or allocations per stack
	live   map[string]live   // mem_glibc: the blocks live at the window's end
}

// empty is a profile of the same process with nothing counted.
func (p *procProfile) empty() *procProfile {
	return &procProfile{pid: p.pid, comm: p.comm, con: p.con, pod: p.pod, stacks: map[string]uint64{}}
}

// add counts v (and objs objects) for stack.
func (p *procProfile) add(stack string, v, objs uint64) {
	p.stacks[stack] += v
	if objs > 0 {
		if p.objs == nil {
			p.objs = map[string]uint64{}
		}
		p.objs[stack] += objs
	}
}

// base are the bottom frames gala-gopher gives every stack of a process:
// "[Pod]<pod>;[Con]<container>;[<pid>]<comm>", the first two only in pods
// and containers.
func (p *procProfile) base() []string {
	var out []string
	if p.pod != "" {
		out = append(out, "[Pod]"+frameName(p.pod))
	}
	if p.con != "" {
		out = append(out, "[Con]"+frameName(p.con))
	}
	return append(out, fmt.Sprintf("[%d]%s", p.pid, p.comm))
}

// total is the sum of the counts.
func (p *procProfile) total() uint64 {
	var n uint64
	for _, c := range p.stacks {
		n += c
	}
	return n
}

// foldedLine is one "a;b;c count" line.
type foldedLine struct {
	frames []string // root to leaf
	count  uint64
}

// lines are the process's folded stacks, the base frames first, sorted.
func (p *procProfile) lines() []foldedLine { return p.linesOf(p.stacks) }

// liveLines are the folded stacks of the live bytes (mem_glibc).
func (p *procProfile) liveLines() []foldedLine {
	m := make(map[string]uint64, len(p.live))
	for s, l := range p.live {
		m[s] = l.bytes
	}
	return p.linesOf(m)
}

func (p *procProfile) linesOf(stacks map[string]uint64) []foldedLine {
	out := make([]foldedLine, 0, len(stacks))
	for s, c := range stacks {
		fr := p.base()
		if s != "" {
			fr = append(fr, strings.Split(s, ";")...)
		}
		out = append(out, foldedLine{fr, c})
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join(out[i].frames, ";") < strings.Join(out[j].frames, ";")
	})
	return out
}

// writeFolded writes lines in the folded format flamegraph.pl reads.
func writeFolded(w io.Writer, lines []foldedLine) error {
	bw := bufio.NewWriter(w)
	for _, l := range lines {
		if _, err := fmt.Fprintf(bw, "%s %d\n", strings.Join(l.frames, ";"), l.count); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// parseFolded reads the folded format (the inverse of writeFolded).
func parseFolded(r io.Reader) ([]foldedLine, error) {
	var out []foldedLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			return nil, fmt.Errorf("folded: no count in %q", line)
		}
		n, err := strconv.ParseUint(line[i+1:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("folded: %w", err)
		}
		out = append(out, foldedLine{strings.Split(line[:i], ";"), n})
	}
	return out, sc.Err()
}

// frameName makes a symbol safe for the folded format, where ';' separates
// frames and the last ' ' the count.
func frameName(s string) string {
	if strings.ContainsAny(s, "; \n") {
		s = strings.NewReplacer(";", ":", " ", "_", "\n", "_").Replace(s)
	}
	return s
}

// toPprof builds a pprof profile of the processes' stacks. Locations are
// named frames (the addresses were symbolised in the agent), one Function
// per name; the base frames become pid, comm, container and pod labels.
// oncpu carries samples and cpu ns (samples × period); offcpu carries µs
// off CPU; mem carries alloc_objects (page faults) and alloc_space (bytes);
// mem_glibc carries alloc_objects, alloc_space, inuse_objects and
// inuse_space as Go's heap profiles name them (inuse_space the default).
func toPprof(k kind, procs []*procProfile, period time.Duration, start time.Time, dur time.Duration) *profile.Profile {
	p := &profile.Profile{
		TimeNanos:     start.UnixNano(),
		DurationNanos: dur.Nanoseconds(),
	}
	switch k {
	case onCPU:
		p.SampleType = []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}
		p.PeriodType = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}
		p.Period = period.Nanoseconds()
	case offCPU:
		p.SampleType = []*profile.ValueType{{Type: "offcpu", Unit: "microseconds"}}
		p.PeriodType = &profile.ValueType{Type: "offcpu", Unit: "microseconds"}
		p.Period = 1
	case mem, memGlibc:
		p.SampleType = []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}
		if k == memGlibc {
			p.SampleType = append(p.SampleType, &profile.ValueType{Type: "inuse_objects", Unit: "count"}, &profile.ValueType{Type: "inuse_space", Unit: "bytes"})
			p.DefaultSampleType = "inuse_space"
		}
		p.PeriodType = &profile.ValueType{Type: "space", Unit: "bytes"}
		p.Period = 1 // every allocation, not a sample
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(funcs) + 1), Name: name, SystemName: name}
		funcs[name] = f
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: f}}}
		locs[name] = l
		p.Location = append(p.Location, l)
		return l
	}
	for _, pp := range procs {
		nbase := len(pp.base())
		lines := pp.lines()
		if k == memGlibc {
			lines = pp.linesOf(pp.memStacks())
		}
		for _, ln := range lines {
			fr := ln.frames[nbase:]
			s := &profile.Sample{
				Label:    map[string][]string{"comm": {pp.comm}},
				NumLabel: map[string][]int64{"pid": {int64(pp.pid)}},
			}
			if pp.con != "" {
				s.Label["container"] = []string{pp.con}
			}
			if pp.pod != "" {
				s.Label["pod"] = []string{pp.pod}
			}
			// pprof lists a sample's locations leaf first.
			for i := len(fr) - 1; i >= 0; i-- {
				s.Location = append(s.Location, loc(fr[i]))
			}
			stack := strings.Join(fr, ";")
			switch k {
			case onCPU:
				s.Value = []int64{int64(ln.count), int64(ln.count) * period.Nanoseconds()}
			case offCPU:
				s.Value = []int64{int64(ln.count)}
			case mem:
				s.Value = []int64{int64(pp.objs[stack]), int64(ln.count)}
			case memGlibc:
				l := pp.live[stack]
				s.Value = []int64{int64(pp.objs[stack]), int64(pp.stacks[stack]), int64(l.objects), int64(l.bytes)}
			}
			p.Sample = append(p.Sample, s)
		}
	}
	return p
}

// memStacks are the stacks with allocations or live blocks (mem_glibc: a
// block allocated in an earlier window may still be live), each mapped to
// 1: linesOf needs a count, toPprof takes the values from the maps.
func (p *procProfile) memStacks() map[string]uint64 {
	out := make(map[string]uint64, len(p.stacks)+len(p.live))
	for s := range p.stacks {
		out[s] = 1
	}
	for s := range p.live {
		out[s] = 1
	}
	return out
}
