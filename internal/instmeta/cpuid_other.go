//go:build !amd64

package instmeta

// CPUIDSignature: only x86 has CPUID; other architectures rely on
// /sys/hypervisor, the device tree and DMI.
func CPUIDSignature() (string, bool) { return "", false }
