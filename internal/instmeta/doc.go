// Package instmeta reads the facts about the machine itself that users
// group hosts by, without any network call: the DMI (SMBIOS) strings of
// /sys/class/dmi/id (vendor, product, board, BIOS, serial numbers, system
// UUID), the hypervisor in systemd-detect-virt's order and names (DMI,
// CPUID leaf 0x40000000 on x86, /sys/hypervisor/type, the device tree, the
// cpuinfo flag; DetectHypervisor, which the virt probe uses too), the
// cloud provider, instance type and instance id
// where the provider writes them into DMI (AWS Nitro, Azure, GCP, Alibaba,
// Oracle, OpenStack, ...) and the region and zone from the kubelet's
// --node-labels (topology.kubernetes.io/region and zone) in its flag files.
//
// Limits: no instance metadata service is queried (it needs the network,
// which an agent must not block on, and differs per cloud), so region,
// zone and instance ids that only the metadata service knows are absent;
// machines without DMI (many ARM and some minimal VMs) give no DMI fields;
// serial numbers and the system UUID are readable by root only; DMI
// placeholders ("To be filled by O.E.M.", "Default string", ...) are
// treated as absent.
package instmeta
