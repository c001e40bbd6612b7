package baseinfo

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

var osF = struct {
	osVersion, hostname, kversion, cpuNum, memoryMB, ipAddr, hostType, clockTicks, btime, value int
}{
	osVersion: table.SystemOs.MustIndex("os_version"), hostname: table.SystemOs.MustIndex("hostname"),
	kversion: table.SystemOs.MustIndex("kversion"), cpuNum: table.SystemOs.MustIndex("cpu_num"),
	memoryMB: table.SystemOs.MustIndex("memory_MB"), ipAddr: table.SystemOs.MustIndex("ip_addr"),
	hostType: table.SystemOs.MustIndex("host_type"), clockTicks: table.SystemOs.MustIndex("clock_ticks"),
	btime: table.SystemOs.MustIndex("os_btime"), value: table.SystemOs.MustIndex("value"),
}

// hostInfo is what does not change while the host runs.
type hostInfo struct {
	osVersion, kversion, cpuNum, memoryMB, hostType, btime string
}

// hostCollector fills system_os, one record per period. Like gala-gopher
// it reads the static facts (os-release, kernel, CPUs, memory, host type,
// boot time) once, when the sub-item starts, and the hostname and
// addresses every period.
type hostCollector struct {
	info *hostInfo
	// addrs lists the interface addresses; nil means net.Interfaces of
	// the probe's own network namespace.
	addrs func() ([]ifaceAddrs, error)
}

func (hc *hostCollector) forget() { hc.info = nil }

func (hc *hostCollector) sample(c *cycle) {
	if hc.info == nil {
		hc.info = readHostInfo(c)
	}
	if !c.emit {
		return
	}
	info := hc.info
	if info.osVersion == "" {
		return // the key is unknown (logged when the sub-item started)
	}
	r := table.SystemOs.NewRecord(c.now, c.period)
	r.SetStr(osF.osVersion, info.osVersion)
	if h, err := c.fs.Hostname(); err == nil {
		r.SetStr(osF.hostname, h)
	} else {
		c.unmeasured("host.hostname", "system_os.hostname", err)
	}
	setIf := func(field int, v string) {
		if v != "" {
			r.SetStr(field, v)
		}
	}
	setIf(osF.kversion, info.kversion)
	setIf(osF.cpuNum, info.cpuNum)
	setIf(osF.memoryMB, info.memoryMB)
	addrs := hc.addrs
	if addrs == nil {
		addrs = interfaceAddrs
	}
	if ifs, err := addrs(); err == nil {
		r.SetStr(osF.ipAddr, hostIPs(ifs, c.cfg.Params.DevName))
	} else {
		c.unmeasured("host.ip", "system_os.ip_addr", err)
	}
	setIf(osF.hostType, info.hostType)
	r.SetStr(osF.clockTicks, strconv.Itoa(procfs.UserHZ))
	setIf(osF.btime, info.btime)
	r.SetNum(osF.value, 1)
	c.rt.Record(r)
}

func readHostInfo(c *cycle) *hostInfo {
	info := &hostInfo{}
	if v, err := osVersion(c.fs); err == nil {
		info.osVersion = v
	} else {
		c.unmeasured("host.os", "system_os.os_version (the table's key: no record)", err)
	}
	if v, err := c.fs.KernelRelease(); err == nil {
		info.kversion = v
	} else {
		c.unmeasured("host.kernel", "system_os.kversion", err)
	}
	if n, err := c.fs.CPUsConfigured(); err == nil {
		info.cpuNum = strconv.Itoa(n)
	} else {
		c.unmeasured("host.cpus", "system_os.cpu_num", err)
	}
	if m, err := c.fs.Meminfo(); err == nil {
		if kb, ok := m.Get("MemTotal"); ok {
			info.memoryMB = strconv.FormatUint(kb/1024, 10)
		}
	} else {
		c.unmeasured("host.mem", "system_os.memory_MB", err)
	}
	info.hostType = hostType(c.fs)
	st, err := c.fs.Stat()
	switch {
	case err != nil:
		c.unmeasured("host.btime", "system_os.os_btime", err)
	case st.BootTime == 0:
		c.unmeasured("host.btime", "system_os.os_btime", fmt.Errorf("no btime line in /proc/stat"))
	default:
		info.btime = strconv.FormatUint(st.BootTime, 10)
	}
	return info
}

// osVersion is gala-gopher's os_version: the "...euler...version=" line of
// /etc/openEuler-latest or /etc/euleros-latest on those systems, else
// PRETTY_NAME of os-release.
func osVersion(fs procfs.FS) (string, error) {
	rel, err := fs.OSRelease()
	if err != nil {
		return "", err
	}
	latest := map[string]string{"openeuler": "/etc/openEuler-latest", "euleros": "/etc/euleros-latest"}
	if path, ok := latest[strings.ToLower(rel["ID"])]; ok {
		text, err := fs.ReadHostFile(path)
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(text, "\n") {
			k, v, ok := strings.Cut(line, "=")
			k = strings.ToLower(k)
			if ok && strings.Contains(k, "euler") && strings.Contains(k, "version") {
				return strings.TrimSpace(v), nil
			}
		}
		return "", fmt.Errorf("%s has no version line", path)
	}
	if v := rel["PRETTY_NAME"]; v != "" {
		return v, nil
	}
	return "", fmt.Errorf("os-release has no PRETTY_NAME")
}

// vmVendors are DMI vendor or product strings of hypervisors.
var vmVendors = []string{"qemu", "kvm", "vmware", "virtualbox", "innotek", "xen", "bochs", "parallels",
	"bhyve", "microsoft corporation virtual", "amazon ec2", "google compute engine", "openstack", "alibaba cloud ecs"}

// hostType tells a virtual machine from a physical one, as
// `systemd-detect-virt --vm` would: the CPU's hypervisor flag (x86), a
// /sys/hypervisor entry (Xen), or a hypervisor's DMI vendor or product.
// Containers are judged by the host they run on.
func hostType(fs procfs.FS) string {
	if infos, err := fs.CPUInfo(); err == nil && len(infos) > 0 && slices.Contains(infos[0].Flags, "hypervisor") {
		return "vm"
	}
	if t, err := fs.HypervisorType(); err == nil && t != "" {
		return "vm"
	}
	for _, attr := range []string{"sys_vendor", "product_name", "bios_vendor"} {
		v, err := fs.DMI(attr)
		if err != nil {
			continue
		}
		v = strings.ToLower(v)
		for _, vm := range vmVendors {
			if strings.Contains(v, vm) {
				return "vm"
			}
		}
	}
	return "pm"
}

// ifaceAddrs is one network interface with its addresses.
type ifaceAddrs struct {
	name     string
	up, loop bool
	addrs    []net.IP
}

func interfaceAddrs() ([]ifaceAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]ifaceAddrs, 0, len(ifs))
	for _, i := range ifs {
		ia := ifaceAddrs{name: i.Name, up: i.Flags&net.FlagUp != 0, loop: i.Flags&net.FlagLoopback != 0}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ia.addrs = append(ia.addrs, n.IP)
			}
		}
		out = append(out, ia)
	}
	return out, nil
}

// hostIPs is gala-gopher's ip_addr: the addresses of the interfaces that
// are up and not loopback (only devName's when set), IPv6 link-local ones
// left out, space separated.
func hostIPs(ifs []ifaceAddrs, devName string) string {
	var out []string
	for _, i := range ifs {
		if !i.up || i.loop || (devName != "" && !strings.EqualFold(devName, i.name)) {
			continue
		}
		for _, ip := range i.addrs {
			if ip.To4() == nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
				continue
			}
			out = append(out, ip.String())
		}
	}
	return strings.Join(out, " ")
}
