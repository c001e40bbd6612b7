package jvm

import (
	"regexp"
	"strconv"
	"strings"
)

// Parsers of the diagnostic commands' output (HotSpot 11 to 21 print
// these formats). Each is pure and returns what it found; a line it does
// not know is skipped.

// usage is a memory area's or pool's bytes; a field the source did not
// give is -1.
type usage struct {
	used, committed, max, init int64
}

func unknownUsage() usage { return usage{-1, -1, -1, -1} }

// heapInfo is what GC.heap_info says.
type heapInfo struct {
	heap                usage // the top-level generations or regions, summed
	metaspace, classSpc usage
	heapFound           bool
}

var (
	// " garbage-first heap   total 397312K, used 5003K [...": one
	// top-level line per heap (G1) or generation (Parallel, Serial).
	heapLine = regexp.MustCompile(`^ \S.*\btotal (\d+)K, used (\d+)K`)
	// " Metaspace       used 73K, committed 320K, reserved 1114112K"
	metaLine = regexp.MustCompile(`^\s*(Metaspace|class space)\s+used (\d+)K, committed (\d+)K, reserved (\d+)K`)
)

func parseHeapInfo(s string) heapInfo {
	h := heapInfo{heap: usage{0, 0, -1, -1}, metaspace: unknownUsage(), classSpc: unknownUsage()}
	for _, l := range strings.Split(s, "\n") {
		if m := metaLine.FindStringSubmatch(l); m != nil {
			u := usage{used: kib(m[2]), committed: kib(m[3]), max: -1, init: -1}
			if m[1] == "Metaspace" {
				h.metaspace = u
			} else {
				h.classSpc = u
			}
			continue
		}
		if m := heapLine.FindStringSubmatch(l); m != nil && !strings.HasPrefix(strings.TrimSpace(l), "Metaspace") {
			h.heap.committed += kib(m[1])
			h.heap.used += kib(m[2])
			h.heapFound = true
		}
	}
	return h
}

func kib(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n << 10
}

// codeHeap is one code cache segment of Compiler.codecache.
type codeHeap struct {
	name string // "CodeHeap 'non-profiled nmethods'", or "CodeCache" unsegmented
	u    usage
}

var (
	// "CodeHeap 'non-nmethods': size=5692Kb used=1022Kb max_used=1022Kb free=4669Kb"
	codeLine = regexp.MustCompile(`^(CodeHeap '[^']*'|CodeCache): size=(\d+)Kb used=(\d+)Kb`)
	// " bounds [0x00007f9fc4938000, 0x00007f9fc4ba8000, 0x00007f9fc4ec7000]"
	boundsLine = regexp.MustCompile(`^\s*bounds \[0x([0-9a-f]+), 0x([0-9a-f]+), 0x([0-9a-f]+)\]`)
)

// parseCodeCache reads the segments: used, committed (the bounds' low to
// high) and max (size).
func parseCodeCache(s string) []codeHeap {
	var out []codeHeap
	for _, l := range strings.Split(s, "\n") {
		if m := codeLine.FindStringSubmatch(l); m != nil {
			out = append(out, codeHeap{name: m[1], u: usage{used: kib(m[3]), committed: -1, max: kib(m[2]), init: -1}})
			continue
		}
		if m := boundsLine.FindStringSubmatch(l); m != nil && len(out) > 0 {
			lo, err1 := strconv.ParseUint(m[1], 16, 64)
			hi, err2 := strconv.ParseUint(m[2], 16, 64)
			if err1 == nil && err2 == nil && hi >= lo {
				out[len(out)-1].u.committed = int64(hi - lo)
			}
		}
	}
	return out
}

// parseFlags reads VM.flags' numeric flags ("-XX:MaxHeapSize=6320816128").
func parseFlags(s string) map[string]int64 {
	out := map[string]int64{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(strings.TrimPrefix(f, "-XX:"), "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// parseProperties reads VM.system_properties (java.util.Properties.store
// format: "key=value", backslash escapes, "#" comments).
func parseProperties(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		out[unescape(k)] = unescape(v)
	}
	return out
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'u':
			if i+4 < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// deadlocked counts the threads Thread.print lists in its Java-level
// deadlock reports ("Found one Java-level deadlock:", then one `"name":`
// line per thread of the cycle, up to "Java stack information").
func deadlocked(s string) int {
	n := 0
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, "Found one Java-level deadlock:"):
			in = true
		case strings.HasPrefix(l, "Java stack information for the threads listed above"):
			in = false
		case in && strings.HasPrefix(l, `"`) && strings.HasSuffix(l, `":`):
			n++
		}
	}
	return n
}
