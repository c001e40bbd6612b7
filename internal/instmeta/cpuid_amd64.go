package instmeta

import "encoding/binary"

func cpuid(eax, ecx uint32) (a, b, c, d uint32)

// cpuHypervisor is the hypervisor's CPUID vendor signature (leaf
// 0x40000000, EBX ECX EDX), "" when CPUID.1:ECX bit 31 says no hypervisor.
func cpuHypervisor() string {
	if _, _, c, _ := cpuid(1, 0); c&(1<<31) == 0 {
		return ""
	}
	_, b, c, d := cpuid(0x40000000, 0)
	var sig [12]byte
	binary.LittleEndian.PutUint32(sig[0:], b)
	binary.LittleEndian.PutUint32(sig[4:], c)
	binary.LittleEndian.PutUint32(sig[8:], d)
	return string(sig[:])
}
