package probe

import (
	"fmt"
	"strings"
)

// SnooperType says which selectors a feature accepts, as gala-gopher's
// probe_define[] does.
type SnooperType uint8

const (
	SnooperNone SnooperType = iota
	SnooperProc
	SnooperCon
	SnooperProcCon
)

// SubItem is one value of cmd.probe.
type SubItem struct {
	Name string
	Bit  uint32
}

// Feature is one entry of gala-gopher's feature catalogue.
type Feature struct {
	Name     string
	IPCType  int
	Snooper  SnooperType
	SubItems []SubItem
	// SystemItems are the sub-items that collect host-wide data, so the
	// feature may run without snoopers when one of them is enabled; its
	// other sub-items observe the selected processes only.
	SystemItems uint32
	// Custom is set for third-party probes declared in gala-gopher-custom.json.
	Custom *CustomDecl
}

// CustomDecl is one gala-gopher-custom.json entry.
type CustomDecl struct {
	Bin         string
	Params      []string // declared custom_param names
	MetaPath    string
	SubItemList []string
}

// SubItemBit returns the bit of a sub-item name (case-sensitive, as
// gala-gopher compares them) and whether it exists.
func (f *Feature) SubItemBit(name string) (uint32, bool) {
	for _, s := range f.SubItems {
		if s.Name == name {
			return s.Bit, true
		}
	}
	return 0, false
}

// SubItemNames lists the enabled sub-item names of a bit set, in catalogue order.
func (f *Feature) SubItemNames(bits uint32) []string {
	out := []string{}
	for _, s := range f.SubItems {
		if bits&s.Bit != 0 {
			out = append(out, s.Name)
		}
	}
	return out
}

func items(names ...string) []SubItem {
	out := make([]SubItem, len(names))
	for i, n := range names {
		out[i] = SubItem{Name: n, Bit: 1 << i}
	}
	return out
}

// Builtin is gala-gopher's catalogue of 21 features, in IPC-type order,
// followed by galago's own.
var Builtin = []Feature{
	{Name: "baseinfo", IPCType: 1, Snooper: SnooperProcCon, SubItems: items("cpu", "mem", "nic", "net", "disk", "fs", "proc", "host", "con",
		// galago's own, from coroot-node-agent: delay accounting (proc_delay)
		// and application type (proc_app)
		"delay", "app"),
		SystemItems: 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x80}, // all but proc (0x40), con (0x100), delay (0x200) and app (0x400)
	{Name: "virt", IPCType: 2, Snooper: SnooperNone},
	{Name: "flamegraph", IPCType: 3, Snooper: SnooperProc, SubItems: items("oncpu", "offcpu", "mem", "mem_glibc", "io")},
	{Name: "l7", IPCType: 4, Snooper: SnooperProcCon, SubItems: items("l7_bytes_metrics", "l7_rpc_metrics", "l7_rpc_trace")},
	{Name: "tcp", IPCType: 5, Snooper: SnooperProc, SubItems: items("tcp_abnormal", "tcp_windows", "tcp_rtt", "tcp_stats", "tcp_sockbuf", "tcp_rate", "tcp_srtt", "tcp_delay")},
	{Name: "socket", IPCType: 6, Snooper: SnooperProc, SubItems: items("tcp_socket", "udp_socket")},
	{Name: "io", IPCType: 7, Snooper: SnooperNone, SubItems: items("io_trace", "io_err", "io_count", "page_cache")},
	{Name: "proc", IPCType: 8, Snooper: SnooperProcCon, SubItems: items("proc_syscall", "proc_fs", "proc_dns", "proc_io", "proc_pagecache", "proc_net", "proc_offcpu", "proc_ioctl", "proc_pygc")},
	{Name: "jvm", IPCType: 9, Snooper: SnooperProc},
	{Name: "postgre_sli", IPCType: 10, Snooper: SnooperNone},
	{Name: "opengauss_sli", IPCType: 11, Snooper: SnooperNone},
	{Name: "nginx", IPCType: 12, Snooper: SnooperNone},
	{Name: "lvs", IPCType: 13, Snooper: SnooperNone},
	{Name: "kafka", IPCType: 14, Snooper: SnooperNone},
	{Name: "tprofiling", IPCType: 15, Snooper: SnooperProc, SubItems: items("oncpu", "syscall_file", "syscall_net", "syscall_sched", "syscall_lock", "python_gc", "pthread_sync", "oncpu_sample", "mem_usage", "mem_glibc", "offcpu")},
	{Name: "hw", IPCType: 16, Snooper: SnooperNone, SubItems: items("hw_nic", "hw_mem")},
	{Name: "ksli", IPCType: 17, Snooper: SnooperNone},
	{Name: "container", IPCType: 18, Snooper: SnooperProc},
	{Name: "sermant", IPCType: 19, Snooper: SnooperProc, SubItems: items("l7_bytes_metrics", "l7_rpc_metrics", "l7_rpc_trace")},
	{Name: "sli", IPCType: 20, Snooper: SnooperCon, SubItems: items("cpu", "mem", "io", "node", "container", "histogram")},
	{Name: "flowtracer", IPCType: 21, Snooper: SnooperNone},
	// applog is galago's own (gala-gopher has no log feature): log pattern
	// extraction from the observed containers' logs and the files their
	// processes write under /var/log.
	{Name: "applog", IPCType: 22, Snooper: SnooperProcCon, SubItems: items("container_log", "file_log")},
}

// LookupBuiltin finds a built-in feature; names match case-insensitively,
// as gala-gopher's do.
func LookupBuiltin(name string) *Feature {
	for i := range Builtin {
		if strings.EqualFold(Builtin[i].Name, name) {
			return &Builtin[i]
		}
	}
	return nil
}

// MustSubItemBit is the bit of a built-in feature's sub-item, for probes
// that name their sub-items at init; a wrong name is a programming error.
func MustSubItemBit(feature, name string) uint32 {
	f := LookupBuiltin(feature)
	if f == nil {
		panic("probe: no built-in feature " + feature)
	}
	bit, ok := f.SubItemBit(name)
	if !ok {
		panic("probe: feature " + feature + " has no sub-item " + name)
	}
	return bit
}

// CheckBuiltSubItems checks the sub-items a Start was asked for against
// those the feature has built: none of the built ones is an error (wrapping
// ErrNotImplemented when only unbuilt ones were asked for); unbuilt ones
// beside built ones are ignored with one warning naming them.
func CheckBuiltSubItems(name string, sub, built uint32, log interface{ Warn(string, ...any) }) error {
	f := LookupBuiltin(name)
	if unbuilt := sub &^ built; unbuilt != 0 {
		names := strings.Join(f.SubItemNames(unbuilt), ",")
		if sub&built == 0 {
			return fmt.Errorf("%s: sub-items %s: %w", name, names, ErrNotImplemented)
		}
		log.Warn(name+": sub-items not built in this version, ignored", "sub_items", names)
	}
	if sub&built == 0 {
		return fmt.Errorf("%s: no sub-item enabled (%s)", name, strings.Join(f.SubItemNames(built), ", "))
	}
	return nil
}
