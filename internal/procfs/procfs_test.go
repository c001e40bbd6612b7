package procfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The fixtures under testdata/ were captured on a 2-CPU Debian 12 VM
// (Linux 6.18); the *_old, *_oddcomm and *_escaped ones are hand-made for
// older kernel formats and odd names. testdata/root is a fake / tree.

func parseFixture[T any](t *testing.T, name string, parse func(io.Reader) (T, error)) T {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return v
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func TestParseStat(t *testing.T) {
	st := parseFixture(t, "stat", parseStat)
	eq(t, "total", st.Total, CPUTimes{User: 34145, System: 11540, Idle: 37555, IOWait: 8403, SoftIRQ: 197, Steal: 136})
	eq(t, "cpus", st.CPUs, []CPUStat{
		{ID: 0, CPUTimes: CPUTimes{User: 16796, System: 5171, Idle: 20883, IOWait: 3025, SoftIRQ: 16, Steal: 65}},
		{ID: 1, CPUTimes: CPUTimes{User: 17348, System: 6368, Idle: 16671, IOWait: 5378, SoftIRQ: 180, Steal: 70}},
	})
	eq(t, "btime", st.BootTime, uint64(1795347457))
	eq(t, "ctxt", st.ContextSwitches, uint64(4057207))
	eq(t, "processes", st.ProcessesCreated, uint64(21011))
	eq(t, "running", st.ProcsRunning, uint64(1))
	eq(t, "total()", st.Total.Total(), uint64(34145+11540+37555+8403+197+136))
	eq(t, "busy()", st.Total.Busy(), uint64(34145+11540+197+136))
}

func TestParseStatErrors(t *testing.T) {
	for _, in := range []string{
		"",                      // no cpu line
		"cpu 1 2 3\n",           // too few columns
		"cpu 1 2 3 4 5 6 7 x\n", // not a number
		"cpu 1 2 3 4 5 6 7 8\ncpuX 1 2 3 4 5 6 7 8\n",
	} {
		if _, err := parseStat(strings.NewReader(in)); err == nil {
			t.Errorf("parseStat(%q) succeeded", in)
		}
	}
	// Eight columns (pre-2.6.24 kernels without guest) are enough.
	st, err := parseStat(strings.NewReader("cpu 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "8 columns", st.CPUs[0].CPUTimes, CPUTimes{1, 2, 3, 4, 5, 6, 7, 8, 0, 0})
}

func TestParseSoftirqs(t *testing.T) {
	s := parseFixture(t, "softirqs", parseSoftirqs)
	eq(t, "cpus", s.CPUs, []int{0, 1})
	eq(t, "RCU", s.Counts["RCU"], []uint64{38184, 47964})
	eq(t, "NET_RX", s.Counts["NET_RX"], []uint64{7291, 7463})
	v, ok := s.Get("SCHED", 1)
	eq(t, "SCHED cpu1", v, uint64(22712))
	eq(t, "ok", ok, true)
	if _, ok := s.Get("TIMER", 5); ok {
		t.Error("Get on a missing cpu succeeded")
	}
	if _, ok := s.Get("NOPE", 0); ok {
		t.Error("Get on a missing softirq succeeded")
	}
	if _, err := parseSoftirqs(strings.NewReader("CPU0 CPU1\nHI: 1\n")); err == nil {
		t.Error("short row accepted")
	}
}

func TestParseSoftnetStat(t *testing.T) {
	got := parseFixture(t, "softnet_stat", parseSoftnetStat)
	eq(t, "new format", got, []SoftnetStat{
		{CPU: 0, Processed: 0x12},
		{CPU: 1, Processed: 0x29a4, TimeSqueeze: 1},
	})
	old := parseFixture(t, "softnet_stat_old", parseSoftnetStat)
	eq(t, "old format", old, []SoftnetStat{
		{CPU: 0, Processed: 0xabcd, Dropped: 0x10, TimeSqueeze: 2, CPUCollision: 3, ReceivedRPS: 4},
		{CPU: 1, Processed: 1, ReceivedRPS: 5},
	})
}

func TestParseCPUInfo(t *testing.T) {
	got := parseFixture(t, "cpuinfo", parseCPUInfo)
	if len(got) != 2 {
		t.Fatalf("%d processors, want 2", len(got))
	}
	for i, c := range got {
		eq(t, "processor", c.Processor, i)
		eq(t, "MHz", c.MHz, 2596.132)
		eq(t, "has MHz", c.HasMHz, true)
		if !strings.Contains(strings.Join(c.Flags, " "), "hypervisor") {
			t.Errorf("cpu%d flags lack hypervisor: %v", i, c.Flags)
		}
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n"
	a, err := parseCPUInfo(strings.NewReader(arm))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "arm64", a, []CPUInfo{{Processor: 0, Flags: []string{"fp", "asimd"}}})
}

func TestParseMeminfo(t *testing.T) {
	m := parseFixture(t, "meminfo", parseMeminfo)
	for k, want := range map[string]uint64{
		"MemTotal": 24684096, "MemFree": 23019180, "MemAvailable": 24227952, "Buffers": 73136,
		"Cached": 1211312, "Active(anon)": 1560, "Inactive(file)": 680800, "Mlocked": 18104,
		"SwapTotal": 0, "SReclaimable": 233120, "SUnreclaim": 34700, "KernelStack": 1540,
		"PageTables": 2212, "HugePages_Total": 0, "Hugepagesize": 2048,
	} {
		got, ok := m.Get(k)
		if !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	if _, err := parseMeminfo(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("meminfo without MemTotal accepted")
	}
	if _, err := parseMeminfo(strings.NewReader("MemTotal: 1 MB\n")); err == nil {
		t.Error("unknown unit accepted")
	}
}

func TestParseDentryState(t *testing.T) {
	d := parseFixture(t, "dentry-state", parseDentryState)
	eq(t, "dentry-state", d, DentryState{Dentries: 153267, Unused: 148156, AgeLimit: 45, WantPages: 0, Negative: 16618})
	old, err := parseDentryState(strings.NewReader("10 5 45 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "4.x format", old, DentryState{Dentries: 10, Unused: 5, AgeLimit: 45})
}

func TestParseVmallocinfo(t *testing.T) {
	// The fixture holds 20 vmalloc areas among other kinds; their sizes sum
	// to 831488 bytes (checked with awk when the fixture was captured).
	eq(t, "vmalloc bytes", parseFixture(t, "vmallocinfo", parseVmallocinfo), uint64(831488))
}

func TestParseDiskstats(t *testing.T) {
	d := parseFixture(t, "diskstats", parseDiskstats)
	if len(d) != 10 {
		t.Fatalf("%d disks, want 10", len(d))
	}
	eq(t, "vda", d[8], DiskStat{Major: 254, Minor: 0, Name: "vda",
		ReadIOs: 125794, ReadMerges: 25236, ReadSectors: 3392002, ReadTicks: 244076,
		WriteIOs: 22241, WriteMerges: 71073, WriteSectors: 5663008, WriteTicks: 94795,
		InFlight: 0, IOTicks: 87880, TimeInQueue: 349348,
		DiscardIOs: 11752, DiscardMerges: 24, DiscardSectors: 1753792, DiscardTicks: 10394,
		FlushIOs: 1719, FlushTicks: 81})
	old := parseFixture(t, "diskstats_old", parseDiskstats)
	eq(t, "4.x format", old[1], DiskStat{Major: 8, Minor: 1, Name: "sda1", ReadIOs: 10, ReadSectors: 80,
		ReadTicks: 5, WriteIOs: 20, WriteSectors: 160, WriteTicks: 7, IOTicks: 12, TimeInQueue: 13})
}

func TestParseSNMP(t *testing.T) {
	s := parseFixture(t, "snmp", parseSNMP)
	for _, c := range []struct {
		proto, name string
		want        int64
	}{
		{"Tcp", "MaxConn", -1}, {"Tcp", "InSegs", 10595}, {"Tcp", "CurrEstab", 0},
		{"Tcp", "RetransSegs", 0}, {"Udp", "InDatagrams", 78}, {"Udp", "OutDatagrams", 79},
	} {
		got, ok := s.Get(c.proto, c.name)
		if !ok || got != c.want {
			t.Errorf("%s.%s = %d, %v; want %d", c.proto, c.name, got, ok, c.want)
		}
	}
	ns := parseFixture(t, "netstat", parseSNMP)
	if _, ok := ns.Get("TcpExt", "ListenDrops"); !ok {
		t.Error("netstat lacks TcpExt ListenDrops")
	}
	for _, bad := range []string{
		"Tcp: A B\n",           // header without values
		"Tcp: A B\nTcp: 1\n",   // short
		"Tcp: A B\nUdp: 1 2\n", // mismatched prefix
		"Tcp A B\nTcp 1 2\n",   // no colon
		"Tcp: A B\nTcp: 1 x\n", // not a number
		":\n:",                 // no protocol name (found by FuzzParseSNMP)
		"",                     // empty
	} {
		if _, err := parseSNMP(strings.NewReader(bad)); err == nil {
			t.Errorf("parseSNMP(%q) succeeded", bad)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	m := parseFixture(t, "mountinfo", parseMountinfo)
	if len(m) != 20 {
		t.Fatalf("%d mounts, want 20", len(m))
	}
	eq(t, "root mount", m[5], Mount{ID: 27, ParentID: 1, Major: 254, Minor: 0, Root: "/", MountPoint: "/",
		Options: []string{"rw", "relatime"}, FSType: "ext4", Source: "/dev/vda",
		SuperOptions: []string{"rw", "discard", "resv_strict", "resuid=65534", "resgid=65534"}})
	eq(t, "ro", m[6].ReadOnly(), true)
	eq(t, "rw", m[5].ReadOnly(), false)
	esc := parseFixture(t, "mountinfo_escaped", parseMountinfo)
	eq(t, "escaped mount point", esc[0].MountPoint, "/mnt/my disk")
	eq(t, "escaped source", esc[0].Source, `/dev/sd\a`)
	eq(t, "optional fields skipped", esc[1].FSType, "nfs4")
	eq(t, "root", esc[1].Root, "/sub")
	if _, err := parseMountinfo(strings.NewReader("1 2 3:4 / /x rw\n")); err == nil {
		t.Error("line without separator accepted")
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`a\040b`: "a b", `\011`: "\t", `x\134`: `x\`, `\12`: `\12`, `\999`: `\999`, `end\`: `end\`,
	} {
		eq(t, in, unescapeOctal(in), want)
	}
}

func TestParsePIDStat(t *testing.T) {
	st := parseFixture(t, "pid_stat", parsePIDStat)
	eq(t, "bash", st, PIDStat{PID: 9399, Comm: "bash", State: 'S', PPID: 9397, PGID: 9399, Session: 9399,
		TTY: 0, TPGID: -1, Flags: 4194560, MinFlt: 10870, CMinFlt: 152932, MajFlt: 0, CMajFlt: 21,
		UTime: 4, STime: 7, CUTime: 178, CSTime: 280, Priority: 20, Nice: 0, NumThreads: 1,
		StartTime: 20811, VSize: 5255168, RSS: 978, Processor: 1, GuestTime: 0})
	odd := parseFixture(t, "pid_stat_oddcomm", parsePIDStat)
	eq(t, "comm with parens", odd.Comm, "a) (b c)")
	eq(t, "ppid", odd.PPID, 1)
	eq(t, "negative cutime clamps", odd.CUTime, uint64(0))
	eq(t, "cstime", odd.CSTime, uint64(9))
	eq(t, "nice", odd.Nice, int64(-5))
	eq(t, "threads", odd.NumThreads, int64(3))
	eq(t, "starttime", odd.StartTime, uint64(123456))
	eq(t, "processor", odd.Processor, 7)
	eq(t, "guest", odd.GuestTime, uint64(42))
	for _, bad := range []string{"", "12 bash) S 1", "x (a) S 1 2 3", "1 (a) S 1 2 3\n", "1 (a) SS" + strings.Repeat(" 1", 45)} {
		if _, err := parsePIDStat(strings.NewReader(bad)); err == nil {
			t.Errorf("parsePIDStat(%q) succeeded", bad)
		}
	}
}

func TestParsePIDIO(t *testing.T) {
	eq(t, "io", parseFixture(t, "pid_io", parsePIDIO), PIDIO{RChar: 29688485, WChar: 2291067, SyscR: 49728,
		SyscW: 1356, ReadBytes: 104189952, WriteBytes: 19288064, CancelledWriteBytes: 1597440})
	if _, err := parsePIDIO(strings.NewReader("rchar: 1\n")); err == nil {
		t.Error("truncated io accepted")
	}
}

func TestParseSmapsRollup(t *testing.T) {
	eq(t, "smaps_rollup", parseFixture(t, "pid_smaps_rollup", parseSmapsRollup), SmapsRollup{Rss: 4100, Pss: 988,
		SharedClean: 3080, SharedDirty: 700, PrivateClean: 0, PrivateDirty: 320, Referenced: 4100,
		Anonymous: 1020, LazyFree: 0, Swap: 0, SwapPss: 0})
	if _, err := parseSmapsRollup(strings.NewReader("")); !errors.Is(err, ErrNoUserMemory) {
		t.Errorf("empty smaps_rollup (kernel thread): %v, want ErrNoUserMemory", err)
	}
}

func TestParseStatus(t *testing.T) {
	eq(t, "status", parseFixture(t, "pid_status", parseStatus), PIDStatus{Name: "bash", State: "S (sleeping)",
		Tgid: 9399, PID: 9399, PPID: 9397, NStgid: []int{9399}, VmSize: 5132, VmRSS: 4100, VmSwap: 0, VmHWM: 4100,
		Threads: 1, VoluntaryCtxtSwitches: 248, NonvoluntaryCtxtSwitches: 53})
	if _, err := parseStatus(strings.NewReader("Name: x\nUid: 1 2\nPid: 3\n")); err == nil {
		t.Error("short Uid accepted")
	}
}

func TestParseLimits(t *testing.T) {
	l := parseFixture(t, "pid_limits", parseLimits)
	eq(t, "open files", l["Max open files"], Limit{Soft: 20000, Hard: 20000})
	eq(t, "cpu time", l["Max cpu time"], Limit{Soft: Unlimited, Hard: Unlimited})
	eq(t, "stack", l["Max stack size"], Limit{Soft: 8388608, Hard: Unlimited})
	eq(t, "rows", len(l), 16)
}

func TestParseOSRelease(t *testing.T) {
	m := parseFixture(t, "os-release", parseOSRelease)
	eq(t, "PRETTY_NAME", m["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)")
	eq(t, "ID", m["ID"], "debian")
	m, err := parseOSRelease(strings.NewReader("# c\nNAME='open Euler'\nX=\"a \\\"q\\\"\"\nBAD\n"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "single quotes", m["NAME"], "open Euler")
	eq(t, "escapes", m["X"], `a "q"`)
}

func TestReaders(t *testing.T) {
	fs := FS{Root: "testdata/root"}
	st, err := fs.Stat()
	if err != nil || len(st.CPUs) != 2 {
		t.Fatalf("Stat: %v %v", st, err)
	}
	if _, err := fs.Softirqs(); err != nil {
		t.Error(err)
	}
	if _, err := fs.SoftnetStat(); err != nil {
		t.Error(err)
	}
	if _, err := fs.DentryState(); err != nil {
		t.Error(err)
	}
	if _, err := fs.SNMP(); err != nil {
		t.Error(err)
	}
	if _, err := fs.Netstat(); err != nil {
		t.Error(err)
	}
	if _, err := fs.Diskstats(); err != nil {
		t.Error(err)
	}
	if _, err := fs.CPUInfo(); err != nil {
		t.Error(err)
	}
	if _, err := fs.Meminfo(); err != nil {
		t.Error(err)
	}
	up, err := fs.Uptime()
	eq(t, "uptime", up, 462.60)
	eq(t, "uptime err", err, error(nil))
	n, err := fs.CPUsConfigured()
	eq(t, "cpus configured", n, 2)
	eq(t, "cpus err", err, error(nil))
	khz, err := fs.CPUCurFreqKHz(0)
	eq(t, "cpufreq", khz, uint64(2596132))
	eq(t, "cpufreq err", err, error(nil))
	if _, err := fs.CPUCurFreqKHz(1); !os.IsNotExist(err) {
		t.Errorf("cpufreq of cpu1: %v, want not-exist", err)
	}
	if _, err := fs.VmallocBytes(); !os.IsNotExist(err) {
		t.Errorf("VmallocBytes: %v, want not-exist", err)
	}

	pids, err := fs.PIDs()
	eq(t, "pids", pids, []int{7, 42})
	eq(t, "pids err", err, error(nil))
	if s, err := fs.PIDStat(42); err != nil || s.PID != 9399 {
		t.Errorf("PIDStat: %+v %v", s, err)
	}
	if _, err := fs.PIDIO(42); err != nil {
		t.Error(err)
	}
	if _, err := fs.SmapsRollup(42); err != nil {
		t.Error(err)
	}
	if _, err := fs.PIDStatus(42); err != nil {
		t.Error(err)
	}
	if l, err := fs.PIDLimits(42); err != nil || l["Max open files"].Soft != 20000 {
		t.Errorf("PIDLimits: %v %v", l, err)
	}
	fds, err := fs.PIDFDCount(42)
	eq(t, "fd count", fds, 4)
	eq(t, "fd err", err, error(nil))
	if _, err := fs.PIDIO(7); !os.IsNotExist(err) {
		t.Errorf("PIDIO of a pid without io: %v", err)
	}

	mounts, err := fs.Mounts() // no proc/1: falls back to proc/self
	if err != nil || len(mounts) != 20 {
		t.Errorf("Mounts: %d %v", len(mounts), err)
	}

	devs, err := fs.NetDevices()
	eq(t, "net devices", devs, []NetDevice{{Name: "eth0", Ifindex: 2, OperState: "up"}, {Name: "lo", Ifindex: 1, Virtual: true, OperState: "unknown"}})
	eq(t, "net err", err, error(nil))
	ns, err := fs.NetDevStats("eth0")
	eq(t, "eth0 stats", ns, NetDevStats{RxBytes: 1001, RxPackets: 2002, RxErrors: 3003, RxDropped: 4004,
		TxBytes: 5005, TxPackets: 6006, TxErrors: 7007, TxDropped: 8008})
	eq(t, "stats err", err, error(nil))

	osr, err := fs.OSRelease() // only usr/lib/os-release exists
	eq(t, "os-release fallback", osr["ID"], "debian")
	eq(t, "os-release err", err, error(nil))
	kr, _ := fs.KernelRelease()
	eq(t, "kernel", kr, "6.18.44-test")
	hn, _ := fs.Hostname()
	eq(t, "hostname", hn, "testhost")
	if _, err := fs.DMI("sys_vendor"); !os.IsNotExist(err) {
		t.Errorf("DMI: %v", err)
	}
}

func TestPath(t *testing.T) {
	eq(t, "zero root", FS{}.Path("/proc/stat"), "/proc/stat")
	eq(t, "host root", FS{Root: "/host"}.Path("/proc/stat"), "/host/proc/stat")
	eq(t, "relative", FS{Root: "/host/"}.Path("etc/os-release"), "/host/etc/os-release")
}

func TestStatfs(t *testing.T) {
	u, err := FS{}.Statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.Blocks == 0 || u.FragmentSize == 0 || u.BlocksAvail > u.BlocksFree || u.BlocksFree > u.Blocks {
		t.Errorf("implausible statfs: %+v", u)
	}
	if _, err := (FS{}).Statfs("/does/not/exist"); err == nil {
		t.Error("statfs of a missing path succeeded")
	}
}
