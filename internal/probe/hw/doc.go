// Package hw is gala-gopher's "hw" feature (hwprobe): NIC failures
// (nic_failure) and memory controller errors (mem_mc_event), with the
// nic_xmit_timeout event. Sub-items hw_nic and hw_mem.
//
// Sources:
//
//	table / field                    source
//	nic_failure carrier_up_count,    /sys/class/net/<dev>/carrier_up_count, carrier_down_count (Linux 4.16+),
//	            carrier_down_count   read every report period: one row per interface of the host's network
//	                                 namespace, key name = <dev>, labels dev_name and driver (the parent
//	                                 device's driver from device/driver; none for virtual devices)
//	nic_failure xmit_timeout_count   raw_tp/net_dev_xmit_timeout (the TX watchdog's timeout): one row per
//	                                 device and TX queue that timed out in the period, key name =
//	                                 <dev>:<queue> (+ "@netns:<inode>" for a device in another network
//	                                 namespace), labels dev_name, driver, queue_index; the value is the
//	                                 count in the period. Each row raises the nic_xmit_timeout event
//	                                 (entity hw, id <dev>_<driver>), whatever report_event says, as in
//	                                 gala-gopher.
//	mem_mc_event error_count         raw_tp/mc_event (EDAC and GHES memory error reports): one row per
//	                                 (err_type, mc_index, top_layer, mid_layer, label) with errors in the
//	                                 period, key name = mc<index>:<top>:<mid>:<err_type>:<label>; the
//	                                 value is the errors reported in the period (error_count summed).
//
// Differences from gala-gopher: its key name is the constant "nic" or
// "mem", which would make every row the same row in galago's store, so the
// key names the device and queue, or the error kind and location. Its
// carrier counts come from a kprobe on netif_carrier_off (no kprobes here)
// and were reported only when a carrier went down; galago reads the same
// kernel counters from sysfs every period, for every interface. Its
// carrier counts sit on the per-queue timeout rows too; galago keeps them
// on the interface rows only, so no sum counts them twice.
//
// What this kernel cannot measure: nothing is missing, but neither
// tracepoint fires on this VM: virtio and veth devices have no TX watchdog
// (ndo_tx_timeout), and the kernel is built without EDAC (CONFIG_EDAC off)
// and without a GHES source, so mc_event exists but is never raised. The
// privileged tests drive both programs with BPF_PROG_TEST_RUN instead. The
// carrier counters of devices in other network namespaces are not read
// (sysfs shows the mounting process's namespace); their TX timeouts are.
// A kernel without one of the raw tracepoints logs the missing hook once,
// naming what it disables; without BPF at all, hw_nic still reports the
// carrier counts and hw_mem fails to start.
//
// Cost: two programs on tracepoints that fire only on hardware faults; per
// report period, two reads per interface in sysfs and one walk of each
// counter map. Bounds: each map keeps 1024 keys; a report of a new key that
// finds its map full is counted as lost (galago_probe_events_lost_total).
package hw
