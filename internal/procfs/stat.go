package procfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// CPUTimes are the time counters of one "cpu" line of /proc/stat, in clock
// ticks (UserHZ per second). Guest and GuestNice are already included in
// User and Nice.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal, Guest, GuestNice uint64
}

// Total is the sum of the first eight columns, every state a CPU can be in.
func (c CPUTimes) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// Busy is Total without the idle and iowait time.
func (c CPUTimes) Busy() uint64 { return c.Total() - c.Idle - c.IOWait }

// CPUStat is one "cpuN" line.
type CPUStat struct {
	ID int
	CPUTimes
}

// Stat is /proc/stat.
type Stat struct {
	// Total is the aggregate "cpu" line.
	Total CPUTimes
	// CPUs are the "cpuN" lines of the online CPUs, in file order.
	CPUs []CPUStat
	// BootTime is "btime", the boot time in seconds since the epoch.
	BootTime         uint64
	ContextSwitches  uint64
	ProcessesCreated uint64
	ProcsRunning     uint64
	ProcsBlocked     uint64
}

// Stat reads /proc/stat.
func (fs FS) Stat() (Stat, error) { return parseFile(fs.proc("stat"), parseStat) }

func parseCPUTimes(fields []string) (CPUTimes, error) {
	// Kernels since 2.6.33 print ten columns; older ones fewer. Eight
	// (through steal) are needed for a meaningful total.
	if len(fields) < 8 {
		return CPUTimes{}, fmt.Errorf("cpu line has %d columns, want at least 8", len(fields))
	}
	if len(fields) > 10 {
		fields = fields[:10]
	}
	v, err := parseUints(fields)
	if err != nil {
		return CPUTimes{}, err
	}
	v = append(v, make([]uint64, 10-len(v))...)
	return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4],
		IRQ: v[5], SoftIRQ: v[6], Steal: v[7], Guest: v[8], GuestNice: v[9]}, nil
}

func parseStat(r io.Reader) (Stat, error) {
	var st Stat
	seenTotal := false
	s := newScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		switch key := f[0]; {
		case key == "cpu":
			t, err := parseCPUTimes(f[1:])
			if err != nil {
				return Stat{}, err
			}
			st.Total, seenTotal = t, true
		case strings.HasPrefix(key, "cpu"):
			id, err := strconv.Atoi(key[3:])
			if err != nil {
				return Stat{}, fmt.Errorf("bad cpu line %q", key)
			}
			t, err := parseCPUTimes(f[1:])
			if err != nil {
				return Stat{}, err
			}
			st.CPUs = append(st.CPUs, CPUStat{ID: id, CPUTimes: t})
		case key == "btime", key == "ctxt", key == "processes", key == "procs_running", key == "procs_blocked":
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return Stat{}, fmt.Errorf("%s: %w", key, err)
			}
			switch key {
			case "btime":
				st.BootTime = v
			case "ctxt":
				st.ContextSwitches = v
			case "processes":
				st.ProcessesCreated = v
			case "procs_running":
				st.ProcsRunning = v
			case "procs_blocked":
				st.ProcsBlocked = v
			}
		}
	}
	if err := s.Err(); err != nil {
		return Stat{}, err
	}
	if !seenTotal {
		return Stat{}, errors.New("no cpu line")
	}
	return st, nil
}

// Softirqs is /proc/softirqs: per softirq type, one counter per CPU column.
type Softirqs struct {
	// CPUs are the CPU ids of the columns, from the header (CPU0 CPU1 ...).
	CPUs []int
	// Counts maps a softirq name without its colon (TIMER, NET_RX, SCHED,
	// RCU, ...) to its per-column counts.
	Counts map[string][]uint64
}

// Get returns the count of softirq name on CPU cpu.
func (s Softirqs) Get(name string, cpu int) (uint64, bool) {
	counts, ok := s.Counts[name]
	if !ok {
		return 0, false
	}
	for i, id := range s.CPUs {
		if id == cpu && i < len(counts) {
			return counts[i], true
		}
	}
	return 0, false
}

// Softirqs reads /proc/softirqs.
func (fs FS) Softirqs() (Softirqs, error) { return parseFile(fs.proc("softirqs"), parseSoftirqs) }

func parseSoftirqs(r io.Reader) (Softirqs, error) {
	out := Softirqs{Counts: map[string][]uint64{}}
	s := newScanner(r)
	header := true
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		if header {
			header = false
			for _, c := range f {
				id, err := strconv.Atoi(strings.TrimPrefix(c, "CPU"))
				if err != nil || !strings.HasPrefix(c, "CPU") {
					return Softirqs{}, fmt.Errorf("bad header column %q", c)
				}
				out.CPUs = append(out.CPUs, id)
			}
			continue
		}
		name, ok := strings.CutSuffix(f[0], ":")
		if !ok {
			return Softirqs{}, fmt.Errorf("bad line %q", s.Text())
		}
		v, err := parseUints(f[1:])
		if err != nil {
			return Softirqs{}, fmt.Errorf("%s: %w", name, err)
		}
		if len(v) != len(out.CPUs) {
			return Softirqs{}, fmt.Errorf("%s has %d columns, header %d", name, len(v), len(out.CPUs))
		}
		out.Counts[name] = v
	}
	if err := s.Err(); err != nil {
		return Softirqs{}, err
	}
	if header {
		return Softirqs{}, errors.New("empty file")
	}
	return out, nil
}

// SoftnetStat is one line (one CPU) of /proc/net/softnet_stat.
type SoftnetStat struct {
	CPU            int
	Processed      uint64
	Dropped        uint64 // backlog queue full (netdev_max_backlog)
	TimeSqueeze    uint64
	CPUCollision   uint64
	ReceivedRPS    uint64 // woken by an inter-processor interrupt to process packets (RPS)
	FlowLimitCount uint64
}

// SoftnetStat reads /proc/net/softnet_stat.
func (fs FS) SoftnetStat() ([]SoftnetStat, error) {
	return parseFile(fs.proc("net", "softnet_stat"), parseSoftnetStat)
}

func parseSoftnetStat(r io.Reader) ([]SoftnetStat, error) {
	var out []SoftnetStat
	s := newScanner(r)
	for row := 0; s.Scan(); row++ {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		// Columns are hexadecimal. Kernels since 2.6.36 have at least 10;
		// since 5.10 the 13th is the CPU id (earlier, rows skip offline
		// CPUs, so the row number is only a guess).
		if len(f) < 10 {
			return nil, fmt.Errorf("row %d has %d columns, want at least 10", row, len(f))
		}
		v := make([]uint64, len(f))
		for i, x := range f {
			n, err := strconv.ParseUint(x, 16, 64)
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", row, err)
			}
			v[i] = n
		}
		st := SoftnetStat{CPU: row, Processed: v[0], Dropped: v[1], TimeSqueeze: v[2],
			CPUCollision: v[8], ReceivedRPS: v[9]}
		if len(v) > 10 {
			st.FlowLimitCount = v[10]
		}
		if len(v) > 12 {
			st.CPU = int(v[12])
		}
		out = append(out, st)
	}
	return out, s.Err()
}

// CPUInfo is what galago uses of one processor block of /proc/cpuinfo.
type CPUInfo struct {
	Processor int
	// MHz is "cpu MHz"; HasMHz is false on architectures that do not
	// print it (arm64, for instance).
	MHz    float64
	HasMHz bool
	Flags  []string
}

// CPUInfo reads /proc/cpuinfo.
func (fs FS) CPUInfo() ([]CPUInfo, error) { return parseFile(fs.proc("cpuinfo"), parseCPUInfo) }

func parseCPUInfo(r io.Reader) ([]CPUInfo, error) {
	var out []CPUInfo
	s := newScanner(r)
	for s.Scan() {
		key, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			id, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("processor %q: %w", val, err)
			}
			out = append(out, CPUInfo{Processor: id})
		case "cpu MHz":
			if len(out) == 0 {
				continue
			}
			mhz, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return nil, fmt.Errorf("cpu MHz %q: %w", val, err)
			}
			out[len(out)-1].MHz, out[len(out)-1].HasMHz = mhz, true
		case "flags", "Features":
			if len(out) > 0 {
				out[len(out)-1].Flags = strings.Fields(val)
			}
		}
	}
	return out, s.Err()
}

// CPUCurFreqKHz reads the current frequency of a CPU from cpufreq
// (scaling_cur_freq), the fallback when /proc/cpuinfo has no "cpu MHz".
func (fs FS) CPUCurFreqKHz(cpu int) (uint64, error) {
	return readUint(fs.sys("devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "cpufreq", "scaling_cur_freq"))
}

var cpuDirRE = regexp.MustCompile(`^cpu[0-9]+$`)

// CPUsConfigured counts the CPU directories under /sys/devices/system/cpu,
// which is what sysconf(_SC_NPROCESSORS_CONF) reports.
func (fs FS) CPUsConfigured() (int, error) {
	ents, err := os.ReadDir(fs.sys("devices", "system", "cpu"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if cpuDirRE.MatchString(e.Name()) {
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("no cpuN directory under /sys/devices/system/cpu")
	}
	return n, nil
}

// Uptime reads /proc/uptime: seconds since boot.
func (fs FS) Uptime() (float64, error) { return parseFile(fs.proc("uptime"), parseUptime) }

func parseUptime(r io.Reader) (float64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty file")
	}
	return strconv.ParseFloat(f[0], 64)
}
