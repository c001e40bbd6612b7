//go:build !amd64

package instmeta

// cpuHypervisor: only x86 has the CPUID hypervisor leaf; other
// architectures rely on /sys/hypervisor/type and DMI.
func cpuHypervisor() string { return "" }
