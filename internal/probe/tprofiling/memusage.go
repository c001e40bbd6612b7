package tprofiling

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/probe"
)

// memUsageEvery is how often mem_usage samples the observed processes'
// resident memory (gala-gopher: every 60 s, through ps).
const memUsageEvery = 10 * time.Second

// maxMemProcs bounds the processes one mem_usage sample reports: the
// largest (gala-gopher's top 1000 by %mem).
const maxMemProcs = 1000

// memUsage is mem_usage's sampler: resident bytes per observed process
// from /proc/<pid>/statm (resident pages), one event each (event.type
// mem_usage, mem.rss) per memUsageEvery. Run loop only.
type memUsage struct {
	procRoot string
	every    time.Duration
	last     uint64 // CLOCK_MONOTONIC ns of the last sample
	page     int64
}

// sample returns the events of a sample due at mono (none before every
// has passed since the last one).
func (m *memUsage) sample(cfg probe.Config, mono uint64) []Event {
	if m.last != 0 && mono-m.last < uint64(m.every) {
		return nil
	}
	m.last = mono
	ents, err := os.ReadDir(m.procRoot)
	if err != nil {
		return nil
	}
	var evs []Event
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || (cfg.Targets != nil && !cfg.Targets.Observed(pid)) {
			continue
		}
		rss, ok := residentBytes(filepath.Join(m.procRoot, e.Name(), "statm"), m.page)
		if !ok || rss == 0 { // gone, or a kernel thread
			continue
		}
		evs = append(evs, Event{PID: uint32(pid), TGID: uint32(pid), Comm: readTrim(filepath.Join(m.procRoot, e.Name(), "comm")),
			Name: "mem_usage", Type: "mem_usage", Start: mono, Count: 1, FD: -1, StackID: -1, Bytes: rss})
	}
	if len(evs) > maxMemProcs {
		sort.Slice(evs, func(i, j int) bool { return evs[i].Bytes > evs[j].Bytes })
		evs = evs[:maxMemProcs]
	}
	return evs
}

// residentBytes reads statm's second field (resident pages) as bytes.
func residentBytes(path string, page int64) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return n * page, true
}
