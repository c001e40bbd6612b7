package instmeta

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/galago-project/galago/internal/procfs"
)

// Hypervisor is what this host runs on.
type Hypervisor struct {
	// Name is systemd-detect-virt's identifier (kvm, qemu, vmware,
	// microsoft, xen, oracle, ...), "" on bare metal; "unknown" when a
	// hypervisor is present but does not say which.
	Name string
	// Source names where it was read: "cpuid", "/sys/hypervisor/type",
	// "device-tree", "dmi <attr>", "cpuinfo flags".
	Source string
}

// VM reports whether a hypervisor was seen.
func (h Hypervisor) VM() bool { return h.Name != "" }

// cpuidVendors maps CPUID leaf 0x40000000 signatures to names.
var cpuidVendors = map[string]string{
	"KVMKVMKVM\x00\x00\x00":    "kvm",
	"Linux KVM Hv":             "kvm", // KVM with Hyper-V enlightenments
	"TCGTCGTCGTCG":             "qemu",
	"Microsoft Hv":             "microsoft",
	"VMwareVMware":             "vmware",
	"XenVMMXenVMM":             "xen",
	"VBoxVBoxVBox":             "oracle",
	"bhyve bhyve ":             "bhyve",
	" lrpepyh  vr":             "parallels",
	"ACRNACRNACRN":             "acrn",
	"QNXQVMBSQG\x00\x00":       "qnx",
	"SRESRESRESRE":             "sre",
	"Apple VZ\x00\x00\x00\x00": "apple",
}

// dmiVendors maps lower-case DMI vendor or product substrings to names, in
// the order systemd-detect-virt checks them.
var dmiVendors = []struct{ substr, name string }{
	{"kvm", "kvm"}, {"amazon ec2", "amazon"}, {"qemu", "qemu"}, {"vmware", "vmware"},
	{"innotek gmbh", "oracle"}, {"virtualbox", "oracle"}, {"oraclecloud", "oracle"},
	{"xen", "xen"}, {"bochs", "bochs"}, {"parallels", "parallels"}, {"bhyve", "bhyve"},
	{"hyper-v", "microsoft"}, {"microsoft corporation", "microsoft"}, {"google compute engine", "google"},
	{"apple virtualization", "apple"},
}

// DetectHypervisor identifies the hypervisor under root's host, in the
// order of systemd-detect-virt --vm: DMI first (it names clouds that run
// KVM, e.g. amazon), then CPUID, /sys/hypervisor (Xen PV), the device
// tree (arm64), and last the cpuinfo hypervisor flag, which says only that
// there is one. cpuid describes the CPU galago runs on, whatever root is.
func DetectHypervisor(fs procfs.FS, cpuid func() (string, bool)) Hypervisor {
	for _, attr := range []string{"sys_vendor", "product_name", "board_vendor", "bios_vendor"} {
		v, err := fs.DMI(attr)
		if err != nil || v == "" {
			continue
		}
		lv := strings.ToLower(v)
		for _, d := range dmiVendors {
			if strings.Contains(lv, d.substr) {
				return Hypervisor{Name: d.name, Source: "dmi " + attr}
			}
		}
	}
	if sig, ok := cpuid(); ok {
		if name, known := cpuidVendors[sig]; known {
			return Hypervisor{Name: name, Source: "cpuid"}
		}
		return Hypervisor{Name: "unknown", Source: "cpuid"}
	}
	if t, err := fs.HypervisorType(); err == nil && t != "" {
		return Hypervisor{Name: t, Source: "/sys/hypervisor/type"}
	}
	if b, err := os.ReadFile(filepath.Join(fs.Path("/proc/device-tree/hypervisor"), "compatible")); err == nil {
		c := strings.ToLower(string(b))
		switch {
		case strings.Contains(c, "linux,kvm"):
			return Hypervisor{Name: "kvm", Source: "device-tree"}
		case strings.Contains(c, "xen"):
			return Hypervisor{Name: "xen", Source: "device-tree"}
		case strings.Contains(c, "vmware"):
			return Hypervisor{Name: "vmware", Source: "device-tree"}
		}
		return Hypervisor{Name: "unknown", Source: "device-tree"}
	}
	if infos, err := fs.CPUInfo(); err == nil && len(infos) > 0 && slices.Contains(infos[0].Flags, "hypervisor") {
		return Hypervisor{Name: "unknown", Source: "cpuinfo flags"}
	}
	return Hypervisor{}
}
