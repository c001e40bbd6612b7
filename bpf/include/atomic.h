/* atomic.h: atomic helpers shared by BPF programs. Include after common.h. */
#ifndef GALAGO_ATOMIC_H
#define GALAGO_ATOMIC_H

/* galago_max_u64 raises *p to v atomically (a few compare-and-swap tries:
 * a maximum lost to a storm of concurrent larger updates is still one of
 * them). */
static __always_inline void galago_max_u64(__u64 *p, __u64 v)
{
	for (int i = 0; i < 4; i++) {
		__u64 cur = *p;

		if (v <= cur || __sync_val_compare_and_swap(p, cur, v) == cur)
			return;
	}
}

#endif /* GALAGO_ATOMIC_H */
