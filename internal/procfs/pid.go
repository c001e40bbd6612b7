package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// PIDs lists the processes (thread-group leaders) in /proc, ascending.
func (fs FS) PIDs() ([]int, error) {
	f, err := os.Open(fs.proc())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '1' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids, nil
}

func (fs FS) pid(pid int, file string) string { return fs.proc(strconv.Itoa(pid), file) }

// PIDStat is /proc/<pid>/stat (proc(5)); times are in clock ticks (UserHZ).
type PIDStat struct {
	PID     int
	Comm    string
	State   byte
	PPID    int
	PGID    int
	Session int
	TTY     int
	TPGID   int
	Flags   uint64

	MinFlt, CMinFlt, MajFlt, CMajFlt uint64
	UTime, STime                     uint64
	CUTime, CSTime                   uint64 // of waited-for children

	Priority   int64
	Nice       int64
	NumThreads int64
	// StartTime is the start time in clock ticks since boot.
	StartTime uint64
	VSize     uint64 // bytes
	RSS       int64  // pages
	Processor int    // CPU last run on
	GuestTime uint64 // included in UTime
}

// PIDStat reads /proc/<pid>/stat.
func (fs FS) PIDStat(pid int) (PIDStat, error) {
	return parseFile(fs.pid(pid, "stat"), parsePIDStat)
}

func parsePIDStat(r io.Reader) (PIDStat, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return PIDStat{}, err
	}
	// comm may hold spaces and parentheses: it runs from the first '(' to
	// the last ')'.
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return PIDStat{}, errors.New("no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return PIDStat{}, fmt.Errorf("pid: %w", err)
	}
	f := strings.Fields(string(b[end+1:]))
	// Field 3 (state) is f[0]; we need through field 43 (guest_time), f[40].
	if len(f) < 41 {
		return PIDStat{}, fmt.Errorf("%d fields after comm, want at least 41", len(f))
	}
	if len(f[0]) != 1 {
		return PIDStat{}, fmt.Errorf("bad state %q", f[0])
	}
	st := PIDStat{PID: pid, Comm: string(b[open+1 : end]), State: f[0][0]}
	p := fieldParser{f: f}
	st.PPID = int(p.int(1))
	st.PGID = int(p.int(2))
	st.Session = int(p.int(3))
	st.TTY = int(p.int(4))
	st.TPGID = int(p.int(5))
	st.Flags = p.uint(6)
	st.MinFlt, st.CMinFlt, st.MajFlt, st.CMajFlt = p.uint(7), p.uint(8), p.uint(9), p.uint(10)
	st.UTime, st.STime = p.uint(11), p.uint(12)
	// cutime and cstime are signed in the kernel's format ("%ld").
	st.CUTime, st.CSTime = uint64(max(p.int(13), 0)), uint64(max(p.int(14), 0))
	st.Priority, st.Nice, st.NumThreads = p.int(15), p.int(16), p.int(17)
	st.StartTime = p.uint(19)
	st.VSize = p.uint(20)
	st.RSS = p.int(21)
	st.Processor = int(p.int(36))
	st.GuestTime = p.uint(40)
	if p.err != nil {
		return PIDStat{}, p.err
	}
	return st, nil
}

// fieldParser parses indexed fields and keeps the first error.
type fieldParser struct {
	f   []string
	err error
}

func (p *fieldParser) int(i int) int64 {
	v, err := strconv.ParseInt(p.f[i], 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("field %d: %w", i+3, err)
	}
	return v
}

func (p *fieldParser) uint(i int) uint64 {
	v, err := strconv.ParseUint(p.f[i], 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("field %d: %w", i+3, err)
	}
	return v
}

// PIDIO is /proc/<pid>/io.
type PIDIO struct {
	RChar, WChar          uint64 // bytes passed to read/write-like syscalls
	SyscR, SyscW          uint64 // read/write-like syscalls
	ReadBytes, WriteBytes uint64 // bytes fetched from / sent to the storage layer
	CancelledWriteBytes   uint64 // dirty page-cache bytes truncated before writeback
}

// PIDIO reads /proc/<pid>/io (needs ptrace-read access to the process).
func (fs FS) PIDIO(pid int) (PIDIO, error) { return parseFile(fs.pid(pid, "io"), parsePIDIO) }

func parsePIDIO(r io.Reader) (PIDIO, error) {
	var v PIDIO
	fields := map[string]*uint64{
		"rchar": &v.RChar, "wchar": &v.WChar, "syscr": &v.SyscR, "syscw": &v.SyscW,
		"read_bytes": &v.ReadBytes, "write_bytes": &v.WriteBytes,
		"cancelled_write_bytes": &v.CancelledWriteBytes,
	}
	seen := 0
	s := newScanner(r)
	for s.Scan() {
		key, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		dst, ok := fields[key]
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return PIDIO{}, fmt.Errorf("%s: %w", key, err)
		}
		*dst = n
		seen++
	}
	if err := s.Err(); err != nil {
		return PIDIO{}, err
	}
	if seen != len(fields) {
		return PIDIO{}, fmt.Errorf("%d of %d counters present", seen, len(fields))
	}
	return v, nil
}

// ErrNoUserMemory is returned for the memory files of a kernel thread or a
// zombie, which are empty.
var ErrNoUserMemory = errors.New("no user address space (kernel thread or exited process)")

// SmapsRollup is /proc/<pid>/smaps_rollup, in kB.
type SmapsRollup struct {
	Rss, Pss                   uint64
	SharedClean, SharedDirty   uint64
	PrivateClean, PrivateDirty uint64
	Referenced, Anonymous      uint64
	LazyFree                   uint64
	Swap, SwapPss              uint64
}

// SmapsRollup reads /proc/<pid>/smaps_rollup (Linux 4.14+; needs
// ptrace-read access). For a kernel thread or a process that just exited
// it returns ErrNoUserMemory.
func (fs FS) SmapsRollup(pid int) (SmapsRollup, error) {
	m, err := parseFile(fs.pid(pid, "smaps_rollup"), parseSmapsRollup)
	if errors.Is(err, syscall.ESRCH) {
		// The kernel refuses to open it for a task without an mm.
		return m, fmt.Errorf("%w: %w", ErrNoUserMemory, err)
	}
	return m, err
}

func parseSmapsRollup(r io.Reader) (SmapsRollup, error) {
	var m SmapsRollup
	fields := map[string]*uint64{
		"Rss": &m.Rss, "Pss": &m.Pss, "Shared_Clean": &m.SharedClean, "Shared_Dirty": &m.SharedDirty,
		"Private_Clean": &m.PrivateClean, "Private_Dirty": &m.PrivateDirty,
		"Referenced": &m.Referenced, "Anonymous": &m.Anonymous, "LazyFree": &m.LazyFree,
		"Swap": &m.Swap, "SwapPss": &m.SwapPss,
	}
	seenRss := false
	s := newScanner(r)
	for s.Scan() {
		key, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue // the first line is the [rollup] address range
		}
		dst, ok := fields[key]
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return SmapsRollup{}, fmt.Errorf("bad line %q", s.Text())
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return SmapsRollup{}, fmt.Errorf("%s: %w", key, err)
		}
		*dst = v
		seenRss = seenRss || key == "Rss"
	}
	if err := s.Err(); err != nil {
		return SmapsRollup{}, err
	}
	if !seenRss {
		return SmapsRollup{}, ErrNoUserMemory
	}
	return m, nil
}

// PIDStatus is what galago uses of /proc/<pid>/status.
type PIDStatus struct {
	Name   string
	State  string // e.g. "S (sleeping)"
	Tgid   int
	PID    int
	PPID   int
	NStgid []int     // tgid in each nested pid namespace, outermost first
	UIDs   [4]uint32 // real, effective, saved, filesystem
	GIDs   [4]uint32
	// Memory in kB; zero for kernel threads.
	VmSize, VmRSS, VmSwap    uint64
	VmHWM                    uint64 // the peak of VmRSS
	Threads                  int
	VoluntaryCtxtSwitches    uint64
	NonvoluntaryCtxtSwitches uint64
}

// PIDStatus reads /proc/<pid>/status.
func (fs FS) PIDStatus(pid int) (PIDStatus, error) {
	return parseFile(fs.pid(pid, "status"), parseStatus)
}

func parseStatus(r io.Reader) (PIDStatus, error) {
	var st PIDStatus
	var err error
	seenPid := false
	s := newScanner(r)
	for s.Scan() && err == nil {
		key, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "Name":
			st.Name = val
		case "State":
			st.State = val
		case "Tgid":
			st.Tgid, err = strconv.Atoi(val)
		case "Pid":
			st.PID, err = strconv.Atoi(val)
			seenPid = true
		case "PPid":
			st.PPID, err = strconv.Atoi(val)
		case "NStgid":
			for _, x := range strings.Fields(val) {
				var n int
				if n, err = strconv.Atoi(x); err != nil {
					break
				}
				st.NStgid = append(st.NStgid, n)
			}
		case "Uid", "Gid":
			dst := &st.UIDs
			if key == "Gid" {
				dst = &st.GIDs
			}
			f := strings.Fields(val)
			if len(f) != 4 {
				err = fmt.Errorf("%s has %d ids", key, len(f))
				break
			}
			for i, x := range f {
				var n uint64
				if n, err = strconv.ParseUint(x, 10, 32); err != nil {
					break
				}
				dst[i] = uint32(n)
			}
		case "VmSize", "VmRSS", "VmSwap", "VmHWM":
			var n uint64
			n, err = strconv.ParseUint(strings.TrimSuffix(val, " kB"), 10, 64)
			switch key {
			case "VmSize":
				st.VmSize = n
			case "VmRSS":
				st.VmRSS = n
			case "VmSwap":
				st.VmSwap = n
			case "VmHWM":
				st.VmHWM = n
			}
		case "Threads":
			st.Threads, err = strconv.Atoi(val)
		case "voluntary_ctxt_switches":
			st.VoluntaryCtxtSwitches, err = strconv.ParseUint(val, 10, 64)
		case "nonvoluntary_ctxt_switches":
			st.NonvoluntaryCtxtSwitches, err = strconv.ParseUint(val, 10, 64)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", key, err)
		}
	}
	if err != nil {
		return PIDStatus{}, err
	}
	if err := s.Err(); err != nil {
		return PIDStatus{}, err
	}
	if !seenPid {
		return PIDStatus{}, errors.New("no Pid line")
	}
	return st, nil
}

// Unlimited is a Limit value of "unlimited".
const Unlimited = math.MaxUint64

// Limit is one row of /proc/<pid>/limits.
type Limit struct{ Soft, Hard uint64 }

// Limits maps a limit's name ("Max open files", "Max processes", ...) to
// its values.
type Limits map[string]Limit

// PIDLimits reads /proc/<pid>/limits.
func (fs FS) PIDLimits(pid int) (Limits, error) {
	return parseFile(fs.pid(pid, "limits"), parseLimits)
}

func parseLimits(r io.Reader) (Limits, error) {
	out := Limits{}
	s := newScanner(r)
	header := true
	for s.Scan() {
		line := s.Text()
		if header {
			header = false
			if !strings.HasPrefix(line, "Limit") {
				return nil, fmt.Errorf("bad header %q", line)
			}
			continue
		}
		// The name column is 26 characters wide and may contain spaces;
		// values follow it. Split after the name, on the last "Max ..." words.
		if len(line) < 26 {
			continue
		}
		name := strings.TrimSpace(line[:26])
		f := strings.Fields(line[26:])
		if len(f) < 2 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		soft, err1 := parseLimit(f[0])
		hard, err2 := parseLimit(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad values in %q", line)
		}
		out[name] = Limit{Soft: soft, Hard: hard}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if header {
		return nil, errors.New("empty file")
	}
	return out, nil
}

func parseLimit(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// PIDFDCount counts the open file descriptors of a process (entries of
// /proc/<pid>/fd; needs ptrace-read access).
func (fs FS) PIDFDCount(pid int) (int, error) {
	f, err := os.Open(fs.pid(pid, "fd"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(1024)
		n += len(names)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
