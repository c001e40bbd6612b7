package procfs

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	prom "github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
)

// The audit against github.com/prometheus/procfs (node_exporter's parsers):
// every file both parse is read once from this machine into a snapshot
// tree, and both parse the same bytes; every value both report must be
// equal. The library is used here only: see the package doc for why galago
// keeps its own parsers.

// snapshot copies the live files (host paths) into a temporary root and
// returns it; a file the kernel does not provide fails the test.
func snapshot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func promFS(t *testing.T, root string) prom.FS {
	t.Helper()
	fs, err := prom.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// same reports each pair that differs.
func same(t *testing.T, what string, pairs ...any) {
	t.Helper()
	for i := 0; i+2 < len(pairs)+1; i += 3 {
		name, ours, theirs := pairs[i], pairs[i+1], pairs[i+2]
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s %s: galago %v, prometheus/procfs %v", what, name, ours, theirs)
		}
	}
}

func TestAgainstPrometheusProcfs(t *testing.T) {
	// The test process's own files, under its pid (the library takes the
	// pid from the directory name).
	pid := os.Getpid()
	selfDir := "proc/" + strconv.Itoa(pid)
	root := snapshot(t, map[string]string{
		"proc/stat":               "/proc/stat",
		"proc/meminfo":            "/proc/meminfo",
		"proc/diskstats":          "/proc/diskstats",
		"proc/net/dev":            "/proc/net/dev",
		"proc/softirqs":           "/proc/softirqs",
		"proc/net/softnet_stat":   "/proc/net/softnet_stat",
		"proc/cpuinfo":            "/proc/cpuinfo",
		selfDir + "/stat":         "/proc/self/stat",
		selfDir + "/status":       "/proc/self/status",
		selfDir + "/io":           "/proc/self/io",
		selfDir + "/limits":       "/proc/self/limits",
		selfDir + "/mountinfo":    "/proc/self/mountinfo",
		selfDir + "/smaps_rollup": "/proc/self/smaps_rollup",
		selfDir + "/net/snmp":     "/proc/self/net/snmp",
		selfDir + "/net/netstat":  "/proc/self/net/netstat",
	})
	ours, theirs := FS{Root: root}, promFS(t, root)
	proc, err := theirs.Proc(pid)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("stat", func(t *testing.T) {
		o, err := ours.Stat()
		must(err)
		p, err := theirs.Stat()
		must(err)
		cpu := func(what string, c CPUTimes, s prom.CPUStat) {
			sec := func(ticks uint64) float64 { return float64(ticks) / UserHZ }
			same(t, what, "user", sec(c.User), s.User, "nice", sec(c.Nice), s.Nice, "system", sec(c.System), s.System,
				"idle", sec(c.Idle), s.Idle, "iowait", sec(c.IOWait), s.Iowait, "irq", sec(c.IRQ), s.IRQ,
				"softirq", sec(c.SoftIRQ), s.SoftIRQ, "steal", sec(c.Steal), s.Steal, "guest", sec(c.Guest), s.Guest,
				"guest_nice", sec(c.GuestNice), s.GuestNice)
		}
		cpu("cpu", o.Total, p.CPUTotal)
		if len(o.CPUs) != len(p.CPU) {
			t.Errorf("%d cpuN lines, prometheus/procfs %d", len(o.CPUs), len(p.CPU))
		}
		for _, c := range o.CPUs {
			cpu("cpu"+strconv.Itoa(c.ID), c.CPUTimes, p.CPU[int64(c.ID)])
		}
		same(t, "stat", "btime", o.BootTime, p.BootTime, "ctxt", o.ContextSwitches, p.ContextSwitches,
			"processes", o.ProcessesCreated, p.ProcessCreated, "procs_running", o.ProcsRunning, p.ProcessesRunning,
			"procs_blocked", o.ProcsBlocked, p.ProcessesBlocked)
	})

	t.Run("meminfo", func(t *testing.T) {
		o, err := ours.Meminfo()
		must(err)
		p, err := theirs.Meminfo()
		must(err)
		// The library's fields are the kernel's names without "(", ")"
		// and "_" ("Active(anon)" is ActiveAnon, "HugePages_Total"
		// HugePagesTotal), in the file's units (kB), as *uint64.
		byField := map[string]string{}
		for k := range o {
			byField[libraryName(k)] = k
		}
		v := reflect.ValueOf(p)
		compared := 0
		for i := range v.NumField() {
			name, f := v.Type().Field(i).Name, v.Field(i)
			if f.Kind() != reflect.Pointer || f.IsNil() || strings.HasSuffix(name, "Bytes") {
				continue
			}
			key, ok := byField[name]
			if !ok {
				t.Errorf("meminfo: prometheus/procfs has %s, galago has no such line", name)
				continue
			}
			compared++
			same(t, "meminfo", key, o[key], f.Elem().Interface())
		}
		if compared < len(o)/2 {
			t.Errorf("meminfo: only %d of galago's %d lines compared", compared, len(o))
		}
	})

	t.Run("diskstats", func(t *testing.T) {
		o, err := ours.Diskstats()
		must(err)
		bfs, err := blockdevice.NewFS(filepath.Join(root, "proc"), "/sys")
		must(err)
		p, err := bfs.ProcDiskstats()
		must(err)
		if len(o) != len(p) {
			t.Fatalf("%d devices, prometheus/procfs %d", len(o), len(p))
		}
		for i, d := range o {
			q := p[i]
			same(t, "diskstats "+d.Name, "major", d.Major, q.MajorNumber, "minor", d.Minor, q.MinorNumber, "name", d.Name, q.DeviceName,
				"reads", d.ReadIOs, q.ReadIOs, "read merges", d.ReadMerges, q.ReadMerges, "read sectors", d.ReadSectors, q.ReadSectors,
				"read ticks", d.ReadTicks, q.ReadTicks, "writes", d.WriteIOs, q.WriteIOs, "write merges", d.WriteMerges, q.WriteMerges,
				"write sectors", d.WriteSectors, q.WriteSectors, "write ticks", d.WriteTicks, q.WriteTicks,
				"in flight", d.InFlight, q.IOsInProgress, "io ticks", d.IOTicks, q.IOsTotalTicks, "time in queue", d.TimeInQueue, q.WeightedIOTicks,
				"discards", d.DiscardIOs, q.DiscardIOs, "discard merges", d.DiscardMerges, q.DiscardMerges,
				"discard sectors", d.DiscardSectors, q.DiscardSectors, "discard ticks", d.DiscardTicks, q.DiscardTicks,
				"flushes", d.FlushIOs, q.FlushRequestsCompleted, "flush ticks", d.FlushTicks, q.TimeSpentFlushing)
		}
	})

	t.Run("net/dev", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, "proc/net/dev"))
		must(err)
		o, err := ParseNetDev(bytes.NewReader(b))
		must(err)
		p, err := theirs.NetDev()
		must(err)
		if len(o) != len(p) {
			t.Errorf("%d interfaces, prometheus/procfs %d", len(o), len(p))
		}
		for name, d := range o {
			q, ok := p[name]
			if !ok {
				t.Errorf("net/dev: prometheus/procfs has no %s", name)
				continue
			}
			same(t, "net/dev "+name, "rx bytes", d.RxBytes, q.RxBytes, "rx packets", d.RxPackets, q.RxPackets,
				"rx errors", d.RxErrors, q.RxErrors, "rx dropped", d.RxDropped, q.RxDropped,
				"tx bytes", d.TxBytes, q.TxBytes, "tx packets", d.TxPackets, q.TxPackets,
				"tx errors", d.TxErrors, q.TxErrors, "tx dropped", d.TxDropped, q.TxDropped)
		}
	})

	t.Run("softirqs", func(t *testing.T) {
		o, err := ours.Softirqs()
		must(err)
		p, err := theirs.Softirqs()
		must(err)
		for name, q := range map[string][]uint64{"HI": p.Hi, "TIMER": p.Timer, "NET_TX": p.NetTx, "NET_RX": p.NetRx,
			"BLOCK": p.Block, "IRQ_POLL": p.IRQPoll, "TASKLET": p.Tasklet, "SCHED": p.Sched, "HRTIMER": p.HRTimer, "RCU": p.RCU} {
			same(t, "softirqs", name, o.Counts[name], q)
		}
	})

	t.Run("softnet_stat", func(t *testing.T) {
		o, err := ours.SoftnetStat()
		must(err)
		p, err := theirs.NetSoftnetStat()
		must(err)
		if len(o) != len(p) {
			t.Fatalf("%d rows, prometheus/procfs %d", len(o), len(p))
		}
		for i, s := range o {
			q := p[i]
			same(t, "softnet_stat row "+strconv.Itoa(i), "cpu", uint32(s.CPU), q.Index, "processed", uint32(s.Processed), q.Processed,
				"dropped", uint32(s.Dropped), q.Dropped, "time_squeeze", uint32(s.TimeSqueeze), q.TimeSqueezed,
				"cpu_collision", uint32(s.CPUCollision), q.CPUCollision, "received_rps", uint32(s.ReceivedRPS), q.ReceivedRps,
				"flow_limit_count", uint32(s.FlowLimitCount), q.FlowLimitCount)
		}
	})

	t.Run("cpuinfo", func(t *testing.T) {
		o, err := ours.CPUInfo()
		must(err)
		p, err := theirs.CPUInfo()
		must(err)
		if len(o) != len(p) {
			t.Fatalf("%d processors, prometheus/procfs %d", len(o), len(p))
		}
		for i, c := range o {
			same(t, "cpuinfo "+strconv.Itoa(i), "processor", uint(c.Processor), p[i].Processor, "flags", c.Flags, p[i].Flags)
			if c.HasMHz {
				same(t, "cpuinfo "+strconv.Itoa(i), "cpu MHz", c.MHz, p[i].CPUMHz)
			}
		}
	})

	t.Run("pid/stat", func(t *testing.T) {
		o, err := ours.PIDStat(pid)
		must(err)
		p, err := proc.Stat()
		must(err)
		same(t, "pid stat", "pid", o.PID, p.PID, "comm", o.Comm, p.Comm, "state", string(o.State), p.State,
			"ppid", o.PPID, p.PPID, "pgrp", o.PGID, p.PGRP, "session", o.Session, p.Session, "tty", o.TTY, p.TTY,
			"tpgid", o.TPGID, p.TPGID, "flags", o.Flags, uint64(p.Flags),
			"minflt", o.MinFlt, uint64(p.MinFlt), "cminflt", o.CMinFlt, uint64(p.CMinFlt),
			"majflt", o.MajFlt, uint64(p.MajFlt), "cmajflt", o.CMajFlt, uint64(p.CMajFlt),
			"utime", o.UTime, uint64(p.UTime), "stime", o.STime, uint64(p.STime),
			"cutime", o.CUTime, uint64(p.CUTime), "cstime", o.CSTime, uint64(p.CSTime),
			"priority", o.Priority, int64(p.Priority), "nice", o.Nice, int64(p.Nice), "num_threads", o.NumThreads, int64(p.NumThreads),
			"starttime", o.StartTime, p.Starttime, "vsize", o.VSize, uint64(p.VSize), "rss", o.RSS, int64(p.RSS),
			"processor", o.Processor, int(p.Processor), "guest_time", o.GuestTime, uint64(p.GuestTime))
	})

	t.Run("pid/status", func(t *testing.T) {
		o, err := ours.PIDStatus(pid)
		must(err)
		p, err := proc.NewStatus()
		must(err)
		ns := make([]uint64, len(o.NStgid))
		for i, v := range o.NStgid {
			ns[i] = uint64(v)
		}
		var uids, gids [4]uint64
		for i := range 4 {
			uids[i], gids[i] = uint64(o.UIDs[i]), uint64(o.GIDs[i])
		}
		// The library reports memory in bytes; galago as printed, in kB.
		same(t, "pid status", "Name", o.Name, p.Name, "Tgid", o.Tgid, p.TGID, "Pid", o.PID, p.PID, "NSpid", ns, p.NSpids,
			"Uid", uids, p.UIDs, "Gid", gids, p.GIDs,
			"VmSize", o.VmSize*1024, p.VmSize, "VmRSS", o.VmRSS*1024, p.VmRSS, "VmSwap", o.VmSwap*1024, p.VmSwap,
			"voluntary_ctxt_switches", o.VoluntaryCtxtSwitches, p.VoluntaryCtxtSwitches,
			"nonvoluntary_ctxt_switches", o.NonvoluntaryCtxtSwitches, p.NonVoluntaryCtxtSwitches)
	})

	t.Run("pid/io", func(t *testing.T) {
		o, err := ours.PIDIO(pid)
		must(err)
		p, err := proc.IO()
		must(err)
		same(t, "pid io", "rchar", o.RChar, p.RChar, "wchar", o.WChar, p.WChar, "syscr", o.SyscR, p.SyscR, "syscw", o.SyscW, p.SyscW,
			"read_bytes", o.ReadBytes, p.ReadBytes, "write_bytes", o.WriteBytes, p.WriteBytes,
			"cancelled_write_bytes", int64(o.CancelledWriteBytes), p.CancelledWriteBytes)
	})

	t.Run("pid/limits", func(t *testing.T) {
		o, err := ours.PIDLimits(pid)
		must(err)
		p, err := proc.Limits()
		must(err)
		// The library keeps the soft limits, unlimited as MaxUint64.
		for name, v := range map[string]uint64{"Max cpu time": p.CPUTime, "Max file size": p.FileSize, "Max data size": p.DataSize,
			"Max stack size": p.StackSize, "Max core file size": p.CoreFileSize, "Max resident set": p.ResidentSet,
			"Max processes": p.Processes, "Max open files": p.OpenFiles, "Max locked memory": p.LockedMemory,
			"Max address space": p.AddressSpace, "Max file locks": p.FileLocks, "Max pending signals": p.PendingSignals,
			"Max msgqueue size": p.MsqqueueSize, "Max nice priority": p.NicePriority, "Max realtime priority": p.RealtimePriority,
			"Max realtime timeout": p.RealtimeTimeout} {
			l, ok := o[name]
			if !ok {
				t.Errorf("limits: galago has no %q", name)
				continue
			}
			same(t, "limits", name, l.Soft, v)
		}
	})

	t.Run("pid/mountinfo", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, selfDir, "mountinfo"))
		must(err)
		o, err := parseMountinfo(bytes.NewReader(b))
		must(err)
		p, err := proc.MountInfo()
		must(err)
		if len(o) != len(p) {
			t.Fatalf("%d mounts, prometheus/procfs %d", len(o), len(p))
		}
		for i, m := range o {
			q := p[i]
			same(t, "mountinfo "+m.MountPoint, "id", m.ID, q.MountID, "parent", m.ParentID, q.ParentID,
				"major:minor", strconv.Itoa(int(m.Major))+":"+strconv.Itoa(int(m.Minor)), q.MajorMinorVer,
				"root", m.Root, q.Root, "mount point", m.MountPoint, q.MountPoint, "fstype", m.FSType, q.FSType,
				"source", m.Source, q.Source, "options", optionMap(m.Options), q.Options, "super options", optionMap(m.SuperOptions), q.SuperOptions)
		}
	})

	t.Run("pid/smaps_rollup", func(t *testing.T) {
		o, err := ours.SmapsRollup(pid)
		must(err)
		p, err := proc.ProcSMapsRollup()
		must(err)
		// The library reports bytes; galago kB, as printed.
		same(t, "smaps_rollup", "Rss", o.Rss*1024, p.Rss, "Pss", o.Pss*1024, p.Pss,
			"Shared_Clean", o.SharedClean*1024, p.SharedClean, "Shared_Dirty", o.SharedDirty*1024, p.SharedDirty,
			"Private_Clean", o.PrivateClean*1024, p.PrivateClean, "Private_Dirty", o.PrivateDirty*1024, p.PrivateDirty,
			"Referenced", o.Referenced*1024, p.Referenced, "Anonymous", o.Anonymous*1024, p.Anonymous,
			"Swap", o.Swap*1024, p.Swap, "SwapPss", o.SwapPss*1024, p.SwapPss)
	})

	t.Run("net/snmp", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, selfDir, "net/snmp"))
		must(err)
		o, err := parseSNMP(bytes.NewReader(b))
		must(err)
		p, err := proc.Snmp()
		must(err)
		compareSNMP(t, "snmp", o, p)
	})

	t.Run("net/netstat", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, selfDir, "net/netstat"))
		must(err)
		o, err := parseSNMP(bytes.NewReader(b))
		must(err)
		p, err := proc.Netstat()
		must(err)
		compareSNMP(t, "netstat", o, p)
	})
}

// libraryName is a /proc/meminfo key as a prometheus/procfs Meminfo field.
func libraryName(key string) string {
	var b strings.Builder
	up := false
	for _, r := range key {
		switch r {
		case '(', '_':
			up = true
			continue
		case ')':
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// optionMap is a mount option list as prometheus/procfs keeps it.
func optionMap(opts []string) map[string]string {
	m := map[string]string{}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		m[k] = v
	}
	return m
}

// compareSNMP compares every counter of the library's per-protocol
// structs (fields named as the kernel's columns, *float64) with galago's.
func compareSNMP(t *testing.T, what string, o SNMP, p any) {
	t.Helper()
	v := reflect.ValueOf(p)
	compared := 0
	for i := range v.NumField() {
		sec := v.Field(i)
		if sec.Kind() != reflect.Struct {
			continue
		}
		proto := v.Type().Field(i).Name
		for j := range sec.NumField() {
			f := sec.Field(j)
			if f.Kind() != reflect.Pointer || f.IsNil() {
				continue
			}
			name := sec.Type().Field(j).Name
			got, ok := o.Get(proto, name)
			if !ok {
				t.Errorf("%s: prometheus/procfs has %s.%s, galago has not", what, proto, name)
				continue
			}
			compared++
			if want := f.Elem().Float(); float64(got) != want {
				t.Errorf("%s %s.%s: galago %d, prometheus/procfs %v", what, proto, name, got, want)
			}
		}
	}
	if compared < 50 {
		t.Errorf("%s: only %d counters compared", what, compared)
	}
}

// BenchmarkAgainstPrometheusProcfs reads and parses the files galago reads
// per process and per period (the hot paths: every process's stat and
// status each period) with galago's parsers and with prometheus/procfs,
// from the live /proc of this process. The package doc quotes a run.
func BenchmarkAgainstPrometheusProcfs(b *testing.B) {
	pid := os.Getpid()
	ours := FS{}
	theirs, err := prom.NewFS("/proc")
	if err != nil {
		b.Fatal(err)
	}
	proc, err := theirs.Proc(pid)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		ours, their func() error
	}{
		{"pid_stat", func() error { _, err := ours.PIDStat(pid); return err }, func() error { _, err := proc.Stat(); return err }},
		{"pid_status", func() error { _, err := ours.PIDStatus(pid); return err }, func() error { _, err := proc.NewStatus(); return err }},
		{"pid_io", func() error { _, err := ours.PIDIO(pid); return err }, func() error { _, err := proc.IO(); return err }},
		{"stat", func() error { _, err := ours.Stat(); return err }, func() error { _, err := theirs.Stat(); return err }},
		{"meminfo", func() error { _, err := ours.Meminfo(); return err }, func() error { _, err := theirs.Meminfo(); return err }},
	} {
		for lib, read := range map[string]func() error{"galago": c.ours, "prometheus": c.their} {
			b.Run(c.name+"/"+lib, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := read(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
