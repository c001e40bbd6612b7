package instmeta

import "encoding/binary"

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// CPUIDSignature returns the hypervisor vendor signature of CPUID leaf
// 0x40000000 (EBX, ECX, EDX) when leaf 1 sets the hypervisor-present bit
// (ECX bit 31); ok is false on bare metal.
func CPUIDSignature() (sig string, ok bool) {
	_, _, ecx, _ := cpuid(1, 0)
	if ecx&(1<<31) == 0 {
		return "", false
	}
	_, b, c, d := cpuid(0x40000000, 0)
	var buf [12]byte
	binary.LittleEndian.PutUint32(buf[0:], b)
	binary.LittleEndian.PutUint32(buf[4:], c)
	binary.LittleEndian.PutUint32(buf[8:], d)
	return string(buf[:]), true
}
