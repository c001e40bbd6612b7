//go:build ignore

/* hw: NIC transmit timeouts and memory controller errors (gala-gopher
 * hwprobe: nic_failure xmit_timeout_count, mem_mc_event error_count).
 *
 * Hooks (raw tracepoints, so BPF_PROG_TEST_RUN can drive them in tests):
 *   raw_tp/net_dev_xmit_timeout (struct net_device *dev, int queue_index):
 *     fired by the TX watchdog (dev_watchdog) when a queue stopped longer
 *     than dev->watchdog_timeo; one count per (netns, device, queue).
 *   raw_tp/mc_event (err_type, error_msg, label, error_count, mc_index,
 *     top_layer, mid_layer, low_layer, address, grain_bits, syndrome,
 *     driver_detail): fired by EDAC (edac_raw_mc_handle_error) and by the
 *     GHES/APEI path for each memory controller error report; error_count
 *     errors are added per (err_type, mc_index, top_layer, mid_layer, label).
 * Maps: xmit_timeouts and mc_errors, counts since load; user space reads
 *   them once per report period and reports the growth, never clears them.
 *   A new key that finds its map full is not stored: drops[0] (NIC) and
 *   drops[1] (MC) count those events, exported as lost events.
 * Kernel: raw tracepoints (4.17+), CO-RE for net_device; no kprobes. */
#include "common.h"

#define HW_IFNAMSIZ 16
#define HW_DRIVER_LEN 32
#define HW_LABEL_LEN 64
#define HW_MAX_KEYS 1024

struct nic_key {
	__u32 netns;     /* inode of the device's network namespace */
	__s32 queue;     /* TX queue index */
	char dev[HW_IFNAMSIZ];
	char driver[HW_DRIVER_LEN]; /* parent device's driver; "" for virtual devices */
};

struct mc_key {
	__u32 err_type;  /* enum hw_event_mc_err_type */
	__u8 mc_index;
	__s8 top_layer;
	__s8 mid_layer;
	__u8 pad;
	char label[HW_LABEL_LEN];
};

GALAGO_EXPORT_TYPE(struct nic_key, nic_key);
GALAGO_EXPORT_TYPE(struct mc_key, mc_key);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HW_MAX_KEYS);
	__type(key, struct nic_key);
	__type(value, __u64);
} xmit_timeouts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HW_MAX_KEYS);
	__type(key, struct mc_key);
	__type(value, __u64);
} mc_errors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

static __always_inline void count(void *map, void *key, __u64 n, __u32 drop_slot)
{
	__u64 *v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, n);
		return;
	}
	if (bpf_map_update_elem(map, key, &n, BPF_NOEXIST) == 0)
		return;
	/* Another CPU may have added the key meanwhile. */
	v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, n);
		return;
	}
	__u64 *d = bpf_map_lookup_elem(&drops, &drop_slot);
	if (d)
		__sync_fetch_and_add(d, 1);
}

SEC("raw_tp/net_dev_xmit_timeout")
int BPF_PROG(hw_xmit_timeout, struct net_device *dev, int queue_index)
{
	struct nic_key key = {};
	key.queue = queue_index;
	if (dev) {
		bpf_probe_read_kernel_str(key.dev, sizeof(key.dev), BPF_CORE_READ(dev, name));
		key.netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
		struct device *parent = BPF_CORE_READ(dev, dev.parent);
		if (parent) {
			const char *drv = BPF_CORE_READ(parent, driver, name);
			if (drv)
				bpf_probe_read_kernel_str(key.driver, sizeof(key.driver), drv);
		}
	}
	count(&xmit_timeouts, &key, 1, 0);
	return 0;
}

SEC("raw_tp/mc_event")
int BPF_PROG(hw_mc_event, unsigned int err_type, const char *error_msg, const char *label,
	     int error_count, __u8 mc_index, __s8 top_layer, __s8 mid_layer)
{
	struct mc_key key = {};
	key.err_type = err_type;
	key.mc_index = mc_index;
	key.top_layer = top_layer;
	key.mid_layer = mid_layer;
	if (label)
		bpf_probe_read_kernel_str(key.label, sizeof(key.label), label);
	/* Every caller reports at least one error; a report of none adds
	 * nothing rather than a guessed one. */
	if (error_count <= 0)
		return 0;
	count(&mc_errors, &key, (__u64)error_count, 1);
	return 0;
}
