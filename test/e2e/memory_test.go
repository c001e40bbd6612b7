package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bench"
)

// mapBudget is issue 8's bound on the BPF map memory of galago with
// tcp, socket and l7 on, at their defaults (the map sizes do not depend on
// the sub-items, the protocols or support_ssl).
const mapBudget = 32 << 20

// checkMapBudget checks that the kernel's accounting (fdinfo memlock) of
// every BPF map the daemon holds, the ones it loads for itself (process
// tracking) included, stays within issue 8's budget, the probes of set
// running: a larger default bound, a new preallocated map or ring fails
// here rather than in a benchmark. The maps are listed in the log, largest
// first. It costs a read of the daemon's fds.
func checkMapBudget(t *testing.T, d *daemon, set string) {
	t.Helper()
	pid := d.cmd.Process.Pid
	cs, err := bench.Sampler{}.Sample(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BPF maps with %s: %d maps, %.1f MiB (budget %d MiB):\n%s", set, cs.Maps, float64(cs.MapBytes)/(1<<20), mapBudget>>20, mapTable(t, pid))
	if cs.MapBytes > mapBudget {
		t.Errorf("BPF maps of galago with %s: %d bytes (%.1f MiB), over the %d MiB budget", set, cs.MapBytes, float64(cs.MapBytes)/(1<<20), mapBudget>>20)
	}
}

// mapTable lists the distinct BPF maps pid holds: memlock, name, type,
// max_entries and flags, largest first.
func mapTable(t *testing.T, pid int) string {
	t.Helper()
	type row struct {
		memlock uint64
		line    string
	}
	var rows []row
	seen := map[uint64]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if target, _ := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), e.Name())); target != "anon_inode:bpf-map" {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		var id, memlock uint64
		for line := range strings.Lines(string(info)) {
			fmt.Sscanf(line, "map_id:\t%d", &id)
			fmt.Sscanf(line, "memlock:\t%d", &memlock)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		desc := fmt.Sprintf("map %d", id)
		if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
			if mi, err := m.Info(); err == nil {
				desc = fmt.Sprintf("%-16s %-12s max_entries %-8d flags %#x", mi.Name, mi.Type, mi.MaxEntries, mi.Flags)
			}
			m.Close()
		}
		rows = append(rows, row{memlock, fmt.Sprintf("%9.1f KiB  %s", float64(memlock)/1024, desc)})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.memlock) - int(a.memlock) })
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.line + "\n")
	}
	return b.String()
}
