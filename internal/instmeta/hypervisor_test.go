package instmeta

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/galago-project/galago/internal/procfs"
)

func TestDetectHypervisor(t *testing.T) {
	write := func(root, p, s string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	none := func() (string, bool) { return "", false }
	kvm := func() (string, bool) { return "KVMKVMKVM\x00\x00\x00", true }
	odd := func() (string, bool) { return "SomethingNew", true }

	bare := t.TempDir()
	write(bare, "proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme sse2\n\n")
	ec2 := t.TempDir()
	write(ec2, "sys/class/dmi/id/sys_vendor", "Amazon EC2\n")
	qemu := t.TempDir()
	write(qemu, "sys/class/dmi/id/sys_vendor", "QEMU\n")
	xen := t.TempDir()
	write(xen, "sys/hypervisor/type", "xen\n")
	arm := t.TempDir()
	write(arm, "proc/device-tree/hypervisor/compatible", "linux,kvm\x00")
	flag := t.TempDir()
	write(flag, "proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor\n\n")

	for _, tt := range []struct {
		name  string
		root  string
		cpuid func() (string, bool)
		want  Hypervisor
	}{
		{"bare metal", bare, none, Hypervisor{}},
		{"cpuid kvm", bare, kvm, Hypervisor{"kvm", "cpuid"}},
		{"cpuid unknown", bare, odd, Hypervisor{"unknown", "cpuid"}},
		{"dmi before cpuid", ec2, kvm, Hypervisor{"amazon", "dmi sys_vendor"}},
		{"dmi qemu", qemu, none, Hypervisor{"qemu", "dmi sys_vendor"}},
		{"xen pv", xen, none, Hypervisor{"xen", "/sys/hypervisor/type"}},
		{"arm64 device tree", arm, none, Hypervisor{"kvm", "device-tree"}},
		{"cpuinfo flag only", flag, none, Hypervisor{"unknown", "cpuinfo flags"}},
	} {
		if got := DetectHypervisor(procfs.FS{Root: tt.root}, tt.cpuid); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
