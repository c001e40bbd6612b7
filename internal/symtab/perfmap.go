package symtab

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// MaxPerfMapEntries bounds the entries kept of one perf map: a JVM's code
// cache holds some thousands of blobs (tens of thousands for a large
// application), each line a few dozen bytes of memory here.
const MaxPerfMapEntries = 1 << 18

// maxPerfMapLine bounds one line (a method's signature).
const maxPerfMapLine = 64 << 10

// PerfMap is a JIT's symbol map, the /tmp/perf-<pid>.map format perf(1)
// reads: one "START SIZE name" line per code blob, START and SIZE in hex
// (with or without 0x). Sorted by start; Lookup is a binary search.
type PerfMap struct {
	starts []uint64
	ends   []uint64
	names  []string
}

// ParsePerfMap reads a perf map, keeping at most max entries (the first
// ones: a JVM writes its code cache in address order). dropped counts the
// entries beyond max. A malformed line is an error naming it.
func ParsePerfMap(r io.Reader, max int) (pm *PerfMap, dropped int, err error) {
	type ent struct {
		start, end uint64
		name       string
	}
	var es []ent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPerfMapLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		a, rest, ok1 := strings.Cut(line, " ")
		s, name, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 {
			return nil, 0, fmt.Errorf("perf map line %d: %q: want \"START SIZE name\"", n, line)
		}
		start, err := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("perf map line %d: start %q: %w", n, a, err)
		}
		size, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil || start+size < start {
			return nil, 0, fmt.Errorf("perf map line %d: size %q", n, s)
		}
		if len(es) >= max {
			dropped++
			continue
		}
		es = append(es, ent{start, start + size, javaName(name)})
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("perf map: %w", err)
	}
	// A later line for the same start wins (code freed and reused).
	sort.SliceStable(es, func(i, j int) bool { return es[i].start < es[j].start })
	pm = &PerfMap{starts: make([]uint64, 0, len(es)), ends: make([]uint64, 0, len(es)), names: make([]string, 0, len(es))}
	for i, e := range es {
		if i+1 < len(es) && es[i+1].start == e.start {
			continue
		}
		pm.starts = append(pm.starts, e.start)
		pm.ends = append(pm.ends, e.end)
		pm.names = append(pm.names, e.name)
	}
	return pm, dropped, nil
}

// javaName shortens a HotSpot method name, "long Burner.spinHot(long)",
// to "Burner.spinHot(long)": the return type dropped, the parameters
// without spaces, so a frame is one word as in other profilers. Other
// entries ("Interpreter", "StubRoutines (1)") stay as written.
func javaName(s string) string {
	i := strings.IndexByte(s, '(')
	if i <= 0 || s[i-1] == ' ' || !strings.HasSuffix(s, ")") {
		return s
	}
	if j := strings.LastIndexByte(s[:i], ' '); j >= 0 {
		s = s[j+1:]
	}
	return strings.ReplaceAll(s, ", ", ",")
}

// Len is the number of entries.
func (pm *PerfMap) Len() int { return len(pm.starts) }

// Lookup names pc: the entry with the highest start at or below pc, if
// pc is inside it.
func (pm *PerfMap) Lookup(pc uint64) (string, bool) {
	i := sort.Search(len(pm.starts), func(i int) bool { return pm.starts[i] > pc }) - 1
	if i < 0 || pc >= pm.ends[i] {
		return "", false
	}
	return pm.names[i], true
}
