package proc

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

func items(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
}

func TestRecords(t *testing.T) {
	end := time.Unix(1700000000, 0)
	rows := []syscap.SyscallStat{
		{TGID: 10, Class: syscap.ClassAll, Failed: 7},
		{TGID: 10, Class: syscap.ClassRead, Calls: 3, NsSum: 600, NsMax: 400},
		{TGID: 10, Class: syscap.ClassFutex, Calls: 1, Failed: 1, NsSum: 5000, NsMax: 5000},
		{TGID: 20, Class: syscap.ClassSendmsg, Calls: 2, NsSum: 30, NsMax: 20},
		{TGID: 20, Class: syscap.FSClass(syscap.FSTmpfs, syscap.OpFlush), Calls: 1, NsSum: 9, NsMax: 9},
		{TGID: 20, Class: syscap.FSClass(syscap.FSTmpfs, syscap.OpOpen), Calls: 1, NsSum: 8, NsMax: 8}, // no such field: ignored
		{TGID: 20, Class: syscap.FSClass(syscap.FSExt4, syscap.OpOpen), Calls: 2, NsSum: 30, NsMax: 17},
		{TGID: 20, Class: syscap.ClassIoctl, Calls: 3, NsSum: 90, NsMax: 50, IoctlSet: true, IoctlFD: 7, IoctlCmd: 0x80086601},
		{TGID: 10, Class: syscap.ClassIoctl, Calls: 1, NsSum: 5, NsMax: 5}, // fd and cmd not recorded: labels unset
		{TGID: 20, Class: syscap.SyscallClass(99), Calls: 1},               // unknown class: ignored
	}
	recs := records(rows, items("proc_syscall", "proc_io", "proc_net", "proc_fs", "proc_ioctl"), end, time.Minute)
	got := map[string]map[string]float64{}
	for _, r := range recs {
		k := r.Table.Name + "/" + r.Str("tgid")
		if got[k] != nil {
			t.Errorf("two rows for %s", k)
		}
		got[k] = map[string]float64{}
		for i, f := range r.Table.Fields {
			switch {
			case f.Kind == table.KindLabel && r.Values[i].Set:
				n, _ := strconv.ParseFloat(r.Values[i].Str, 64)
				got[k][f.Name] = n
			case f.Kind != table.KindKey && r.Values[i].Set:
				got[k][f.Name] = r.Values[i].Num
			}
		}
		if !r.Time.Equal(end) || r.Period != time.Minute {
			t.Errorf("%s: time %v period %v", k, r.Time, r.Period)
		}
	}
	want := map[string]map[string]float64{
		"proc_syscall/10":       {"syscall_failed": 7},
		"proc_syscall_io/10":    {"ns_read": 400},
		"proc_syscall_sched/10": {"ns_futex": 5000},
		"proc_syscall/20":       {"syscall_failed": 0}, // observed, no failure: a measured 0
		"proc_syscall_net/20":   {"ns_sendmsg": 20},
		"proc_tmpfs/20":         {"ns_tmpfs_flush": 9},
		"proc_ext4/20":          {"ns_ext4_open": 17},
		// _IOR('f', 1, long): dir 2 (read), type 0x66, nr 1, size 8
		"proc_syscall_ioctl/20": {"ns_ioctl": 50, "ioctl_fd": 7, "ioctl_dir": 2, "ioctl_type": 0x66, "ioctl_nr": 1, "ioctl_size": 8},
		"proc_syscall_ioctl/10": {"ns_ioctl": 5},
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	for k, fields := range want {
		if len(got[k]) != len(fields) {
			t.Errorf("%s: %v, want %v", k, got[k], fields)
			continue
		}
		for f, v := range fields {
			if got[k][f] != v {
				t.Errorf("%s.%s = %v, want %v", k, f, got[k][f], v)
			}
		}
	}
	// Sub-items select tables.
	for _, r := range records(rows, items("proc_net"), end, time.Minute) {
		if r.Table != table.ProcSyscallNet {
			t.Errorf("proc_net only: row of %s", r.Table.Name)
		}
	}
}

func TestClassesFor(t *testing.T) {
	fs, got := classesFor(items("proc_net"))
	if fs || len(got) != 2 || got[0] != syscap.ClassSendmsg || got[1] != syscap.ClassRecvmsg {
		t.Errorf("proc_net: %v", got)
	}
	fs, got = classesFor(items("proc_syscall"))
	if fs {
		t.Error("proc_syscall: file-system rows on")
	}
	want := []syscap.SyscallClass{syscap.ClassAll, syscap.ClassSchedYield, syscap.ClassFutex, syscap.ClassEpollWait,
		syscap.ClassEpollPwait, syscap.ClassFork, syscap.ClassVfork, syscap.ClassClone}
	if len(got) != len(want) {
		t.Fatalf("proc_syscall: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("proc_syscall: %v, want %v", got, want)
		}
	}
	if fs, got = classesFor(items("proc_fs")); !fs || len(got) != 0 {
		t.Errorf("proc_fs: %v %v, want the file-system rows only", fs, got)
	}
}

// TestSubItems: unbuilt sub-items alone are refused as not implemented,
// with nothing loaded; alongside built ones they are named in a warning.
func TestSubItems(t *testing.T) {
	f := probe.LookupBuiltin(Name)
	bit := func(n string) uint32 { b, _ := f.SubItemBit(n); return b }
	rt := probetest.NewRuntime(t)
	p := New()
	err := p.Start(rt.Context(), probe.Config{SubItems: bit("proc_pygc")}, rt)
	if !errors.Is(err, probe.ErrNotImplemented) || p.sc != nil {
		t.Errorf("unbuilt only: %v (loaded %v)", err, p.sc != nil)
	}
	if err := p.Start(rt.Context(), probe.Config{}, rt); err == nil || p.sc != nil {
		t.Errorf("no sub-item: %v", err)
	}
	p.log = rt.Logger()
	if err := p.checkSubItems(bit("proc_syscall") | bit("proc_pygc")); err != nil {
		t.Errorf("mixed: %v", err)
	}
	if logs := rt.Logs(); !strings.Contains(logs, "proc_pygc") {
		t.Errorf("mixed: no warning naming proc_pygc: %q", logs)
	}
}

func TestIORecords(t *testing.T) {
	end := time.Unix(1700000000, 0)
	rows := map[uint32]procProcIoVal{
		5: {Less4kRead: 1, Greater4kWrite: 2, BioLatencyMax: 900, BioDone: 3},
		6: {Less4kWrite: 1, BioErr: 1}, // its only bio failed: no latency
		7: {LoadPageCache: 4, MarkBufferDirty: 1},
	}
	pages := ioRecords(rows, false, true, end, time.Minute)
	if len(pages) != 1 || pages[0].Table != table.ProcPage || pages[0].Str("tgid") != "7" ||
		pages[0].Values[table.ProcPage.MustIndex("load_page_cache")].Num != 4 ||
		pages[0].Values[table.ProcPage.MustIndex("mark_buffer_dirty")].Num != 1 ||
		pages[0].Values[table.ProcPage.MustIndex("reclaim_ns")].Set || pages[0].Values[table.ProcPage.MustIndex("access_pagecache")].Set {
		t.Errorf("proc_page rows: %+v", pages)
	}
	recs := ioRecords(rows, true, false, end, time.Minute)
	if len(recs) != 2 {
		t.Fatalf("%d rows", len(recs))
	}
	lat := table.ProcIo.MustIndex("bio_latency")
	for _, r := range recs {
		v := func(f string) float64 { return r.Values[table.ProcIo.MustIndex(f)].Num }
		switch r.Str("tgid") {
		case "5":
			if v("less_4k_io_read") != 1 || v("greater_4k_io_write") != 2 || v("bio_latency") != 900 || v("bio_err_count") != 0 {
				t.Errorf("5: %+v", r.Values)
			}
		case "6":
			if r.Values[lat].Set || v("bio_err_count") != 1 || v("less_4k_io_write") != 1 {
				t.Errorf("6: %+v", r.Values)
			}
		}
		if r.Values[table.ProcIo.MustIndex("hang_count")].Set {
			t.Error("hang_count set")
		}
	}
}

func TestTables(t *testing.T) {
	got := map[string]bool{}
	for _, tb := range New().Tables() {
		if got[tb.Name] {
			t.Errorf("%s twice", tb.Name)
		}
		got[tb.Name] = true
	}
	for _, name := range []string{"proc_syscall", "proc_syscall_io", "proc_syscall_net", "proc_syscall_sched", "proc_syscall_fork",
		"proc_syscall_ioctl", "proc_ext4", "proc_overlay", "proc_tmpfs", "proc_page", "proc_io", "proc_cpu", "proc_dns"} {
		if !got[name] {
			t.Errorf("no table %s", name)
		}
	}
	if len(got) != 13 || got["proc_pygc"] {
		t.Errorf("tables %v", got)
	}
}
