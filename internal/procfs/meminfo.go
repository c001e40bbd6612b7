package procfs

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Meminfo is /proc/meminfo keyed by the kernel's names (MemTotal,
// Active(anon), HugePages_Total, ...). Values are as printed: kB for the
// lines with a "kB" unit, plain counts for the others (HugePages_*).
type Meminfo map[string]uint64

// Get returns one value and whether the kernel printed it.
func (m Meminfo) Get(name string) (uint64, bool) {
	v, ok := m[name]
	return v, ok
}

// Meminfo reads /proc/meminfo.
func (fs FS) Meminfo() (Meminfo, error) { return parseFile(fs.proc("meminfo"), parseMeminfo) }

func parseMeminfo(r io.Reader) (Meminfo, error) {
	m := Meminfo{}
	s := newScanner(r)
	for s.Scan() {
		key, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return nil, fmt.Errorf("bad line %q", s.Text())
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		m[key] = v
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if _, ok := m["MemTotal"]; !ok {
		return nil, errors.New("no MemTotal")
	}
	return m, nil
}

// DentryState is /proc/sys/fs/dentry-state.
type DentryState struct {
	Dentries uint64 // nr_dentry: allocated dentries
	Unused   uint64 // nr_unused: dentries on the LRU, not in use
	AgeLimit uint64 // age_limit in seconds
	// WantPages and Negative are the fourth and fifth columns
	// (Negative since Linux 5.0; 0 before).
	WantPages uint64
	Negative  uint64
}

// DentryState reads /proc/sys/fs/dentry-state.
func (fs FS) DentryState() (DentryState, error) {
	return parseFile(fs.proc("sys", "fs", "dentry-state"), parseDentryState)
}

func parseDentryState(r io.Reader) (DentryState, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return DentryState{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return DentryState{}, fmt.Errorf("%d columns, want at least 3", len(f))
	}
	v, err := parseUints(f[:min(len(f), 5)])
	if err != nil {
		return DentryState{}, err
	}
	v = append(v, make([]uint64, 5-len(v))...)
	return DentryState{Dentries: v[0], Unused: v[1], AgeLimit: v[2], WantPages: v[3], Negative: v[4]}, nil
}

// VmallocBytes reads /proc/vmallocinfo (root only) and returns the bytes of
// the areas allocated by vmalloc proper. Meminfo's VmallocUsed also counts
// ioremap and vmap areas on older kernels.
func (fs FS) VmallocBytes() (uint64, error) {
	return parseFile(fs.proc("vmallocinfo"), parseVmallocinfo)
}

func parseVmallocinfo(r io.Reader) (uint64, error) {
	var total uint64
	s := newScanner(r)
	for s.Scan() {
		// 0xffffb6c0c0000000-0xffffb6c0c0005000   20480 irq_init_percpu_irqstack+0xca/0x100 vmap
		f := strings.Fields(s.Text())
		if len(f) < 3 || !slices.Contains(f[3:], "vmalloc") {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad size in %q", s.Text())
		}
		total += n
	}
	return total, s.Err()
}
