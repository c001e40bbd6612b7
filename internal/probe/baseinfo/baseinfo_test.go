package baseinfo

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// testdata/t0 and testdata/t1 are two snapshots of a fake host, 10 s
// apart. Every expected value below is worked out by hand from them.

var (
	t0     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1     = t0.Add(10 * time.Second)
	period = 10 * time.Second
)

func allSubItems() uint32 {
	return bitCPU | bitMem | bitNIC | bitNet | bitDisk | bitFS | bitProc | bitHost | bitCon
}

// harness drives a probe over the two snapshots; phase selects the
// snapshot the fakes (qdisc dump, statfs, directory sizes) answer for.
type harness struct {
	p     *Probe
	rt    *probetest.Runtime
	phase int
}

var qdiscs = [2]map[int]qdiscStats{
	{2: {Kind: "fq_codel", Drops: 3, Overlimits: 1, Backlog: 0, ECNMark: 10, HasECN: true}},
	{2: {Kind: "fq_codel", Drops: 8, Overlimits: 4, Backlog: 1514, ECNMark: 12, HasECN: true}},
}

var statfs = map[string]procfs.FSUsage{
	"/":                      {Blocks: 1000000, BlocksFree: 400000, BlocksAvail: 350000, Files: 65536, FilesFree: 60000, FragmentSize: 4096},
	"/dev/shm":               {Blocks: 1000, BlocksFree: 1000, BlocksAvail: 1000, Files: 500, FilesFree: 499, FragmentSize: 4096},
	"/ro":                    {Blocks: 3, BlocksFree: 1, BlocksAvail: 1, FragmentSize: 512},
	"/sys/fs/cgroup/unified": {FragmentSize: 4096},
}

func newHarness(t *testing.T, cfg probe.Config) *harness {
	t.Helper()
	h := &harness{rt: probetest.NewRuntime(t, probetest.DiscardGo())}
	h.p = New(procfs.FS{Root: "testdata/t0"}, WithIdentity(fakeResolver{100: "c1", 200: "c2"}))
	h.p.now = func() time.Time { return t0 }
	for _, s := range h.p.subs {
		switch c := s.c.(type) {
		case *nicCollector:
			c.dump = func(procfs.FS) (map[int]qdiscStats, error) { return qdiscs[h.phase], nil }
		case *fsCollector:
			c.statfs = func(_ procfs.FS, mp string) (procfs.FSUsage, error) {
				u, ok := statfs[mp]
				if !ok {
					return procfs.FSUsage{}, fmt.Errorf("statfs of %s not expected", mp)
				}
				return u, nil
			}
		case *conCollector:
			c.dirSize = func(procRoot, dir string) (uint64, error) {
				sizes := map[string][2]uint64{
					"testdata/t0/proc/100/root": {1000, 51000},
					"testdata/t1/proc/100/root": {1000, 51000},
					"testdata/t1/proc/200/root": {7, 7},
				}
				if dir != "/var/log" {
					return 0, fmt.Errorf("unexpected dir %s", dir)
				}
				s, ok := sizes[procRoot]
				if !ok {
					return 0, fmt.Errorf("unexpected root %s", procRoot)
				}
				return s[h.phase], nil
			}
		case *hostCollector:
			c.addrs = func() ([]ifaceAddrs, error) {
				return []ifaceAddrs{
					{name: "lo", up: true, loop: true, addrs: []net.IP{net.ParseIP("127.0.0.1")}},
					{name: "eth0", up: true, addrs: []net.IP{net.ParseIP("10.0.0.5"), net.ParseIP("fe80::1"), net.ParseIP("2001:db8::5")}},
					{name: "eth1", addrs: []net.IP{net.ParseIP("10.1.1.1")}},
				}, nil
			}
		}
	}
	if err := h.p.Start(h.rt.Context(), cfg, h.rt); err != nil {
		t.Fatal(err)
	}
	return h
}

// advance moves the fake host to snapshot t1 and ends the period there.
func (h *harness) advance() ([]*table.Record, []event.Event) {
	h.p.mu.Lock()
	h.p.fs = procfs.FS{Root: "testdata/t1"}
	h.phase = 1
	h.p.mu.Unlock()
	h.p.collect(t1)
	return h.rt.Take()
}

func baseConfig() probe.Config {
	params := probe.DefaultParams()
	params.ReportPeriod = 10
	params.ElfPath = "/var/log"
	return probe.Config{
		SubItems: allSubItems(),
		Params:   params,
		Targets:  probetest.NewTargets(snoop.Whitelist, 100, 200, 300, 400),
	}
}

func TestBaselineEmitsNothing(t *testing.T) {
	h := newHarness(t, baseConfig())
	recs, evs := h.rt.Take()
	if len(recs) != 0 || len(evs) != 0 {
		t.Fatalf("Start published %d records, %d events", len(recs), len(evs))
	}
}

func TestPeriodTables(t *testing.T) {
	h := newHarness(t, baseConfig())
	recs, evs := h.advance()
	if len(evs) != 0 {
		t.Errorf("events with report_event off: %v", evs)
	}
	got := byKey(recs)
	wantKeys := []string{
		"host_instance:node-a",
		"nic:eth0", "nic:eth1",
		"system_con_io:c1",
		"system_cpu:0", "system_cpu:1", "system_cpu_util:cpu",
		"system_dentry:fs.dentry-state",
		"system_df:/", "system_df:/dev/shm", "system_df:/ro",
		"system_iostat:sda", "system_iostat:sda1", "system_iostat:zram0",
		"system_meminfo:/proc/meminfo",
		"system_os:Debian GNU/Linux 12 (bookworm)",
		"system_proc:100", "system_proc:200", "system_proc:300",
		"system_tcp:/proc/net/snmp", "system_udp:/proc/net/snmp",
	}
	if k := keysOf(got); strings.Join(k, ",") != strings.Join(wantKeys, ",") {
		t.Fatalf("records:\n got %v\nwant %v", k, wantKeys)
	}
	for _, r := range recs {
		if !r.Time.Equal(t1) || r.Period != period {
			t.Errorf("%s: time %v period %v, want %v %v", r.Table.Name, r.Time, r.Period, t1, period)
		}
		if len(recs) != len(got) {
			t.Fatalf("duplicate records: %d for %d keys", len(recs), len(got))
		}
	}

	t.Run("cpu", func(t *testing.T) {
		checkRecord(t, got["system_cpu:0"], want{"cpu": "0", "rcu": 300.0, "timer": 2500.0, "sched": 400.0,
			"net_rx": 50.0, "user_msec": 3000.0, "nice_msec": 0.0, "system_msec": 1000.0, "idle_msec": 5000.0,
			"iowait_msec": 500.0, "irq_msec": 100.0, "softirq_msec": 200.0, "steal_msec": 200.0,
			"backlog_drops": 5.0, "rps_count": 10.0, "util_per": 45.0, "mhz": 2400.0})
		checkRecord(t, got["system_cpu:1"], want{"cpu": "1", "rcu": 1000.0, "timer": 100.0, "sched": 10.0,
			"net_rx": 60.0, "user_msec": 1000.0, "nice_msec": 100.0, "system_msec": 400.0, "idle_msec": 8000.0,
			"iowait_msec": 0.0, "irq_msec": 100.0, "softirq_msec": 200.0, "steal_msec": 200.0,
			"backlog_drops": 1.0, "rps_count": 3.0, "util_per": 20.0, "mhz": 2600.5})
		checkRecord(t, got["system_cpu_util:cpu"], want{"cpu": "cpu", "total_used_per": 32.5})
	})
	t.Run("mem", func(t *testing.T) {
		checkRecord(t, got["system_meminfo:/proc/meminfo"], want{"infos": "/proc/meminfo",
			"total_kB": 1000000.0, "free_kB": 200000.0, "available_kB": 600000.0, "util": 50.0,
			"buffers_kB": 50000.0, "cache_kB": 250000.0, "active_kB": 300000.0, "inactive_kB": 200000.0,
			"swap_total_kB": 400000.0, "swap_free_kB": 100000.0, "swap_util": 75.0, "slab_kB": 40000.0,
			"SReclaimable_kB": 30000.0, "Unreclaim_kB": 10000.0, "page_kB": 4000.0,
			"vmalloc_kB": 8000.0, // the two vmalloc areas of vmallocinfo, not VmallocUsed (9000)
			"stack_kB":   3000.0, "active_anon_kB": 100000.0, "inactive_anon_kB": 50000.0,
			"active_file_kB": 200000.0, "inactive_file_kB": 150000.0, "mlocked": 1000.0,
			"big_page_kB": 8192.0, "shmem_kB": 5000.0})
		checkRecord(t, got["system_dentry:fs.dentry-state"], want{"infos": "fs.dentry-state",
			"dentry": 1234.0, "unused_dentry": 567.0, "age_limit": 45.0})
	})
	t.Run("nic", func(t *testing.T) {
		checkRecord(t, got["nic:eth0"], want{"dev_name": "eth0", "status": "UP",
			"rx_bytes": 1024000.0, "rx_packets": 700.0, "rx_errs": 0.0, "rx_dropped": 20.0,
			"tx_bytes": 512000.0, "tx_packets": 300.0, "tx_errs": 12.0, "tx_dropped": 0.0,
			"rxspeed_KB": 100.0, "txspeed_KB": 50.0,
			"tc_sent_drop": 5.0, "tc_sent_overlimits": 3.0, "tc_backlog": 1514.0, "tc_ecn_mark": 12.0})
		// No qdisc in the dump: the tc fields stay unset.
		checkRecord(t, got["nic:eth1"], want{"dev_name": "eth1", "status": "DOWN",
			"rx_bytes": 0.0, "rx_packets": 0.0, "rx_errs": 0.0, "rx_dropped": 0.0,
			"tx_bytes": 0.0, "tx_packets": 0.0, "tx_errs": 0.0, "tx_dropped": 0.0,
			"rxspeed_KB": 0.0, "txspeed_KB": 0.0})
	})
	t.Run("net", func(t *testing.T) {
		checkRecord(t, got["system_tcp:/proc/net/snmp"], want{"origin": "/proc/net/snmp",
			"tcp_curr_estab": 7.0, "tcp_in_segs": 600.0, "tcp_out_segs": 500.0, "tcp_retrans_segs": 3.0, "tcp_in_errs": 2.0})
		checkRecord(t, got["system_udp:/proc/net/snmp"], want{"origin": "/proc/net/snmp",
			"udp_indata_grams": 30.0, "udp_outdata_grams": 5.0})
	})
	t.Run("disk", func(t *testing.T) {
		checkRecord(t, got["system_iostat:sda"], want{"disk_name": "sda",
			"rspeed": 10.0, "rspeed_kB": 1000.0, "r_await": 5.0, "rareq": 100.0,
			"wspeed": 40.0, "wspeed_kB": 800.0, "w_await": 3.0, "wareq": 20.0, "aqu": 0.3, "util": 25.0})
		checkRecord(t, got["system_iostat:sda1"], want{"disk_name": "sda1",
			"rspeed": 0.0, "rspeed_kB": 0.0, "r_await": 0.0, "rareq": 0.0,
			"wspeed": 0.0, "wspeed_kB": 0.0, "w_await": 0.0, "wareq": 0.0, "aqu": 0.0, "util": 0.0})
	})
	t.Run("fs", func(t *testing.T) {
		checkRecord(t, got["system_df:/"], want{"MountOn": "/", "MountStatus": "RW", "Fsname": "/dev/sda1",
			"Fstype": "ext4", "Inodes": "65536", "IUsed": 5536.0, "IFree": 60000.0, "IUsePer": 9.0,
			"Blocks": "4000000", "Used": 2400000.0, "Free": 1400000.0, "UsePer": 64.0})
		// The topmost of the two /dev/shm mounts.
		checkRecord(t, got["system_df:/dev/shm"], want{"MountOn": "/dev/shm", "MountStatus": "RW", "Fsname": "shm",
			"Fstype": "tmpfs", "Inodes": "500", "IUsed": 1.0, "IFree": 499.0, "IUsePer": 1.0,
			"Blocks": "4000", "Used": 0.0, "Free": 4000.0, "UsePer": 0.0})
		// 512-byte blocks round up to 1K-blocks; no inodes: IUse% is "-".
		checkRecord(t, got["system_df:/ro"], want{"MountOn": "/ro", "MountStatus": "RO", "Fsname": "small",
			"Fstype": "tmpfs", "Inodes": "0", "IUsed": 0.0, "IFree": 0.0,
			"Blocks": "2", "Used": 1.0, "Free": 1.0, "UsePer": 67.0})
	})
	t.Run("proc", func(t *testing.T) {
		ps := float64(pageSize)
		checkRecord(t, got["system_proc:100"], want{"tgid": "100", "pgid": "100", "ppid": "1",
			"fd_count": 10.0, "fd_free_per": 1014.0 * 100 / 1024,
			"rchar_bytes": 20000.0, "wchar_bytes": 1000.0, "syscr_count": 50.0, "syscw_count": 10.0,
			"read_bytes": 4096.0, "write_bytes": 8192.0, "cancelled_write_bytes": 4096.0,
			"shared_clean_size": 100.0, "shared_dirty_size": 20.0, "private_clean_size": 30.0,
			"private_dirty_size": 400.0, "referenced_size": 500.0, "lazyfree_size": 0.0,
			"swap_data_size": 8.0, "swap_data_pss_size": 4.0,
			"minor_pagefault_count": 500.0, "major_pagefault_count": 2.0,
			"utime_jiffies": 300.0, "stime_jiffies": 100.0, "cutime_jiffies": 20.0, "cstime_jiffies": 0.0,
			"priority": 20.0, "nice": 0.0, "num_threads": 5.0, "vm_size": 120000000.0,
			"pm_size": 3000 * ps, "pm_util": 3000 * ps * 100 / (1000000 * 1024), "cpu": 0.0,
			// 400 of the 1000 ticks of 10 s; user time excludes the 100 guest ticks.
			"cpu_util": 40.0, "cpu_user_util": 20.0, "cpu_system_util": 10.0})
		// Born during the period (start 1005 s > 1000 s uptime at t0):
		// all its counters are the period's. No fd, limits, smaps files:
		// those fields stay unset.
		checkRecord(t, got["system_proc:200"], want{"tgid": "200", "pgid": "100", "ppid": "100",
			"rchar_bytes": 700.0, "wchar_bytes": 300.0, "syscr_count": 7.0, "syscw_count": 3.0,
			"read_bytes": 0.0, "write_bytes": 4096.0, "cancelled_write_bytes": 0.0,
			"minor_pagefault_count": 70.0, "major_pagefault_count": 1.0,
			"utime_jiffies": 50.0, "stime_jiffies": 20.0, "cutime_jiffies": 0.0, "cstime_jiffies": 0.0,
			"priority": 19.0, "nice": -1.0, "num_threads": 1.0, "vm_size": 2000000.0,
			"pm_size": 100 * ps, "pm_util": 100 * ps * 100 / (1000000 * 1024), "cpu": 1.0,
			"cpu_util": 7.0, "cpu_user_util": 5.0, "cpu_system_util": 2.0})
		// pid 300 was reused during the period: the new process is new.
		checkRecord(t, got["system_proc:300"], want{"tgid": "300", "pgid": "300", "ppid": "1",
			"rchar_bytes": 100.0, "wchar_bytes": 200.0, "syscr_count": 1.0, "syscw_count": 2.0,
			"read_bytes": 0.0, "write_bytes": 0.0, "cancelled_write_bytes": 0.0,
			"minor_pagefault_count": 40.0, "major_pagefault_count": 0.0,
			"utime_jiffies": 8.0, "stime_jiffies": 2.0, "cutime_jiffies": 0.0, "cstime_jiffies": 0.0,
			"priority": 20.0, "nice": 0.0, "num_threads": 1.0, "vm_size": 3000000.0,
			"pm_size": 200 * ps, "pm_util": 200 * ps * 100 / (1000000 * 1024), "cpu": 0.0,
			"cpu_util": 1.0, "cpu_user_util": 0.8, "cpu_system_util": 0.2})
		// pid 400 appeared in the targets but started long before t0: this
		// sample is only its baseline.
	})
	t.Run("host", func(t *testing.T) {
		checkRecord(t, got["system_os:Debian GNU/Linux 12 (bookworm)"], want{
			"os_version": "Debian GNU/Linux 12 (bookworm)", "hostname": "node-a", "kversion": "6.18.44-test",
			"cpu_num": "2", "memory_MB": "976", "ip_addr": "10.0.0.5 2001:db8::5", "host_type": "vm",
			"clock_ticks": "100", "os_btime": "1700000000", "value": 1.0})
	})
	t.Run("instance", func(t *testing.T) {
		// An AWS Nitro machine's DMI and a kubeadm node's labels, read at t0;
		// the placeholder product_version is absent. The hypervisor comes
		// from this machine's CPU (CPUID) first: only its presence is fixed.
		r := got["host_instance:node-a"]
		hv := r.Str("hypervisor")
		if hv == "" {
			t.Error("no hypervisor for an EC2 machine")
		}
		checkRecord(t, r, want{
			"hostname": "node-a", "system_uuid": "ec2e1916-9099-7caf-fd21-012345678901",
			"sys_vendor": "Amazon EC2", "product_name": "m5.large", "board_vendor": "Amazon EC2",
			"bios_vendor": "Amazon EC2", "bios_version": "1.0", "chassis_asset_tag": "Amazon EC2",
			"hypervisor": hv, "cloud_provider": "aws", "instance_type": "m5.large", "instance_id": "i-0123456789abcdef0",
			"region": "eu-west-1", "zone": "eu-west-1a", "instance_info": 1.0})
	})
	t.Run("con", func(t *testing.T) {
		// c1 grew by 50000 bytes in 10 s; c2 appeared in the period (baseline only).
		checkRecord(t, got["system_con_io:c1"], want{"container_id": "c1", "dir": "/var/log", "write_rate": 5000.0})
	})
}

func eventStrings(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s|%s|%s|%s|%s|%s", e.Entity, e.EntityID, e.Metric, e.Device, e.Severity, e.Message))
		if !e.Time.Equal(t1) {
			out = append(out, "bad time "+e.Time.String())
		}
	}
	sort.Strings(out)
	return out
}

func TestEvents(t *testing.T) {
	cfg := baseConfig()
	cfg.Params.ReportEvent = 1
	cfg.Params.ResUpperThr = 20
	cfg.Params.DropsThr = 10
	h := newHarness(t, cfg)
	_, evs := h.advance()
	wantEv := []string{
		"cpu|cpu|total_used_per||WARN|Too high cpu utilization(32.50%).",
		"disk|sda|util||WARN|Disk device saturated(25.00%).",
		"fs|/ro|UsePer||WARN|Too many Blocks used(67%).",
		"fs|/|UsePer||WARN|Too many Blocks used(64%).",
		"mem|/proc/meminfo|swap_util||WARN|Too high swap utilization(75.00%).",
		"mem|/proc/meminfo|util||WARN|Too high mem utilization(50.00%).",
		"nic|eth0|rx_dropped|eth0|WARN|net device rx queue drops(20).",
		"nic|eth0|tx_errs|eth0|WARN|net device tx queue errors(12).",
	}
	if got := eventStrings(evs); strings.Join(got, "\n") != strings.Join(wantEv, "\n") {
		t.Errorf("events:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(wantEv, "\n     "))
	}
}

func TestEventThresholds(t *testing.T) {
	for _, c := range []struct {
		name                 string
		report, upper, drops int
		want                 []string
	}{
		{name: "report_event off", report: 0, upper: 20, drops: 10},
		{name: "no thresholds", report: 1, upper: 0, drops: 0},
		{name: "thresholds above the values", report: 1, upper: 75, drops: 20},
		{name: "thresholds just below", report: 1, upper: 74, drops: 19, want: []string{
			"mem|/proc/meminfo|swap_util||WARN|Too high swap utilization(75.00%).",
			"nic|eth0|rx_dropped|eth0|WARN|net device rx queue drops(20).",
		}},
		{name: "inode threshold", report: 1, upper: 8, drops: 0, want: []string{
			"cpu|cpu|total_used_per||WARN|Too high cpu utilization(32.50%).",
			"disk|sda|util||WARN|Disk device saturated(25.00%).",
			"fs|/ro|UsePer||WARN|Too many Blocks used(67%).",
			"fs|/|IUsePer||WARN|Too many Inodes consumed(9%).",
			"fs|/|UsePer||WARN|Too many Blocks used(64%).",
			"mem|/proc/meminfo|swap_util||WARN|Too high swap utilization(75.00%).",
			"mem|/proc/meminfo|util||WARN|Too high mem utilization(50.00%).",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Params.ReportEvent, cfg.Params.ResUpperThr, cfg.Params.DropsThr = c.report, c.upper, c.drops
			h := newHarness(t, cfg)
			_, evs := h.advance()
			if got := eventStrings(evs); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("events:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestSubItemsSelectTables(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitMem | bitNet
	h := newHarness(t, cfg)
	recs, _ := h.advance()
	if k := keysOf(byKey(recs)); strings.Join(k, ",") !=
		"system_dentry:fs.dentry-state,system_meminfo:/proc/meminfo,system_tcp:/proc/net/snmp,system_udp:/proc/net/snmp" {
		t.Errorf("tables: %v", k)
	}
}

func TestProcWithoutTargets(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitProc | bitCon
	cfg.Targets = nil
	h := newHarness(t, cfg)
	if recs, _ := h.advance(); len(recs) != 0 {
		t.Errorf("records without targets: %v", keysOf(byKey(recs)))
	}
}

func TestProcBlacklist(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitProc
	// Everything but 100 and 300 is observed: 200 (born in the period) is
	// reported, 400 (old, first seen) only baselined.
	cfg.Targets = probetest.NewTargets(snoop.Blacklist, 100, 300)
	h := newHarness(t, cfg)
	recs, _ := h.advance()
	if k := keysOf(byKey(recs)); strings.Join(k, ",") != "system_proc:200" {
		t.Errorf("records: %v", k)
	}
}

func TestReconfigure(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitNet
	h := newHarness(t, cfg)

	// Enabling disk takes its baseline now (t0 files), so the next period
	// is complete; disabling net drops its state.
	cfg2 := cfg
	cfg2.SubItems = bitDisk
	cfg2.Params.ReportPeriod = 30
	if err := h.p.Reconfigure(cfg2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.p.periodChanged:
	default:
		t.Error("a new report_period did not wake the loop")
	}
	recs, _ := h.advance()
	got := byKey(recs)
	if k := keysOf(got); strings.Join(k, ",") != "system_iostat:sda,system_iostat:sda1,system_iostat:zram0" {
		t.Fatalf("records: %v", k)
	}
	checkRecord(t, got["system_iostat:sda"], want{"disk_name": "sda",
		"rspeed": 10.0, "rspeed_kB": 1000.0, "r_await": 5.0, "rareq": 100.0,
		"wspeed": 40.0, "wspeed_kB": 800.0, "w_await": 3.0, "wareq": 20.0, "aqu": 0.3, "util": 25.0})

	// Re-enabling net after it was off starts from a fresh baseline: no
	// record until one more period has passed.
	cfg3 := cfg2
	cfg3.SubItems = bitDisk | bitNet
	if err := h.p.Reconfigure(cfg3); err != nil {
		t.Fatal(err)
	}
	h.p.collect(t1.Add(30 * time.Second))
	recs, _ = h.rt.Take()
	if k := keysOf(byKey(recs)); strings.Join(k, ",") != "system_iostat:sda,system_iostat:sda1,system_iostat:sdb,system_iostat:zram0,system_tcp:/proc/net/snmp,system_udp:/proc/net/snmp" {
		t.Fatalf("records after re-enable: %v", k)
	}
	// Same files as the baseline: every delta is 0, the level stays.
	checkRecord(t, byKey(recs)["system_tcp:/proc/net/snmp"], want{"origin": "/proc/net/snmp",
		"tcp_curr_estab": 7.0, "tcp_in_segs": 0.0, "tcp_out_segs": 0.0, "tcp_retrans_segs": 0.0, "tcp_in_errs": 0.0})
}

func TestUnmeasuredLogged(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitNIC | bitMem | bitCon
	h := newHarness(t, cfg)
	// Without a resolver and with eth0's qdisc lacking ECN counters:
	collectorOf[*nicCollector](h.p).dump = func(procfs.FS) (map[int]qdiscStats, error) {
		return map[int]qdiscStats{2: {Kind: "pfifo_fast"}}, nil
	}
	collectorOf[*conCollector](h.p).resolver = nil
	h.p.fs = procfs.FS{Root: "testdata/t1"}
	h.p.collect(t1)
	h.p.collect(t1.Add(period))
	logs := h.rt.Logs()
	for _, s := range []string{
		`fields="nic.tc_ecn_mark of eth0"`,
		`fields=system_con_io reason="no container identity resolver is wired into the probe"`,
	} {
		if strings.Count(logs, s) != 1 {
			t.Errorf("log %q appears %d times in:\n%s", s, strings.Count(logs, s), logs)
		}
	}
	recs, _ := h.rt.Take()
	for _, r := range recs {
		if r.Table == table.Nic && r.Values[nicF.tcECNMark].Set {
			t.Errorf("tc_ecn_mark set for a qdisc without ECN counters")
		}
	}
}

func TestVmallocFallback(t *testing.T) {
	cfg := baseConfig()
	cfg.SubItems = bitMem
	h := newHarness(t, cfg)
	dir := t.TempDir()
	for _, f := range []string{"meminfo", "sys/fs/dentry-state"} {
		b, err := os.ReadFile("testdata/t1/proc/" + f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "proc", f), string(b))
	}
	h.p.fs = procfs.FS{Root: dir}
	h.p.collect(t1)
	recs, _ := h.rt.Take()
	r := byKey(recs)["system_meminfo:/proc/meminfo"]
	if r == nil || r.Values[memF.vmalloc].Num != 9000 {
		t.Errorf("vmalloc_kB without vmallocinfo: %+v, want VmallocUsed 9000", r)
	}
	if !strings.Contains(h.rt.Logs(), "falls back to VmallocUsed") {
		t.Errorf("fallback not logged: %s", h.rt.Logs())
	}
}

// TestLoop runs the real report loop on a fixed tree: reports arrive every
// period, a new period re-arms the timer, and nothing arrives after the
// context is cancelled.
func TestLoop(t *testing.T) {
	p := New(procfs.FS{Root: "testdata/t1"})
	p.interval = 20 * time.Millisecond
	rt := probetest.NewRuntime(t)
	cfg := baseConfig()
	cfg.SubItems = bitNet
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	rt.WaitRecords(t, "three periods", func(recs []*table.Record) bool { return len(recs) >= 6 })
	cfg.Params.ReportPeriod = 7
	if err := p.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	n := len(rt.Records())
	rt.WaitRecords(t, "a period after Reconfigure", func(recs []*table.Record) bool { return len(recs) >= n+2 })
	rt.Shutdown(t, p)
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	n = len(rt.Records())
	p.collect(t1)
	if len(rt.Records()) != n {
		t.Error("a stopped probe reported")
	}
}
