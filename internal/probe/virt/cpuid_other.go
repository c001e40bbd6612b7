//go:build !amd64

package virt

// cpuidHypervisor: only x86 has CPUID; other architectures rely on
// /sys/hypervisor, the device tree and DMI.
func cpuidHypervisor() (string, bool) { return "", false }
