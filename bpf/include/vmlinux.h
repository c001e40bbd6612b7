/* Selects the kernel type definitions for the target architecture. bpf2go
 * passes -D__TARGET_ARCH_<arch> for each -target; CO-RE relocates every field
 * access at load time, so these headers only need the right names and the
 * arch-specific register layout (pt_regs), not the running kernel's offsets. */
#ifndef GALAGO_VMLINUX_SWITCH_H
#define GALAGO_VMLINUX_SWITCH_H

#if defined(__TARGET_ARCH_x86)
#include "x86/vmlinux.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arm64/vmlinux.h"
#else
#error "galago: define __TARGET_ARCH_x86 or __TARGET_ARCH_arm64 (bpf2go -target amd64,arm64 does)"
#endif

#endif
