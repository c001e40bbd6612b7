package baseinfo

// Privileged tier: the probe on this host's real /proc, /sys, statfs and
// rtnetlink, with a 1-second period, checked against ground truth: a child
// that writes a known number of bytes, /proc/meminfo, runtime.NumCPU,
// df(1), ip(8) and tc(8). Runs when GALAGO_PRIVILEGED_TESTS=1 (CI always
// sets it), as root; with the variable set, missing root or tools fail.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

const writerEnv = "GALAGO_BASEINFO_WRITER_FILE"

// writerBytes is what the child writes, in one write(2).
const writerBytes = 1<<20 + 123

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(writerChild(path))
	}
	if mode := os.Getenv(delayChildEnv); mode != "" {
		os.Exit(delayChild(mode))
	}
	os.Exit(m.Run())
}

// writerChild runs in a re-executed test binary: it closes fd 3 to say it
// is ready, waits for one byte on stdin, writes writerBytes to path in one
// call, then waits for stdin to close. Nothing else it does after becoming
// ready reads or writes.
func writerChild(path string) int {
	ready := os.NewFile(3, "ready")
	buf := make([]byte, writerBytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	one := make([]byte, 1)
	ready.Close()
	if _, err := os.Stdin.Read(one); err != nil {
		return 2
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 3
	}
	if _, err := f.Write(buf); err != nil {
		return 4
	}
	f.Close()
	_, _ = os.Stdin.Read(one) // until the parent closes stdin
	return 0
}

// startWriter starts the writer child and waits until it is ready.
func startWriter(t *testing.T, path string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	// updatemaxprocs=0: since Go 1.25 the runtime re-reads the cgroup CPU
	// limit every second, which would add its reads to the child's rchar.
	cmd.Env = append(os.Environ(), writerEnv+"="+path, "GODEBUG=updatemaxprocs=0")
	return cmd, probetest.StartReady(t, cmd)
}

func recordsOf(recs []*table.Record, tbl *table.Table, key string) []*table.Record {
	var out []*table.Record
	for _, r := range recs {
		if r.Table == tbl && (key == "" || r.Values[0].Str == key) {
			out = append(out, r)
		}
	}
	return out
}

func sumField(recs []*table.Record, field string) float64 {
	var s float64
	for _, r := range recs {
		s += r.Values[r.Table.MustIndex(field)].Num
	}
	return s
}

func TestPrivilegedRealHost(t *testing.T) {
	probetest.RequireTools(t, "df", "ip", "tc")
	dir, err := os.MkdirTemp(".", "privileged-io-") // on the package's (block-backed) filesystem
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	child, stdin := startWriter(t, dir+"/written")
	pid := strconv.Itoa(child.Process.Pid)

	p := New(procfs.FS{})
	p.interval = time.Second
	rt := probetest.NewRuntime(t)
	cfg := probe.Config{
		SubItems: bitCPU | bitMem | bitNIC | bitNet | bitDisk | bitFS | bitProc | bitHost,
		Params:   probe.DefaultParams(),
		Targets:  probetest.NewTargets(snoop.Whitelist, child.Process.Pid),
	}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			rt.Shutdown(t, p)
		}
	}
	defer stop()

	// One period passes untouched, then the child writes, and we send
	// UDP datagrams and write a file to disk, all inside later periods.
	rt.WaitRecords(t, "the first system_proc record", func(recs []*table.Record) bool {
		return len(recordsOf(recs, table.SystemProc, pid)) >= 1
	})
	if _, err := stdin.Write([]byte{'g'}); err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, "the child's write", func() bool {
		st, err := os.Stat(dir + "/written")
		return err == nil && st.Size() == writerBytes
	})
	const datagrams = 50
	sendUDP(t, datagrams)
	const diskBytes = 8 << 20
	writeSynced(t, dir+"/synced", diskBytes)
	n := len(recordsOf(rt.Records(), table.SystemProc, pid))
	rt.WaitRecords(t, "two more periods", func(recs []*table.Record) bool {
		return len(recordsOf(recs, table.SystemProc, pid)) >= n+2
	})
	stop()
	recs := rt.Records()

	t.Run("proc", func(t *testing.T) {
		procs := recordsOf(recs, table.SystemProc, pid)
		// Every period since the baseline is reported, so the sums are the
		// child's activity since it became ready: one byte read from stdin,
		// one write of writerBytes.
		for field, want := range map[string]float64{
			"wchar_bytes": writerBytes, "syscw_count": 1, "rchar_bytes": 1, "syscr_count": 1,
		} {
			if got := sumField(procs, field); got != want {
				t.Errorf("sum of %s over %d periods = %v, want %v", field, len(procs), got, want)
			}
		}
		st, err := procfs.FS{}.PIDStat(child.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		last := procs[len(procs)-1]
		if got := last.Str("ppid"); got != strconv.Itoa(os.Getpid()) {
			t.Errorf("ppid %s, want %d", got, os.Getpid())
		}
		if got := last.Values[procF.numThreads].Num; got != float64(st.NumThreads) {
			t.Errorf("num_threads %v, want %d", got, st.NumThreads)
		}
		fds, err := procfs.FS{}.PIDFDCount(child.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if got := last.Values[procF.fdCount].Num; got != float64(fds) {
			t.Errorf("fd_count %v, want %d", got, fds)
		}
	})

	t.Run("cpu", func(t *testing.T) {
		st, err := procfs.FS{}.Stat()
		if err != nil {
			t.Fatal(err)
		}
		perPeriod := map[time.Time]int{}
		for _, r := range recordsOf(recs, table.SystemCpu, "") {
			perPeriod[r.Time]++
		}
		if len(perPeriod) < 3 {
			t.Fatalf("%d periods of system_cpu", len(perPeriod))
		}
		for at, n := range perPeriod {
			if n != runtime.NumCPU() || n != len(st.CPUs) {
				t.Errorf("period %v: %d system_cpu records, want runtime.NumCPU()=%d and %d cpuN lines",
					at, n, runtime.NumCPU(), len(st.CPUs))
			}
		}
		for _, r := range recordsOf(recs, table.SystemCpuUtil, "cpu") {
			if u := r.Values[cpuUtilF.totalUsedPer].Num; u < 0 || u > 100 {
				t.Errorf("total_used_per %v", u)
			}
		}
	})

	t.Run("mem", func(t *testing.T) {
		m, err := procfs.FS{}.Meminfo()
		if err != nil {
			t.Fatal(err)
		}
		total, _ := m.Get("MemTotal")
		mems := recordsOf(recs, table.SystemMeminfo, "/proc/meminfo")
		if len(mems) < 3 {
			t.Fatalf("%d system_meminfo records", len(mems))
		}
		for _, r := range mems {
			if got := r.Values[r.Table.MustIndex("total_kB")].Num; got != float64(total) {
				t.Errorf("total_kB %v, want MemTotal %d", got, total)
			}
		}
	})

	t.Run("host", func(t *testing.T) {
		hosts := recordsOf(recs, table.SystemOs, "")
		if len(hosts) == 0 {
			t.Fatal("no system_os record")
		}
		r := hosts[len(hosts)-1]
		st, _ := procfs.FS{}.Stat()
		hn, _ := os.Hostname()
		var uts unix.Utsname
		if err := unix.Uname(&uts); err != nil {
			t.Fatal(err)
		}
		m, _ := procfs.FS{}.Meminfo()
		total, _ := m.Get("MemTotal")
		for field, want := range map[string]string{
			"os_btime": strconv.FormatUint(st.BootTime, 10), "hostname": hn,
			"kversion": unix.ByteSliceToString(uts.Release[:]), "cpu_num": strconv.Itoa(runtime.NumCPU()),
			"memory_MB": strconv.FormatUint(total/1024, 10), "clock_ticks": "100",
			"ip_addr": ipAddrGroundTruth(t),
		} {
			if got := r.Str(field); got != want {
				t.Errorf("system_os.%s = %q, want %q", field, got, want)
			}
		}
		if ht := r.Str("host_type"); ht != "vm" && ht != "pm" {
			t.Errorf("host_type %q", ht)
		}
	})

	t.Run("fs", func(t *testing.T) { checkDF(t, recordsOf(recs, table.SystemDf, "")) })

	t.Run("net", func(t *testing.T) {
		udp := recordsOf(recs, table.SystemUdp, snmpOrigin)
		// Other programs may use UDP too; ours are the floor.
		if in, out := sumField(udp, "udp_indata_grams"), sumField(udp, "udp_outdata_grams"); in < datagrams || out < datagrams {
			t.Errorf("udp in %v out %v over the run, want at least %d each", in, out, datagrams)
		}
	})

	t.Run("disk", func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		disks, err := procfs.FS{}.Diskstats()
		if err != nil {
			t.Fatal(err)
		}
		name := ""
		for _, d := range disks {
			if d.Major == unix.Major(st.Dev) && d.Minor == unix.Minor(st.Dev) {
				name = d.Name
			}
		}
		if name == "" {
			t.Fatalf("the test directory is not on a block device (dev %d:%d)", unix.Major(st.Dev), unix.Minor(st.Dev))
		}
		var writtenKB float64
		for _, r := range recordsOf(recs, table.SystemIostat, name) {
			writtenKB += r.Values[diskF.wspeedKB].Num * r.Period.Seconds()
			if u := r.Values[diskF.util].Num; u < 0 || u > 100.5 {
				t.Errorf("util %v", u)
			}
		}
		if writtenKB < diskBytes/1024 {
			t.Errorf("%s: %.0f kB written over the run, want at least the %d kB written and synced", name, writtenKB, diskBytes/1024)
		}
	})

	t.Run("nic", func(t *testing.T) {
		devs, err := procfs.FS{}.NetDevices()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range devs {
			if !d.Virtual {
				want = append(want, d.Name)
			}
		}
		got := map[string]bool{}
		for _, r := range recordsOf(recs, table.Nic, "") {
			got[r.Str("dev_name")] = true
			rx := r.Values[nicF.rxBytes].Num
			if speed := r.Values[nicF.rxSpeed].Num; abs(speed*1024*r.Period.Seconds()-rx) > 1e-6*max(rx, 1) {
				t.Errorf("%s: rxspeed_KB %v over %v for %v bytes", r.Str("dev_name"), speed, r.Period, rx)
			}
		}
		var gotNames []string
		for n := range got {
			gotNames = append(gotNames, n)
		}
		sort.Strings(gotNames)
		if strings.Join(gotNames, ",") != strings.Join(want, ",") {
			t.Errorf("nic devices %v, want the physical ones %v", gotNames, want)
		}
	})

	t.Run("qdisc", func(t *testing.T) { checkQdiscs(t) })

	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors counted; logs:\n%s", n, rt.Logs())
	}
}

func abs(x float64) float64 { return max(x, -x) }

func sendUDP(t *testing.T, n int) {
	t.Helper()
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		if _, err := cli.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := srv.ReadFromUDP(buf); err != nil {
			t.Fatal(err)
		}
	}
}

func writeSynced(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for written := 0; written < n; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// ipAddrGroundTruth is what `ip -o addr show up` lists for the interfaces
// that are up and not loopback, without IPv6 link-local addresses.
func ipAddrGroundTruth(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "addr", "show", "up").Output()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// 2: eth0    inet 10.0.2.15/24 brd ... scope global eth0 ...
		f := strings.Fields(line)
		if len(f) < 4 || f[1] == "lo" || (f[2] != "inet" && f[2] != "inet6") {
			continue
		}
		if f[2] == "inet6" && strings.Contains(line, "scope link") {
			continue
		}
		ip, _, _ := strings.Cut(f[3], "/")
		addrs = append(addrs, ip)
	}
	return strings.Join(addrs, " ")
}

// checkDF compares the last period's system_df with `df -P -T -k` and
// `df -P -T -i`: the same mounts, names, types and sizes.
func checkDF(t *testing.T, recs []*table.Record) {
	t.Helper()
	if len(recs) == 0 {
		t.Fatal("no system_df record")
	}
	lastT := recs[len(recs)-1].Time
	got := map[string]*table.Record{}
	for _, r := range recs {
		if r.Time.Equal(lastT) {
			got[r.Str("MountOn")] = r
		}
	}
	blocks := dfRows(t, "-k")
	inodes := dfRows(t, "-i")
	if len(got) != len(blocks) {
		t.Errorf("system_df has %d mounts, df %d: %v vs %v", len(got), len(blocks), keysOfMap(got), keysOfMap(blocks))
	}
	for mp, row := range blocks {
		r := got[mp]
		if r == nil {
			t.Errorf("df lists %s, system_df does not", mp)
			continue
		}
		irow := inodes[mp]
		for field, want := range map[string]string{"Fsname": row[0], "Fstype": row[1], "Blocks": row[2], "Inodes": irow[2]} {
			if r.Str(field) != want {
				t.Errorf("%s: %s %q, df %q", mp, field, r.Str(field), want)
			}
		}
		// Used space moves while the test writes; totals do not.
		used, _ := strconv.ParseFloat(row[3], 64)
		if d := abs(r.Values[dfF.used].Num - used); d > 64*1024 {
			t.Errorf("%s: Used %v kB, df %v kB", mp, r.Values[dfF.used].Num, used)
		}
	}
}

func keysOfMap[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dfRows runs df -P -T with the given unit flag: mount point -> Filesystem,
// Type, total, used.
func dfRows(t *testing.T, unit string) map[string][]string {
	t.Helper()
	out, err := exec.Command("df", "-P", "-T", unit).Output()
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	s := bufio.NewScanner(strings.NewReader(string(out)))
	s.Scan() // header
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 7 {
			t.Fatalf("df line %q", s.Text())
		}
		rows[strings.Join(f[6:], " ")] = f[:4]
	}
	return rows
}

// checkQdiscs compares the rtnetlink dump with `tc -s qdisc show` for each
// device's root qdisc: kind, dropped and backlog.
func checkQdiscs(t *testing.T) {
	t.Helper()
	dump, err := dumpRootQdiscs()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tc", "-s", "qdisc", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	devs, err := procfs.FS{}.NetDevices()
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for _, d := range devs {
		index[d.Name] = d.Ifindex
	}
	lines := strings.Split(string(out), "\n")
	checked := 0
	for i, line := range lines {
		// qdisc pfifo_fast 0: dev eth0 root refcnt 2 bands 3 ...
		//  Sent 839639 bytes 8030 pkt (dropped 0, overlimits 0 requeues 1)
		//  backlog 0b 0p requeues 1
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "qdisc" || f[5] != "root" || i+2 >= len(lines) {
			continue
		}
		dev := f[4]
		var sent, pkts, dropped, overlimits, requeues uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(lines[i+1]), "Sent %d bytes %d pkt (dropped %d, overlimits %d requeues %d)",
			&sent, &pkts, &dropped, &overlimits, &requeues); err != nil {
			t.Fatalf("tc line %q: %v", lines[i+1], err)
		}
		var backlog uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(lines[i+2]), "backlog %db", &backlog); err != nil {
			t.Fatalf("tc line %q: %v", lines[i+2], err)
		}
		q, ok := dump[index[dev]]
		if !ok {
			t.Errorf("%s: root qdisc %s missing from the dump", dev, f[1])
			continue
		}
		checked++
		if q.Kind != f[1] || q.Drops != dropped || q.Overlimits != overlimits || q.Backlog != backlog {
			t.Errorf("%s: dump %+v, tc kind %s dropped %d overlimits %d backlog %d", dev, q, f[1], dropped, overlimits, backlog)
		}
	}
	if checked == 0 {
		t.Fatalf("tc shows no root qdisc:\n%s", out)
	}
}
