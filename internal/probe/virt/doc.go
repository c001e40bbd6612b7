// Package virt is gala-gopher's "virt" feature: virt_proc, one row per
// QEMU/KVM guest process running on this host, and the host's own
// hypervisor, identified once at start and logged.
//
// Sources (no virsh, systemd-detect-virt or ps is run):
//
//	virt_proc tgid      every /proc/<pid> whose argv[0] is a QEMU system emulator
//	                    (qemu-system-<arch>, qemu-kvm, kvm), read every report period
//	          vm_name   the command line's -name (guest=<name>, or the bare value;
//	                    ",," unescaped), else libvirt's machine cgroup of the process
//	                    (/machine.slice/machine-qemu\x2d<id>\x2d<name>.scope or
//	                    /machine/qemu-<id>-<name>.libvirt-qemu, any hierarchy), else unset
//	          uuid      -uuid, else -smbios type=1,uuid=; lower-cased; unset when absent
//	                    or not a UUID
//	          value     1, the constant the table defines
//	hypervisor          DMI vendor and product (/sys/class/dmi/id: names clouds that run
//	                    KVM, e.g. amazon), CPUID leaf 0x40000000's signature (x86),
//	                    /sys/hypervisor/type (Xen), /proc/device-tree/hypervisor (arm64),
//	                    the cpuinfo hypervisor flag; in systemd-detect-virt --vm's order
//	                    and with its names (kvm, qemu, vmware, microsoft, xen, oracle, ...)
//
// Differences from gala-gopher: it asks systemd-detect-virt and, on a
// physical host only, virsh list for names and UUIDs, so a guest libvirt
// does not manage (plain qemu) or a nested guest is not listed; galago
// reads the same names from the QEMU command lines libvirt writes, on any
// host. A guest started without -name and outside libvirt's cgroups has no
// vm_name label rather than a guessed one.
//
// This VM is itself a KVM guest (CPUID "KVMKVMKVM", no DMI): the probe logs
// the hypervisor with where it read it, and virt_proc stays empty unless a
// QEMU runs inside it.
//
// Cost: per report period one readdir of /proc and one read of each
// process's cmdline (at most 256 KiB each; longer is an error, logged once),
// plus the cgroup file of QEMU processes without -name.
package virt
